package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// runCLIFor runs the command in-process as runCLI does, but cancels it
// after d, as SIGTERM would: for a command that might serve.
func runCLIFor(t *testing.T, d time.Duration, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
	code := exitCode(err, &stderr)
	return stdout.String(), stderr.String(), code
}

// TestUnknownEnv: a CHATMEM_ variable no command reads is an error, on
// one line naming it, the name it is closest to and the help, so that
// CHATMEM_STOR=memory: does not leave serve on its default SQLite file;
// CHATMEM_ALLOW_UNKNOWN_ENV=true makes it a warning.
func TestUnknownEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CHATMEM_STOR", "memory:")
	out, errOut, code := runCLIFor(t, 10*time.Second, "serve", "--addr", "127.0.0.1:0", "--data-dir", dir)
	want := "chatmem: serve: unknown environment variable CHATMEM_STOR (did you mean CHATMEM_STORE?): no chatmem command reads it; " +
		"unset it, or set CHATMEM_ALLOW_UNKNOWN_ENV=true to only warn; run chatmem serve --help\n"
	if code != 2 || out != "" || errOut != want {
		t.Errorf("CHATMEM_STOR=memory: chatmem serve: exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errOut, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "chatmem.db")); err == nil {
		t.Error("serve opened the default SQLite file despite the unknown variable")
	}

	// Every command refuses it, window too; with a typo of its own, the
	// name meant is its own.
	t.Setenv("CHATMEM_WINDOW_BUDGT", "40")
	_, errOut, code = runCLI(t, seedJSON, "window")
	if code != 2 || !strings.Contains(errOut, "unknown environment variables CHATMEM_STOR (did you mean CHATMEM_STORE?), CHATMEM_WINDOW_BUDGT (did you mean CHATMEM_WINDOW_BUDGET?)") ||
		!strings.HasSuffix(errOut, "; run chatmem window --help\n") {
		t.Errorf("window with two unknown variables: exit %d, stderr %q", code, errOut)
	}
	os.Unsetenv("CHATMEM_WINDOW_BUDGT")

	t.Setenv("CHATMEM_ALLOW_UNKNOWN_ENV", "maybe")
	if _, errOut, code = runCLI(t, seedJSON, "window"); code != 2 || !strings.Contains(errOut, `CHATMEM_ALLOW_UNKNOWN_ENV: "maybe" is not a boolean`) {
		t.Errorf("CHATMEM_ALLOW_UNKNOWN_ENV=maybe: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("CHATMEM_ALLOW_UNKNOWN_ENV", "true")
	out, errOut, code = runCLI(t, seedJSON, "window")
	if code != 0 || !strings.Contains(out, `"messages"`) ||
		errOut != "chatmem: window: warning: unknown environment variable CHATMEM_STOR (did you mean CHATMEM_STORE?): no chatmem command reads it; ignored (CHATMEM_ALLOW_UNKNOWN_ENV)\n" {
		t.Errorf("CHATMEM_ALLOW_UNKNOWN_ENV=true window: exit %d, stdout %q, stderr %q; want the window and a warning", code, out, errOut)
	}
}

// TestKnownEnvStarts: the variables other commands read, the shared ones
// and those tests and CI set are no error: CI runs the soak and fault
// tests, which start chatmem serve, with its environment.
func TestKnownEnvStarts(t *testing.T) {
	for k, v := range map[string]string{
		"CHATMEM_BENCH_STORE":           "memory:",
		"CHATMEM_EVAL_DATA":             "x",
		"CHATMEM_IMPORT_TENANT":         "acme",
		"CHATMEM_WINDOW_CONFIG":         "",
		"CHATMEM_ARTIFACTS":             t.TempDir(),
		"CHATMEM_FAULTS_SUMMARY":        filepath.Join(t.TempDir(), "faults.txt"),
		"CHATMEM_SQLITE_TEST_WRITER_DB": "x",
		"CHATMEM_BIN":                   "chatmem",
		"CHATMEM_POSTGRES_URL":          "postgres://127.0.0.1/test",
		"CHATMEM_API_KEY":               "k1",
		"CHATMEM_TENANT":                "me",
	} {
		t.Setenv(k, v)
	}
	base, log := serveWithLog(t, "--addr", "127.0.0.1:0", "--store", "memory:")
	if !strings.HasPrefix(base, "http://127.0.0.1:") || strings.Contains(log.String(), "unknown environment") {
		t.Errorf("serve with the known variables: %s, log %q", base, log.String())
	}
}

// TestDocumentedEnv: every CHATMEM_ variable the manifests and docs name
// is read by some command (or is one of the tests' and CI's, or a command's
// prefix), so that a typo in a manifest fails here rather than being
// ignored by a deployment.
func TestDocumentedEnv(t *testing.T) {
	files := []string{"../../compose.yaml", "../../Dockerfile", "../../README.md"}
	for _, glob := range []string{"../../deploy/kubernetes/*.yaml", "../../docs/*.md"} {
		m, err := filepath.Glob(glob)
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: %v, %d files", glob, err, len(m))
		}
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range unknownEnvNames(string(b)) {
			if f == "../../docs/configuration.md" && bad == "CHATMEM_STOR" {
				continue // the example of the error an unknown variable is
			}
			t.Errorf("%s names %s, which no chatmem command reads", f, bad)
		}
	}
	// The check catches the typo the Deployment once had.
	if got := unknownEnvNames("env:\n  - name: CHATMEM_STOR\n  - name: CHATMEM_STORE\n  - CHATMEM_BENCH_* and CHATMEM_\n"); !slices.Equal(got, []string{"CHATMEM_STOR"}) {
		t.Errorf("unknownEnvNames of a manifest with CHATMEM_STOR = %q", got)
	}
}

var envName = regexp.MustCompile(`CHATMEM_[A-Z0-9_]*`)

// unknownEnvNames returns the CHATMEM_ names in text that no command
// reads; a name ending in _ is a prefix, known if a command's.
func unknownEnvNames(text string) []string {
	known := knownEnv()
	var prefixes []string
	for _, c := range settingsOf() {
		prefixes = append(prefixes, c.EnvPrefix)
	}
	prefixes = append(prefixes, testEnvPrefixes...)
	var bad []string
	for _, name := range envName.FindAllString(text, -1) {
		if strings.HasSuffix(name, "_") && slices.Contains(prefixes, name) || isKnownEnv(name, known) || slices.Contains(bad, name) {
			continue
		}
		bad = append(bad, name)
	}
	return bad
}

package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/chatmem/chatmem/internal/settings"
)

// envAllowUnknown demotes an unknown CHATMEM_ variable from an error to a
// warning, for an environment that sets one chatmem does not read on
// purpose.
const envAllowUnknown = "CHATMEM_ALLOW_UNKNOWN_ENV"

// testEnv are the CHATMEM_ variables that chatmem's tests, CI and test
// clients read, none of them a setting: chatmem runs in environments that
// set them (CI's, and the soak, fault and MCP tests start chatmem with
// theirs), where they are not typos. testEnvPrefixes start families of
// them.
var (
	testEnv = []string{
		"CHATMEM_ARTIFACTS",              // .ci/run: the inspector test's screenshots
		"CHATMEM_ERASE_ITERATIONS",       // storetest: iterations of the erasure race
		"CHATMEM_BIN",                    // testdata/mcp-node: the chatmem binary
		"CHATMEM_MCP_URL",                // testdata/mcp-node: the /mcp endpoint
		"CHATMEM_OTHER_KEY",              // testdata/mcp-node: a second tenant's key
		"CHATMEM_TRANSPORTS",             // testdata/mcp-node: stdio, http
		"CHATMEM_MCP_TRANSCRIPT",         // cmd/chatmem TestMCPStdio: where to save the session
		"CHATMEM_PROXY_URL",              // testdata/node: the proxy's /v1
		"CHATMEM_CONVERSATION",           // testdata/node: the conversation
		"CHATMEM_MODEL",                  // testdata/node: the model passed through
		"CHATMEM_TURNS",                  // testdata/node: the turns of a history script
		"CHATMEM_TRIM",                   // testdata/node: the newest messages a history script sends
		"CHATMEM_POSTGRES_URL",           // internal/testenv: the tests' PostgreSQL
		"CHATMEM_REDIS_URL",              // internal/testenv: the tests' Redis
		"CHATMEM_REPLICA_BENCH",          // replicas: run the measurements
		"CHATMEM_REPLICA_BENCH_DURATION", // replicas: for how long
		"CHATMEM_USER_BENCH_DB",          // sqlite: keep the user search benchmark's database
	}
	testEnvPrefixes = []string{
		"CHATMEM_FAULTS_",      // faults: CHATMEM_FAULTS_SUMMARY (set by .ci/run), the helpers'
		"CHATMEM_SQLITE_TEST_", // sqlite: the concurrent writer processes'
	}
)

// knownEnv returns every CHATMEM_ variable that some command reads (each
// setting's, each config file's), the escape hatch, and the tests'.
func knownEnv() []string {
	known := []string{envAllowUnknown}
	for _, c := range settingsOf() {
		known = append(known, c.ConfigEnvName())
		for _, s := range c.Settings {
			known = append(known, c.EnvName(s.Name))
		}
	}
	known = append(known, testEnv...)
	slices.Sort(known)
	return slices.Compact(known)
}

// isKnownEnv reports whether name is a variable of known or of a test
// family.
func isKnownEnv(name string, known []string) bool {
	if _, ok := slices.BinarySearch(known, name); ok {
		return true
	}
	for _, p := range testEnvPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// checkEnv refuses the CHATMEM_ variables of environ that no command reads,
// as a config file's unknown keys are refused: CHATMEM_STOR=memory: would
// otherwise leave serve on its default SQLite file without a word. The
// error names each, the known name it is closest to, and the help. With
// CHATMEM_ALLOW_UNKNOWN_ENV=true it is a warning on stderr instead.
func checkEnv(cmd *settings.Command, environ []string, stderr io.Writer) error {
	known := knownEnv()
	var unknown []string
	allow := ""
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if name == envAllowUnknown {
			allow = value
		}
		if !strings.HasPrefix(name, "CHATMEM_") || isKnownEnv(name, known) {
			continue
		}
		u := name
		if m := settings.Closest(name, known); m != "" {
			u += " (did you mean " + m + "?)"
		}
		unknown = append(unknown, u)
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	what := "unknown environment variable " + strings.Join(unknown, ", ")
	if len(unknown) > 1 {
		what = "unknown environment variables " + strings.Join(unknown, ", ")
	}
	hint := "run chatmem " + cmd.Name + " --help"
	ok, err := false, error(nil)
	if allow != "" {
		if ok, err = strconv.ParseBool(allow); err != nil {
			return usageErr("%s: %s: %q is not a boolean: want true or false; %s", cmd.Name, envAllowUnknown, allow, hint)
		}
	}
	if ok {
		fmt.Fprintf(stderr, "chatmem: %s: warning: %s: no chatmem command reads it; ignored (%s)\n", cmd.Name, what, envAllowUnknown)
		return nil
	}
	return usageErr("%s: %s: no chatmem command reads it; unset it, or set %s=true to only warn; %s", cmd.Name, what, envAllowUnknown, hint)
}

package outside

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeQuickStart copies the Go program of README.md's "Quick start
// in Go" into a module of its own (requiring github.com/chatmem/chatmem
// through a replace to this checkout), runs it in an empty directory, and
// checks that it prints exactly the output the README shows: the facts,
// a summary and the newest messages, on its first run.
func TestReadmeQuickStart(t *testing.T) {
	goTool := goCommand(t)
	root := checkoutRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := sectionOf(string(readme), "## Quick start in Go\n")
	if !ok {
		t.Fatal(`README.md has no "## Quick start in Go" section`)
	}
	prog, ok := between(section, "```go\n", "```\n")
	if !ok {
		t.Fatal("README.md's quick start has no ```go block")
	}
	wantOut, ok := between(section, "it prints\nthe facts, the summary of the older messages and the newest ones that fit:\n\n", "\n\n")
	if !ok {
		t.Fatal("README.md's quick start shows no output after its program")
	}
	var want strings.Builder
	for line := range strings.Lines(wantOut) {
		want.WriteString(strings.TrimPrefix(line, "    "))
	}

	mod := outsideModule(t, "example.com/quickstart", []byte(prog))
	bin := filepath.Join(t.TempDir(), "quickstart")
	build := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, ".")
	build.Dir = mod
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of README.md's quick start: %v\n%s", err, out)
	}
	run := exec.CommandContext(t.Context(), bin)
	run.Dir = t.TempDir() // its chatmem.db starts empty: the first run
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("README.md's quick start: %v\n%s", err, stderr.String())
	}
	if got := strings.TrimSpace(string(out)); got != strings.TrimSpace(want.String()) {
		t.Errorf("README.md's quick start printed\n%s\nwant (as README.md shows)\n%s", got, want.String())
	}
	for _, part := range []string{"User facts: name=Kavya", "Summary of messages 1-", "user: And when does my order arrive again?"} {
		if !strings.Contains(string(out), part) {
			t.Errorf("README.md's quick start printed no %q: a window with facts, a summary and the newest message", part)
		}
	}
}

// sectionOf returns the text of s from heading to the next "## " heading.
func sectionOf(s, heading string) (string, bool) {
	i := strings.Index(s, heading)
	if i < 0 {
		return "", false
	}
	rest := s[i+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j+1]
	}
	return rest, true
}

// between returns the text of s after the first from and before the
// next to.
func between(s, from, to string) (string, bool) {
	i := strings.Index(s, from)
	if i < 0 {
		return "", false
	}
	s = s[i+len(from):]
	j := strings.Index(s, to)
	if j < 0 {
		return "", false
	}
	return s[:j], true
}

package outside

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// issueRef matches a reference to a tracker issue ("issue 18", "issue
// 22's", "issue-18", "issues #3"), which means nothing to a reader of the
// docs. The messages' markers ("[#412 ...]", "#3 user:") are not matched.
var issueRef = regexp.MustCompile(`(?i)\bissues?[ -]#?[0-9]+`)

// TestDocsNameNoIssues checks that the user documentation (README.md,
// ARCHITECTURE.md, CHANGELOG.md and docs/) refers to no issue by number:
// a doc says what is true and how to measure it, not which issue asked.
func TestDocsNameNoIssues(t *testing.T) {
	root := checkoutRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs/*.md: %v, %d files", err, len(files))
	}
	for _, name := range []string{"README.md", "ARCHITECTURE.md", "CHANGELOG.md"} {
		files = append(files, filepath.Join(root, name))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := issueRef.FindString(line); m != "" {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s:%d names %q", rel, i+1, m)
			}
		}
	}
	for _, s := range []string{"issue 18's job", "Issue 17, a fourth time", "issue-18", "issues #3"} {
		if !issueRef.MatchString(s) {
			t.Errorf("issueRef misses %q", s)
		}
	}
	for _, s := range []string{"[#412 2023-05-08 13:56] ", `"#3 user: Ok."`, "an issue with 3 parts"} {
		if issueRef.MatchString(s) {
			t.Errorf("issueRef matches %q, which names no issue", s)
		}
	}
}

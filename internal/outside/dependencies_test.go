package outside

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDependenciesListed checks that docs/dependencies.md names every
// direct dependency in go.mod, and the LICENSE file is there: a dependency
// whose licence nobody read does not ship.
func TestDependenciesListed(t *testing.T) {
	root := filepath.Join("..", "..")
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil || !strings.Contains(string(lic), "Apache License\n                           Version 2.0, January 2004") {
		t.Errorf("LICENSE is not the Apache License 2.0 (%v)", err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "dependencies.md"))
	if err != nil {
		t.Fatal(err)
	}
	direct := directRequires(t, filepath.Join(root, "go.mod"))
	if len(direct) == 0 {
		t.Fatal("found no direct requirements in go.mod")
	}
	for _, m := range direct {
		if !strings.Contains(string(doc), "| `"+m+"` |") {
			t.Errorf("docs/dependencies.md has no row for %s, a direct dependency in go.mod: read its licence and add it", m)
		}
	}
}

// directRequires returns the module paths go.mod requires without an
// "// indirect" comment, in both the block and the one-line forms.
func directRequires(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mods []string
	inBlock := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inBlock:
			continue
		}
		if fields := strings.Fields(line); len(fields) >= 2 && !strings.Contains(line, "// indirect") {
			mods = append(mods, fields[0])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return mods
}

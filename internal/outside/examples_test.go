package outside

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExamplesOutsideModule copies the root package's example files
// (example*_test.go) into a module of its own, beside a stub package,
// and runs their examples there with `go test`: an example that imports
// an internal package, or anything else a user cannot import, fails to
// build, and one whose output drifted fails its // Output: check.
func TestExamplesOutsideModule(t *testing.T) {
	goTool := goCommand(t)
	root := checkoutRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "example*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	mod := outsideModule(t, "example.com/chatmem", []byte("// Package chatmem is a stub beside the copied examples.\npackage chatmem\n"))
	if err := os.Rename(filepath.Join(mod, "main.go"), filepath.Join(mod, "stub.go")); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		if err := os.WriteFile(filepath.Join(mod, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"func ExampleNew()", "func ExampleMemory_Turn()", "func Example_seed()"} {
		if !strings.Contains(all.String(), name) {
			t.Errorf("the root example files have no %s", name)
		}
	}

	cmd := exec.CommandContext(t.Context(), goTool, "test", "-count=1", "-run", "^Example", "-v", ".")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test of the root examples in a module that requires github.com/chatmem/chatmem: %v\n%s", err, out)
	}
	for _, name := range []string{"ExampleNew", "ExampleMemory_Turn", "Example_seed"} {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not run and pass outside the module:\n%s", name, out)
		}
	}
}

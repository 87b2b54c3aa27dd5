package outside

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// seedOutput is what the seed's program prints, byte for byte.
const seedOutput = `budget 100: keeps 5 messages (63 tokens), first: "Hi, I'm Kavya. My order SE-104"
budget  40: keeps 3 messages (36 tokens), first: 'Ok. Also, do you have running '
budget  25: keeps 1 messages (9 tokens), first: 'Add the DryFit ones to my cart'
`

// TestOutsideModule writes a module of its own in a temporary directory,
// requiring github.com/chatmem/chatmem with a replace to this checkout,
// runs testdata/seedreplay in it with `go run`, and compares what it prints
// with the seed's output. It needs no network when the module cache holds
// chatmem's dependencies (the checkout's go.sum is copied, and GOPROXY is
// the environment's; GOPROXY=off makes a missing module fail at once).
func TestOutsideModule(t *testing.T) {
	goTool := goCommand(t)
	src, err := os.ReadFile("testdata/seedreplay/main.go")
	if err != nil {
		t.Fatal(err)
	}
	mod := outsideModule(t, "example.com/seedreplay", src)

	data := t.TempDir()
	cmd := exec.CommandContext(t.Context(), goTool, "run", ".", data)
	cmd.Dir = mod
	// -mod=mod lets go add the indirect requirements the stub go.mod lacks;
	// GOWORK=off keeps any workspace of the machine out.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run in a module that requires github.com/chatmem/chatmem: %v\n%s", err, stderr.String())
	}
	if string(out) != seedOutput {
		t.Errorf("the outside program printed\n%s\nwant the seed's output\n%s", out, seedOutput)
	}
	if _, err := os.Stat(filepath.Join(data, "chatmem.db")); err != nil {
		t.Errorf("the program did not use the SQLite store in %s: %v", data, err)
	}
}

// goCommand returns the path of the go command; a test without one skips,
// except under CI, where it fails.
func goCommand(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the go command is needed: %v", err)
		}
		t.Skipf("no go command: %v", err)
	}
	return goTool
}

// checkoutRoot returns the absolute path of this checkout.
func checkoutRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// outsideModule writes, in a temporary directory it returns, a module
// named path whose main.go is src and which requires
// github.com/chatmem/chatmem through a replace to this checkout (with the
// checkout's go.sum).
func outsideModule(t *testing.T, path string, src []byte) string {
	t.Helper()
	root := checkoutRoot(t)
	mod := t.TempDir()
	goMod := "module " + path + "\n\ngo 1.26.0\n\n" +
		"require github.com/chatmem/chatmem v0.0.0\n\n" +
		"replace github.com/chatmem/chatmem => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"go.mod": []byte(goMod), "go.sum": sum, "main.go": src} {
		if err := os.WriteFile(filepath.Join(mod, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return mod
}

package sqlite

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storetest"
)

// open opens a store at path and closes it when the test ends.
func open(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), path, Options{})
	if err != nil {
		tb.Fatalf("Open(%s) error = %v", path, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close(%s) error = %v", path, err)
		}
	})
	return s
}

// TestStore runs the conformance suite; Reopen opens the same file again,
// as a second process would.
func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) chatmem.Store {
			return open(t, filepath.Join(t.TempDir(), "chatmem.db"))
		},
		Reopen: func(t *testing.T, s chatmem.Store) chatmem.Store {
			return open(t, s.(*Store).path)
		},
		Dump:       dumpFile,
		EraseSteps: func(s chatmem.Store, step func()) { s.(*Store).eraseStep = step },
	})
}

// dumpFile returns the bytes of the store's database file, its WAL and its
// shared-memory index, all there is of it on disk.
func dumpFile(t *testing.T, s chatmem.Store) []byte {
	t.Helper()
	var out []byte
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(s.(*Store).path + suffix)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

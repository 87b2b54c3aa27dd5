package storekit_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// maxInvalidLines bounds the lines of the four stores' non-test Go files
// that mention ErrInvalid, code and doc comments alike (the measure of
// `grep -n ErrInvalid memstore/*.go sqlite/*.go redis/*.go postgres/*.go |
// grep -v _test.go | wc -l` from the module root). Argument checks the
// contract asks of every store belong in this package, and a method's doc
// leaves the errors chatmem.Store already documents to the contract.
const maxInvalidLines = 60

// TestStoresUseTheKit fails when the stores build their own ErrInvalid
// errors again, or repeat in their docs what the contract says of it,
// beyond maxInvalidLines lines. What is a store's own (a URL it cannot
// parse, text PostgreSQL cannot hold, a time SQLite cannot store) stays
// in the store; an argument check every store makes goes into storekit.
func TestStoresUseTheKit(t *testing.T) {
	total, code := 0, 0
	var lines []string
	for _, dir := range []string{"memstore", "sqlite", "redis", "postgres"} {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go files in ../%s", dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range strings.Split(string(b), "\n") {
				if !strings.Contains(l, "ErrInvalid") {
					continue
				}
				total++
				if !strings.HasPrefix(strings.TrimSpace(l), "//") {
					code++
				}
				lines = append(lines, filepath.ToSlash(strings.TrimPrefix(f, ".."+string(filepath.Separator)))+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(l))
			}
		}
	}
	t.Logf("%d lines of the stores mention ErrInvalid, %d of them code (at most %d allowed)", total, code, maxInvalidLines)
	if total > maxInvalidLines {
		t.Errorf("%d lines of the stores' non-test files mention ErrInvalid, over %d: move argument checks every store makes into storekit, and leave to chatmem.Store's docs what they say already:\n%s",
			total, maxInvalidLines, strings.Join(lines, "\n"))
	}
}

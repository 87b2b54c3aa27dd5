package chatmem_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
)

// TestSeedExampleData checks that Example_seed, which imports nothing
// internal so that it runs outside the module, holds the seed's
// conversation (testdata/seed.json and internal/seed, which chatmem demo
// prints from) and formats windows as internal/seed does.
func TestSeedExampleData(t *testing.T) {
	got := seedHistory()
	if want := seed.History(); !reflect.DeepEqual(got, want) {
		t.Errorf("Example_seed's history = %+v, internal/seed's %+v", got, want)
	}
	b, err := os.ReadFile("testdata/seed.json")
	if err != nil {
		t.Fatal(err)
	}
	var file []chatmem.Message
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, file) {
		t.Errorf("Example_seed's history = %+v, testdata/seed.json's %+v", got, file)
	}
	for _, budget := range seed.Budgets {
		for n := 0; n <= len(got); n++ {
			w := chatmem.Window{Messages: got[len(got)-n:], Tokens: budget}
			if a, b := seedLine(budget, w), seed.Line(budget, w); a != b {
				t.Errorf("seedLine(%d, newest %d) = %s, internal/seed's Line %s", budget, n, a, b)
			}
		}
	}
}

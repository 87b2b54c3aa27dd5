package progress

import (
	"bytes"
	"strings"
	"testing"
)

func TestBar(t *testing.T) {
	var out bytes.Buffer
	b := New(&out, "filling", 4)
	b.Set(2)
	b.Done()
	s := out.String()
	if !strings.HasPrefix(s, "\rfilling [") || !strings.Contains(s, "  0%") || !strings.HasSuffix(s, "] 100%\n") {
		t.Errorf("bar = %q, want 0%% first and 100%% with a newline last", s)
	}
	if strings.Count(s, "100%") != 1 {
		t.Errorf("bar = %q: 100%% drawn more than once", s)
	}
}

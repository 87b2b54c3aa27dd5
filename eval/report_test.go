package eval

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestWriteTable prints the last_turns(2) row of TestLastTurnsByHand: its
// figures, the data stats, and category 5 apart.
func TestWriteTable(t *testing.T) {
	d := loadFixture(t, "locomo_tiny.json", LoadLoCoMo)
	cfg := config([]chatmem.PolicyKind{chatmem.PolicyLastTurns}, nil)
	cfg.Turns = 2
	res := run(t, d, cfg)
	var out bytes.Buffer
	if err := WriteTable(&out, res); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"locomo: 1 conversations, 12 messages, 6 questions; tokenizer estimate",
		"evidence: 1 malformed and 1 unresolved IDs skipped; 1 questions without evidence, 1 without valid evidence",
		"Overall (categories 1-4):",
		"Evidence recall by category (n: questions scored):",
		"Answer presence by category",
		"cat 5 apart (n=1)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	var row []string
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "last_turns(2)" {
			row = f
			break
		}
	}
	// recall, all-hit, any-hit, answer, tokens mean, p50, p95 (TestLastTurnsByHand).
	if want := []string{"last_turns(2)", "0.125", "0.000", "0.250", "0.167", "15", "16", "17"}; len(row) < len(want) || strings.Join(row[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("overall row = %q, want it to start %q", row, want)
	}
}

func TestWriteCharts(t *testing.T) {
	d := loadFixture(t, "locomo_tiny.json", LoadLoCoMo)
	cfg := config([]chatmem.PolicyKind{chatmem.PolicyAll, chatmem.PolicyTokenBudget}, []int{32, 64})
	cfg.Caches = []string{"", chatmem.CacheStable}
	res := run(t, d, cfg)
	dir := filepath.Join(t.TempDir(), "charts")
	if err := WriteCharts(dir, res); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"recall_vs_tokens.svg", "cumulative_tokens.svg", "recall_vs_cost.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.HasPrefix(b, []byte("<svg")) {
			t.Errorf("%s: %v, starts %.20q", name, err, b)
		}
	}
	// The cost chart: a line per provider for each of all, token_budget
	// and token_budget stable, a point per row and provider.
	b, _ := os.ReadFile(filepath.Join(dir, "recall_vs_cost.svg"))
	if n := bytes.Count(b, []byte("<polyline")); n != 6 {
		t.Errorf("cost chart: %d lines, want 6", n)
	}
	if n := bytes.Count(b, []byte("<circle")); n != 10 {
		t.Errorf("cost chart: %d points, want 10 (5 rows, 2 providers)", n)
	}
	for _, legend := range []string{"token_budget stable (by budget)", "token_budget (by budget)", "Anthropic cache"} {
		if !bytes.Contains(b, []byte(legend)) {
			t.Errorf("cost chart: no legend %q", legend)
		}
	}
	if err := WriteCharts("/dev/null/x", res); err == nil {
		t.Error("WriteCharts into a file's path: nil error")
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	locomoFixture = "../../eval/testdata/locomo_tiny.json"
	jsonlFixture  = "../../eval/testdata/tiny.jsonl"
)

func TestEvalTable(t *testing.T) {
	out, errOut, code := runCLI(t, "", "eval", "--dataset", "locomo", "--data", locomoFixture, "--budget", "32,64", "--turns", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"locomo: 1 conversations, 12 messages, 6 questions; tokenizer estimate",
		"1 malformed and 1 unresolved IDs skipped",
		"Overall (categories 1-4):",
		"token_budget@64", "summary_buffer@32",
		"Evidence recall by category", "cat 5 apart (n=1)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// last_turns(2) recalls 0.125 (see eval's TestLastTurnsByHand).
	found := false
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "last_turns(2)" && f[1] == "0.125" {
			found = true
			break
		}
	}
	if !found {
		t.Errorf("no row last_turns(2) with recall 0.125:\n%s", out)
	}
	if !strings.Contains(errOut, "replaying 1 conversations") || !strings.Contains(errOut, "100%") {
		t.Errorf("stderr lacks the progress bar: %q", errOut)
	}
}

func TestEvalJSONAndCharts(t *testing.T) {
	dir := t.TempDir()
	out, errOut, code := runCLI(t, "", "eval", "--dataset", "jsonl", "--data", jsonlFixture, "--policy", "all,token_budget", "--budget", "30", "--facts", "--json", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Dataset string `json:"dataset"`
		Rows    []struct {
			Policy  string `json:"policy"`
			Budget  int    `json:"budget"`
			Facts   bool   `json:"facts"`
			Overall struct {
				Recall    float64 `json:"evidence_recall"`
				Questions int     `json:"questions"`
			} `json:"overall"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if res.Dataset != "jsonl" || len(res.Rows) != 2 || res.Rows[0].Policy != "all" || res.Rows[0].Overall.Recall != 1 || !res.Rows[1].Facts || res.Rows[1].Budget != 30 {
		t.Errorf("json = %+v, want jsonl with all (recall 1) and token_budget@30 with facts", res)
	}
	for _, name := range []string{"recall_vs_tokens.svg", "cumulative_tokens.svg", "recall_vs_cost.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.HasPrefix(string(b), "<svg") {
			t.Errorf("%s: %v, starts %.20q", name, err, b)
		}
	}
}

func TestEvalBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--data", locomoFixture},
		{"--dataset", "csv", "--data", locomoFixture},
		{"--dataset", "locomo"},
		{"--dataset", "locomo", "--data", locomoFixture, "--budget", "10,x"},
		{"--dataset", "locomo", "--data", locomoFixture, "--policy", "all,everything"},
		{"--dataset", "locomo", "--data", locomoFixture, "--turns", "0"},
		{"--dataset", "locomo", "--data", locomoFixture, "--tokenizer", "nope"},
		{"--dataset", "locomo", "--data", "testdata/does-not-exist.json"},
		{"--dataset", "jsonl", "--data", locomoFixture}, // not JSONL
		{"--no-such-flag"},
	} {
		if _, errOut, code := runCLI(t, "", append([]string{"eval"}, args...)...); code != 2 {
			t.Errorf("eval %v: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
	}
	_, errOut, code := runCLI(t, "", "eval", "--help")
	if code != 0 || !strings.Contains(errOut, "Example:") || !strings.Contains(errOut, "chatmem eval --dataset locomo") {
		t.Errorf("eval --help: exit %d, want 0 and an example: %q", code, errOut)
	}
}

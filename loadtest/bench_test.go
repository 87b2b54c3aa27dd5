package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memory"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestBench measures a small conversation under each kind of policy and
// checks what it reports: the sizes, a window that fits the budget, and
// the conversation deleted afterwards.
func TestBench(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		policy    chatmem.Policy
		minWindow int
		maxWindow int
	}{
		// Messages of 36 tokens ("64: " and benchContent's 140 characters):
		// 400 tokens hold 11 (396), the last 15 turns' appends end on a user
		// message (64), and so does the window start (54).
		{chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}, 11, 11},
		// Turns start at user messages: 62-63 and 64.
		{chatmem.Policy{Kind: chatmem.PolicyLastTurns, Turns: 2}, 3, 3},
		{chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 400}, 1, 60},
	}
	for _, tt := range tests {
		var log bytes.Buffer
		r, err := Bench(ctx, mem, BenchConfig{Policy: tt.policy, Messages: 50, Iterations: 5}, &log)
		if err != nil {
			t.Fatalf("%s: %v", tt.policy.Kind, err)
		}
		if r.Messages != 50 || r.Policy != string(tt.policy.Kind) || r.WindowMessages < tt.minWindow || r.WindowMessages > tt.maxWindow || r.P50us <= 0 || r.P99us < r.P50us {
			t.Errorf("%s: Bench = %+v, want 50 messages and a window of %d to %d", tt.policy.Kind, r, tt.minWindow, tt.maxWindow)
		}
		// The Go loop's floor comes with token_budget, the window it makes.
		if floor := tt.policy.Kind == chatmem.PolicyTokenBudget; floor != (r.FloorP50us > 0) || floor && r.FloorRatio != r.P50us/r.FloorP50us {
			t.Errorf("%s: floor %.1f µs, ratio %.2f; want a floor and P50us over it for token_budget only", tt.policy.Kind, r.FloorP50us, r.FloorRatio)
		}
		if !strings.Contains(log.String(), "filling 50 messages") || !strings.Contains(log.String(), "100%\n") || !strings.HasSuffix(log.String(), "p50 "+strconv.FormatFloat(r.P50us, 'f', 0, 64)+" µs, p99 "+strconv.FormatFloat(r.P99us, 'f', 0, 64)+" µs; deleting the benchmark's messages\n") {
			t.Errorf("%s: progress %q", tt.policy.Kind, log.String())
		}
	}
	list, err := store.List(ctx, "bench", chatmem.PageRequest{})
	if err != nil || len(list.Conversations) != 0 {
		t.Errorf("conversations left after Bench: %+v, %v", list, err)
	}
	if _, err := Bench(ctx, mem, BenchConfig{Policy: tests[0].policy, Messages: 0, Iterations: 1}, io.Discard); err == nil {
		t.Error("Bench of 0 messages: nil error")
	}
	budget := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 5}
	if _, err := Bench(ctx, mem, BenchConfig{Policy: budget, Messages: 10, Iterations: 1}, io.Discard); !errors.Is(err, chatmem.ErrBudgetTooSmall) {
		t.Errorf("Bench with a budget below one message: %v, want ErrBudgetTooSmall", err)
	}
}

// TestBenchUserScope: with scope user, Bench spreads the messages over
// conversations of one user, measures a new conversation of theirs that
// recalls from them, and erases the user afterwards.
func TestBenchUserScope(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 400, Scope: chatmem.ScopeUser}
	r, err := Bench(ctx, mem, BenchConfig{Policy: p, Messages: 300, Iterations: 20}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.Scope != chatmem.ScopeUser || r.Conversations != 3 || r.Messages != 300 || r.WindowMessages < 1 || r.P99us < r.P50us {
		t.Errorf("Bench(scope user) = %+v, want 300 messages over 3 conversations", r)
	}
	list, err := store.List(ctx, "bench", chatmem.PageRequest{})
	if err != nil || len(list.Conversations) != 0 {
		t.Errorf("conversations left after Bench: %+v, %v", list, err)
	}
	var table bytes.Buffer
	if err := WriteBench(&table, []BenchResult{r}, false); err != nil || !strings.Contains(table.String(), "recall/user") || !strings.Contains(table.String(), "300 in 3 convs") {
		t.Errorf("table = %q, %v; want recall/user and 300 in 3 convs", table.String(), err)
	}
}

func TestWriteBench(t *testing.T) {
	results := []BenchResult{{Store: "memory", Policy: "token_budget", Messages: 1000, Budget: 4000, P50us: 10, P99us: 20}, {Store: "memory", Policy: "token_budget", Messages: 100000, Budget: 4000, P50us: 15, P99us: 30}}
	var table bytes.Buffer
	if err := WriteBench(&table, results, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "p50 at 100000 messages / p50 at 1000: 1.50x") {
		t.Errorf("table lacks the ratio:\n%s", table.String())
	}
	var lines bytes.Buffer
	if err := WriteBench(&lines, results, true); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&lines)
	for i := range results {
		var r BenchResult
		if err := dec.Decode(&r); err != nil || r != results[i] {
			t.Errorf("JSON line %d = %+v, %v; want %+v", i, r, err, results[i])
		}
	}
}

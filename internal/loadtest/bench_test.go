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
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestBench measures a small conversation under each kind of policy and
// checks what it reports: the sizes, a window that fits the budget, and
// the conversation deleted afterwards.
func TestBench(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
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
	store := memstore.New()
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

// TestBenchStoreFloor: with a Floor and a Reopen, Bench measures
// Memory.Turn, the floor and first turns (one after every 25th iteration)
// and reports their p50s and ratios; it drops the floor afterwards.
func TestBenchStoreFloor(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}
	var floor *countingFloor
	reopens := 0
	cfg := BenchConfig{Policy: p, Messages: 50, Iterations: 60,
		Floor: func(ctx context.Context, n int, content string) (StoreFloor, error) {
			f, err := LoopFloor(tokenizer.Estimate{}, p.Budget)(ctx, n, content)
			floor = &countingFloor{StoreFloor: f}
			return floor, err
		},
		Reopen: func(context.Context) (chatmem.Store, error) {
			reopens++
			return unclosed{store}, nil
		}}
	r, err := Bench(ctx, mem, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.TurnP50us <= 0 || r.StoreFloorP50us <= 0 || r.FirstTurnP50us <= 0 || r.TurnFloorRatio != r.TurnP50us/r.StoreFloorP50us || r.FirstTurnRatio != r.FirstTurnP50us/r.TurnP50us {
		t.Errorf("Bench = %+v, want positive turn, floor and first-turn p50s and their ratios", r)
	}
	// 10 warm-up and 60 measured iterations: first turns after the
	// measured iterations 0, 25 and 50.
	if floor == nil || floor.turns != 70 || !floor.dropped || reopens != 3 {
		t.Errorf("floor %+v, %d reopens; want 70 floor turns, the floor dropped and 3 reopens", floor, reopens)
	}
	// Without them, no store floor and no first turn; Memory.Turn still.
	r, err = Bench(ctx, mem, BenchConfig{Policy: p, Messages: 50, Iterations: 5}, io.Discard)
	if err != nil || r.TurnP50us <= 0 || r.StoreFloorP50us != 0 || r.TurnFloorRatio != 0 || r.FirstTurnP50us != 0 || r.FirstTurnRatio != 0 {
		t.Errorf("Bench without Floor and Reopen = %+v, %v; want Memory.Turn's p50 alone", r, err)
	}
}

// countingFloor counts a StoreFloor's turns and notes its Drop.
type countingFloor struct {
	StoreFloor
	turns   int
	dropped bool
}

func (f *countingFloor) Turn(ctx context.Context, content string) error {
	f.turns++
	return f.StoreFloor.Turn(ctx, content)
}

func (f *countingFloor) Drop(ctx context.Context) error {
	f.dropped = true
	return f.StoreFloor.Drop(ctx)
}

// unclosed is a store whose Close leaves it open: another Memory's view of
// the in-process store, for Reopen.
type unclosed struct{ chatmem.Store }

func (unclosed) Close() error { return nil }

func TestWriteBench(t *testing.T) {
	results := []BenchResult{{Store: "memory", Policy: "token_budget", Messages: 1000, Budget: 4000, P50us: 10, P99us: 20},
		{Store: "redis", Policy: "token_budget", Messages: 100000, Budget: 4000, P50us: 15, P99us: 30, FloorP50us: 2, FloorRatio: 7.5,
			TurnP50us: 12, StoreFloorP50us: 8, TurnFloorRatio: 1.5, FirstTurnP50us: 36, FirstTurnRatio: 3}}
	var table bytes.Buffer
	if err := WriteBench(&table, results, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "p50 at 100000 messages / p50 at 1000: 1.50x") {
		t.Errorf("table lacks the ratio:\n%s", table.String())
	}
	rows := strings.Split(table.String(), "\n")
	if got := strings.Fields(rows[1]); len(got) != 15 || strings.Join(got[6:13], " ") != "- - - - - - -" {
		t.Errorf("table row of the first result: %q, want 15 columns, - for each one not measured", got)
	}
	if got := strings.Fields(rows[2]); len(got) != 15 || strings.Join(got[6:13], " ") != "2.0 7.50x 12 8.0 1.50x 36 3.00x" {
		t.Errorf("table row of the second result: %q, want 15 columns with the floors and ratios", got)
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

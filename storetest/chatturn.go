package storetest

import (
	"context"
	"fmt"
	"io"
	"math"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/loadtest"
)

// ChatFloor makes a store's raw floor of a chat turn (loadtest.ChatFloor)
// on s's backend: a conversation of n messages of content. Its Drop is
// called when the measurement ends.
type ChatFloor[S chatmem.Store] func(ctx context.Context, s S, n int, content string) (loadtest.ChatFloor, error)

// ChatClock returns the ServerClock of s's server, or nil where the store
// has none (in-process stores, or a server that keeps no statistics).
type ChatClock[S chatmem.Store] func(tb testing.TB, s S) loadtest.ServerClock

// ChatTurn measures, on a store open returns (one per n in sizes, whose
// cleanup open registers), a chat turn as users make it with
// loadtest.ChatBench: on a conversation of n messages of 20 to 400
// characters, turns turns of each way (Memory.Append + Memory.Context,
// Memory.Turn, each then Memory.Append of the reply; and floor's) with
// a token_budget window of TurnBudget, the Memory's worker running and
// its catching up counted. clock may be nil, or return nil. It checks
// the results' structure (CheckChatResult) and returns them, one per n.
func ChatTurn[S chatmem.Store](tb testing.TB, sizes []int, turns int, opts chatmem.Options, open func(tb testing.TB) S,
	floor ChatFloor[S], clock ChatClock[S]) []loadtest.ChatResult {
	tb.Helper()
	var out []loadtest.ChatResult
	for _, n := range sizes {
		s := open(tb)
		mem, err := chatmem.New(s, opts)
		if err != nil {
			tb.Fatal(err)
		}
		if err := mem.Start(); err != nil {
			tb.Fatal(err)
		}
		cfg := loadtest.ChatConfig{Messages: n, Turns: turns, Budget: TurnBudget,
			Floor: func(ctx context.Context, n int, content string) (loadtest.ChatFloor, error) {
				return floor(ctx, s, n, content)
			}}
		if clock != nil {
			cfg.Server = clock(tb, s)
		}
		r, err := loadtest.ChatBench(context.Background(), mem, cfg, io.Discard)
		mem.Close()
		if err != nil {
			tb.Fatalf("ChatBench at %d messages: %v", n, err)
		}
		CheckChatResult(tb, r, n, turns, cfg.Server != nil)
		out = append(out, r)
	}
	return out
}

// CheckChatResult fails tb unless r is the structure of a ChatBench of
// turns turns of each way at n messages: the counts, a window, and every
// time and ratio finite and positive (the server's where withServer).
// It asserts no timing.
func CheckChatResult(tb testing.TB, r loadtest.ChatResult, n, turns int, withServer bool) {
	tb.Helper()
	if r.Messages != n || r.WindowMessages < 1 || r.Floor == nil {
		tb.Fatalf("ChatBench = %+v, want %d messages, a window and a floor", r, n)
	}
	positive := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
	for name, w := range map[string]loadtest.ChatWay{"append+context": r.AppendContext, "Turn": r.Turn, "floor": *r.Floor} {
		if w.Turns != turns || !positive(w.P50us) || !positive(w.WindowP50us) || !positive(w.SettledUs) || w.WindowP50us > w.P50us {
			tb.Errorf("%s at %d messages: %+v, want %d turns and positive times, the window's within the turn's", name, n, w, turns)
		}
		if withServer != positive(w.ServerUs) {
			tb.Errorf("%s at %d messages: server time %v µs per turn, want it positive: %v", name, n, w.ServerUs, withServer)
		}
	}
	ratios := []float64{r.AppendContextRatio, r.TurnRatio, r.AppendContextSettledRatio, r.TurnSettledRatio}
	if withServer {
		ratios = append(ratios, r.AppendContextServerRatio, r.TurnServerRatio)
	}
	for i, v := range ratios {
		if !positive(v) {
			tb.Errorf("ratio %d at %d messages = %v, want finite and positive: %+v", i, n, v, r)
		}
	}
}

// BenchmarkChatTurn is ChatTurn as a benchmark: for each n in sizes, a
// sub-benchmark n=N of max(b.N, 100) turns of each way (run it with
// -benchtime 300x: each run fills its conversation again), reporting the
// ways' p50s (ns), the server's time per turn (server-ns) where clock
// gives one, and each way's ratios to the floor, of the p50s, of the
// settled times (until the worker caught up) and of the server's times.
func BenchmarkChatTurn[S chatmem.Store](b *testing.B, sizes []int, opts chatmem.Options, open func(tb testing.TB) S,
	floor ChatFloor[S], clock ChatClock[S]) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			r := ChatTurn(b, []int{n}, max(b.N, 100), opts, open, floor, clock)[0]
			b.ReportMetric(r.AppendContext.P50us*1e3, "append+context-ns")
			b.ReportMetric(r.Turn.P50us*1e3, "turn-ns")
			b.ReportMetric(r.Floor.P50us*1e3, "floor-ns")
			b.ReportMetric(r.AppendContextRatio, "append+context/floor")
			b.ReportMetric(r.TurnRatio, "turn/floor")
			b.ReportMetric(r.AppendContextSettledRatio, "settled-a+c/floor")
			b.ReportMetric(r.TurnSettledRatio, "settled-turn/floor")
			if r.Floor.ServerUs > 0 {
				b.ReportMetric(r.AppendContext.ServerUs*1e3, "server-a+c-ns")
				b.ReportMetric(r.Turn.ServerUs*1e3, "server-turn-ns")
				b.ReportMetric(r.Floor.ServerUs*1e3, "server-floor-ns")
				b.ReportMetric(r.AppendContextServerRatio, "server-a+c/floor")
				b.ReportMetric(r.TurnServerRatio, "server-turn/floor")
			}
			b.ReportMetric(float64(r.WindowMessages), "window-msgs")
		})
	}
}

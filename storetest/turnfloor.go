package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TurnFloor is a store's raw floor for BenchmarkTurnFloor: the turn's job
// done directly on the backend (append a message of content, read the
// newest messages back), in one round trip: the Turn method of the store's
// floor (internal/floor: redisfloor, postgresfloor, sqlitefloor), which
// chatmem bench measures too.
type TurnFloor func(ctx context.Context, content string) error

// BenchmarkTurnFloor compares, in one loop, a turn through
// chatmem.Memory.Turn on a conversation of n messages (BenchmarkTurn's
// job: append a user message of TurnContent, assemble token_budget
// TurnBudget), the same turn as Memory.Append then Memory.Context, and
// floor, the same job done raw on the backend; and a new process's first
// turn (Memory.Turn) on the conversation with a steady one. The three
// alternate, in rotating order, so that a busy machine slows them alike; every 25th iteration (at most 40 times) a store reopen returns
// (a new client or pool: another process) takes one turn, timed from
// its Memory's first call. It reports the medians (turn-ns, floor-ns,
// first-ns, append+context-ns) and the ratios docs/performance.md reports: turn/floor
// (of the medians; and turn/floor-sum, of the totals), the same for
// append+context, and first/turn.
func BenchmarkTurnFloor(b *testing.B, s chatmem.Store, reopen func(b *testing.B) chatmem.Store, opts chatmem.Options, n int, floor TurnFloor) {
	ctx := context.Background()
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: TurnBudget}
	key := chatmem.Key{Tenant: randomTenant(), ID: fmt.Sprintf("turn-%d", n)}
	fillTurns(b, ctx, s, opts.Counter, key, n)
	mem, err := chatmem.New(s, opts)
	if err != nil {
		b.Fatal(err)
	}
	texts := TurnContents(n, 1024)
	turn := func(m *chatmem.Memory, i int) {
		msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: texts[i%len(texts)]}}
		if _, w, err := m.Turn(ctx, key, msg, chatmem.AppendOptions{}, p, chatmem.ContextOptions{}); err != nil || len(w.Messages) == 0 {
			b.Fatalf("Turn: %d messages, %v", len(w.Messages), err)
		}
	}
	// appendContext is the turn as two calls, Memory.Append then
	// Memory.Context (storetest.BenchmarkTurn's).
	appendContext := func(i int) {
		msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: texts[i%len(texts)]}}
		if _, err := mem.Append(ctx, key, msg, chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
		if w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{}); err != nil || len(w.Messages) == 0 {
			b.Fatalf("Context: %d messages, %v", len(w.Messages), err)
		}
	}
	turn(mem, 0) // fills the tail cache: a steady turn is what is measured
	var turns, floors, twos, firsts []time.Duration
	var turnSum, floorSum, twoSum time.Duration
	i := 0
	for b.Loop() {
		i++
		for k := range 3 {
			t0 := time.Now()
			switch (i + k) % 3 {
			case 0:
				turn(mem, i)
				d := time.Since(t0)
				turns, turnSum = append(turns, d), turnSum+d
			case 1:
				if err := floor(ctx, texts[i%len(texts)]); err != nil {
					b.Fatal(err)
				}
				d := time.Since(t0)
				floors, floorSum = append(floors, d), floorSum+d
			default:
				appendContext(i)
				d := time.Since(t0)
				twos, twoSum = append(twos, d), twoSum+d
			}
		}
		if i%25 == 1 && len(firsts) < 40 && reopen != nil {
			s2 := reopen(b)
			m2, err := chatmem.New(s2, opts)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			turn(m2, i)
			firsts = append(firsts, time.Since(t0))
			s2.Close()
		}
	}
	median := func(d []time.Duration) float64 {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	mt, mf, m2 := median(turns), median(floors), median(twos)
	b.ReportMetric(mt, "turn-ns")
	b.ReportMetric(mf, "floor-ns")
	b.ReportMetric(m2, "append+context-ns")
	b.ReportMetric(mt/mf, "turn/floor")
	b.ReportMetric(float64(turnSum)/float64(floorSum), "turn/floor-sum")
	b.ReportMetric(m2/mf, "append+context/floor")
	b.ReportMetric(float64(twoSum)/float64(floorSum), "append+context/floor-sum")
	if len(firsts) > 0 {
		b.ReportMetric(median(firsts), "first-ns")
		b.ReportMetric(median(firsts)/mt, "first/turn")
	}
}

// BenchmarkTurnVsFloor is a store's turn benchmark against its raw
// floor: for each n in sizes, on a store open returns (one per n, whose
// cleanup open registers), floor/n=N times the floor alone (newFloor's, on
// that store's backend) and vs-floor/n=N runs BenchmarkTurnFloor, with
// reopen opening the same store again as another process would.
func BenchmarkTurnVsFloor[S chatmem.Store](b *testing.B, sizes []int, opts chatmem.Options, open func(b *testing.B) S,
	newFloor func(b *testing.B, s S, n int) TurnFloor, reopen func(b *testing.B, s S) chatmem.Store) {
	for _, n := range sizes {
		s := open(b)
		floor := newFloor(b, s, n)
		b.Run(fmt.Sprintf("floor/n=%d", n), func(b *testing.B) {
			texts, i := TurnContents(n, 1024), 0
			for b.Loop() {
				if err := floor(b.Context(), texts[i%len(texts)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("vs-floor/n=%d", n), func(b *testing.B) {
			BenchmarkTurnFloor(b, s, func(b *testing.B) chatmem.Store { return reopen(b, s) }, opts, n, floor)
		})
	}
}

package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"chatmem"
	"chatmem/internal/testenv"
	"chatmem/storetest"
)

// timedStore counts the time spent in Append, so that BenchmarkTail can
// report how long storetest took to fill its conversations.
type timedStore struct {
	chatmem.Store
	mu       sync.Mutex
	appended time.Duration
	messages int
}

func (s *timedStore) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, key, msgs, opts)
	s.mu.Lock()
	s.appended += time.Since(start)
	s.messages += len(msgs)
	s.mu.Unlock()
	return res, err
}

// BenchmarkTail measures Tail{Tokens: 4000} (a 200-message window) on
// conversations of 1,000 to 1,000,000 messages: the time per read should not
// grow with the conversation. It logs (shown with -v) how long the fill took.
func BenchmarkTail(b *testing.B) {
	s := &timedStore{Store: open(b, newSchema(b))}
	storetest.BenchmarkTail(b, s, []int{1000, 100000, 1000000})
	b.Logf("fill: %d messages in %v (%.0f messages/s, appends of 1000)",
		s.messages, s.appended.Round(time.Millisecond), float64(s.messages)/s.appended.Seconds())
}

// BenchmarkWindowVsRaw compares Store.Tail{Tokens: 4000} on a 100,000-message
// conversation with the least a client could do: one prepared query for the
// same 200 rows by a known seq range, scanned into the same Messages. The
// difference is what the store's window logic costs.
func BenchmarkWindowVsRaw(b *testing.B) {
	const n, window = 100000, 200
	schema := newSchema(b)
	s := open(b, schema)
	key := chatmem.Key{Tenant: "bench", ID: "window"}
	fill(b, s, key, n)
	ctx := context.Background()
	// Settle the table as autovacuum would, so that neither side of the
	// comparison runs while it works.
	if _, err := testenv.PostgresAdmin(b).Exec(ctx, "VACUUM ANALYZE "+schema+".messages"); err != nil {
		b.Fatal(err)
	}

	// The raw query selects the store's columns the way a hand-written
	// reader would, and scans them into chatmem.Message.
	raw := `SELECT seq, role, content, name, tool_calls, tool_call_id, tokens, created_at, metadata
		FROM ` + schema + `.messages
		WHERE tenant = $1 AND conv_id = $2 AND seq > $3
		ORDER BY seq`
	rawTail := func() ([]chatmem.Message, error) {
		rows, err := s.Pool().Query(ctx, raw, key.Tenant, key.ID, int64(n-window))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []chatmem.Message
		var m chatmem.Message
		var content, toolCalls, metadata []byte
		dest := []any{&m.Seq, &m.Role, &content, &m.Name, &toolCalls, &m.ToolCallID, &m.Tokens, &m.CreatedAt, &metadata}
		for rows.Next() {
			m = chatmem.Message{}
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
			m.Content = string(content)
			out = append(out, m)
		}
		return out, rows.Err()
	}

	// Both must read the same window.
	got, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: 4000})
	if err != nil {
		b.Fatal(err)
	}
	want, err := rawTail()
	if err != nil {
		b.Fatal(err)
	}
	if len(got) != window || len(want) != window || got[0].Seq != want[0].Seq {
		b.Fatalf("Tail = %d messages from seq %d, raw = %d from seq %d; want %d each, same start",
			len(got), got[0].Seq, len(want), want[0].Seq, window)
	}

	// raw runs first, so that store can report the ratio to it.
	var rawPerOp time.Duration
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if msgs, err := rawTail(); err != nil || len(msgs) != window {
				b.Fatalf("%d messages, %v", len(msgs), err)
			}
		}
		rawPerOp = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("store", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if msgs, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: 4000}); err != nil || len(msgs) != window {
				b.Fatalf("%d messages, %v", len(msgs), err)
			}
		}
		if rawPerOp > 0 {
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(rawPerOp), "x-raw") // goal: at most 1.5
		}
	})
}

// BenchmarkAppend measures single-message appends to one conversation (each
// one transaction, so bound by the commit's WAL flush) and 1000-message
// batches.
func BenchmarkAppend(b *testing.B) {
	s := open(b, newSchema(b))
	ctx := context.Background()
	for _, size := range []int{1, 1000} {
		msgs := make([]chatmem.Message, size)
		for i := range msgs {
			msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: "a message of some length, as users write them", Tokens: 12}
		}
		key := chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("append-%d", size)}
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

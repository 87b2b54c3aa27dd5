package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storetest"
)

// countingStore opens a store whose committer counts its transactions.
func openCounting(t testing.TB) (*Store, *atomic.Int64) {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "group.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, &s.commit.groups
}

// TestGroupCommit: concurrent appends, to distinct conversations and to
// one, all land densely numbered, in fewer transactions than appends; the
// ones refused by their own condition (If-Match) write nothing and do not
// disturb the others in their group.
func TestGroupCommit(t *testing.T) {
	s, groups := openCounting(t)
	ctx := t.Context()
	const clients, each = 32, 10
	shared := chatmem.Key{Tenant: "t", ID: "shared"}
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	for c := range clients {
		wg.Go(func() {
			own := chatmem.Key{Tenant: "t", ID: fmt.Sprintf("own-%d", c)}
			for i := range each {
				msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: fmt.Sprintf("%d-%d", c, i), Tokens: 1}}
				if _, err := s.Append(ctx, own, msg, chatmem.AppendOptions{}); err != nil {
					t.Errorf("append to %s: %v", own, err)
				}
				if _, err := s.Append(ctx, shared, msg, chatmem.AppendOptions{}); err != nil {
					t.Errorf("append to shared: %v", err)
				}
				stale := int64(0) // wrong once shared has messages: refused
				if _, err := s.Append(ctx, shared, msg, chatmem.AppendOptions{ExpectedLastSeq: &stale}); errors.Is(err, chatmem.ErrConflict) {
					conflicts.Add(1)
				} else if err != nil {
					t.Errorf("conditional append to shared: %v", err)
				}
			}
		})
	}
	wg.Wait()
	for c := range clients {
		msgs, err := s.Range(ctx, chatmem.Key{Tenant: "t", ID: fmt.Sprintf("own-%d", c)}, 0, 0)
		if err != nil || len(msgs) != each {
			t.Fatalf("own-%d: %d messages, %v; want %d", c, len(msgs), err, each)
		}
	}
	msgs, err := s.Range(ctx, shared, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := clients*each*2 - int(conflicts.Load())
	if len(msgs) != want || conflicts.Load() < clients*each-1 {
		t.Fatalf("shared: %d messages with %d conditional appends refused; want %d (every unconditional one, at most one conditional)", len(msgs), conflicts.Load(), want)
	}
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("shared: message %d has seq %d", i, m.Seq)
		}
	}
	conv, err := s.Conversation(ctx, shared)
	if err != nil || conv.LastSeq != int64(want) || conv.Tokens != int64(want) {
		t.Fatalf("shared: %+v, %v; want last seq and tokens %d", conv, err, want)
	}
	writes := int64(clients * each * 3)
	if g := groups.Load(); g >= writes-int64(conflicts.Load()) {
		t.Fatalf("%d transactions for %d writes: no write shared a commit", g, writes)
	}
	t.Logf("%d writes in %d transactions", writes, groups.Load())
}

// TestGroupCommitCancel: a writer whose context ends before its turn runs
// nothing; once its write started it is waited for.
func TestGroupCommitCancel(t *testing.T) {
	s, _ := openCounting(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	key := chatmem.Key{Tenant: "t", ID: "c"}
	if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "x", Tokens: 1}}, chatmem.AppendOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with a cancelled context: %v, want Canceled", err)
	}
	if _, err := s.Conversation(t.Context(), key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Fatalf("conversation after a cancelled append: %v, want ErrNotFound", err)
	}
	s.Close()
	if _, err := s.Append(t.Context(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "x", Tokens: 1}}, chatmem.AppendOptions{}); err == nil {
		t.Fatal("append after Close succeeded")
	}
}

// BenchmarkAppendConcurrent: 32 clients on distinct conversations share
// commits; appends/commit is the mean group size, cpu-µs/append the
// process's CPU time per append (clients and committer), which a machine
// shared with other work disturbs less than the wall clock.
func BenchmarkAppendConcurrent(b *testing.B) {
	storetest.BenchmarkAppendConcurrent(b, func(b *testing.B) chatmem.Store {
		s, groups := openCounting(b)
		cpu := cpuTime()
		b.Cleanup(func() {
			b.ReportMetric(float64(b.N)/float64(max(groups.Load(), 1)), "appends/commit")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/append")
		})
		return s
	}, 1, 32)
}

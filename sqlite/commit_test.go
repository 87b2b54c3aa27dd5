package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// shared with other work disturbs less than the wall clock, and
// wal-pages/commit the pages a group's COMMIT wrote to the WAL.
func BenchmarkAppendConcurrent(b *testing.B) {
	storetest.BenchmarkAppendConcurrent(b, func(b *testing.B) chatmem.Store {
		s, groups := openCounting(b)
		cpu := cpuTime()
		b.Cleanup(func() {
			b.ReportMetric(float64(s.ckpt.written.Load())/float64(max(groups.Load(), 1)), "wal-pages/commit")
			b.ReportMetric(float64(b.N)/float64(max(groups.Load(), 1)), "appends/commit")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/append")
		})
		return s
	}, 1, 32)
}

// appendReq builds the write Append submits for one user message, for a
// test to run a group of its choice with runGroup.
func appendReq(t *testing.T, s *Store, key chatmem.Key, text string, opts chatmem.AppendOptions, res *chatmem.AppendResult) *writeReq {
	t.Helper()
	return appendTailReq(t, s, key, text, opts, res, nil)
}

// appendTailReq is appendReq for AppendTail's write, which reads into
// tail (nil: Append's).
func appendTailReq(t *testing.T, s *Store, key chatmem.Key, text string, opts chatmem.AppendOptions, res *chatmem.AppendResult, tail *tailRead) *writeReq {
	t.Helper()
	now := s.now()
	m := chatmem.Message{Role: chatmem.RoleUser, Content: text, Tokens: 1, CreatedAt: now}
	row, err := encode(m)
	if err != nil {
		t.Fatal(err)
	}
	fn := appendWrite(key, opts, now, time.Time{}, []chatmem.Message{m}, []messageRow{row}, [][]string{chatmem.IndexTerms(m)}, res, tail)
	return &writeReq{ctx: t.Context(), fn: fn, done: make(chan error, 1), appends: true}
}

// runGroupOf runs group as the committer would, and returns each write's
// error.
func runGroupOf(s *Store, group ...*writeReq) []error {
	s.runGroup(group)
	errs := make([]error, len(group))
	for i, req := range group {
		errs[i] = <-req.done
	}
	return errs
}

// checkMessages fails t unless each conversation holds these messages.
func checkMessages(t *testing.T, s *Store, want map[chatmem.Key][]string) {
	t.Helper()
	for key, want := range want {
		msgs, err := s.Range(t.Context(), key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, m := range msgs {
			if m.Seq != int64(i+1) {
				t.Fatalf("%s: message %d has seq %d", key.ID, i, m.Seq)
			}
			got = append(got, m.Content)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s holds %q, want %q", key.ID, got, want)
		}
	}
}

// TestGroupCommitFailedWrite: in a group of appends, which run without a
// savepoint each, an append that restarts an expired conversation first
// has the group's index rows written; an append refused before it writes
// (If-Match) fails alone; one that fails after it wrote (a new
// conversation when conversation numbers are exhausted: refused after the
// counter's update) fails alone too, and leaves nothing: the group runs
// again, each append in its savepoint, and the others commit in one
// transaction.
func TestGroupCommitFailedWrite(t *testing.T) {
	s, groups := openCounting(t)
	ctx := t.Context()
	a, b, c := chatmem.Key{Tenant: "t", ID: "a"}, chatmem.Key{Tenant: "t", ID: "b"}, chatmem.Key{Tenant: "t", ID: "c"}
	one := []chatmem.Message{{Role: chatmem.RoleUser, Content: "first", Tokens: 1}}
	for _, key := range []chatmem.Key{a, b} {
		if _, err := s.Append(ctx, key, one, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// c expired an hour ago.
	if _, err := s.Append(ctx, c, one, chatmem.AppendOptions{Now: s.now().Add(-2 * time.Hour), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}

	res := make([]chatmem.AppendResult, 3)
	errs := runGroupOf(s,
		appendReq(t, s, a, "alpha second", chatmem.AppendOptions{}, &res[0]),
		appendReq(t, s, c, "gamma again", chatmem.AppendOptions{}, &res[1]),
		appendReq(t, s, b, "beta second", chatmem.AppendOptions{}, &res[2]))
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if res[0].Messages[0].Seq != 2 || res[1].Messages[0].Seq != 1 || res[2].Messages[0].Seq != 2 {
		t.Fatalf("results: seqs %d, %d, %d; want 2, 1, 2", res[0].Messages[0].Seq, res[1].Messages[0].Seq, res[2].Messages[0].Seq)
	}
	// The index holds the group's appends: a's, left for the end of the
	// group, written before c's restart deleted c's old rows.
	for key, term := range map[chatmem.Key]string{a: "alpha", b: "beta", c: "gamma"} {
		postings, err := s.Postings(ctx, key, []string{term}, 100, 10)
		if err != nil || len(postings) != 1 || len(postings[0]) != 1 {
			t.Fatalf("postings of %q in %s: %v, %v; want one", term, key.ID, postings, err)
		}
	}

	if _, err := s.w.db.ExecContext(ctx, "UPDATE counters SET value = ?1 WHERE name = 'conversation'", maxConversationNum); err != nil {
		t.Fatal(err)
	}
	stale := int64(5)
	before := groups.Load()
	errs = runGroupOf(s,
		appendReq(t, s, a, "alpha third", chatmem.AppendOptions{}, &res[0]),
		appendReq(t, s, chatmem.Key{Tenant: "t", ID: "new"}, "refused", chatmem.AppendOptions{}, &res[1]),
		appendReq(t, s, b, "refused", chatmem.AppendOptions{ExpectedLastSeq: &stale}, &res[2]),
		appendReq(t, s, b, "beta third", chatmem.AppendOptions{}, &res[2]))
	if errs[0] != nil || errs[3] != nil {
		t.Fatalf("appends that should succeed: %v, %v", errs[0], errs[3])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "exhausted") {
		t.Fatalf("append to a new conversation with numbers exhausted: %v, want it refused", errs[1])
	}
	if !errors.Is(errs[2], chatmem.ErrConflict) {
		t.Fatalf("append with a stale If-Match: %v, want ErrConflict", errs[2])
	}
	if n := groups.Load() - before; n != 1 {
		t.Fatalf("%d transactions committed, want 1", n)
	}
	checkMessages(t, s, map[chatmem.Key][]string{
		a: {"first", "alpha second", "alpha third"}, b: {"first", "beta second", "beta third"}, c: {"gamma again"}})
	if res[0].Messages[0].Seq != 3 || res[2].Messages[0].Seq != 3 {
		t.Fatalf("results: seqs %d, %d; want 3, 3", res[0].Messages[0].Seq, res[2].Messages[0].Seq)
	}
	if _, err := s.Conversation(ctx, chatmem.Key{Tenant: "t", ID: "new"}); !errors.Is(err, chatmem.ErrNotFound) {
		t.Fatalf("the refused conversation: %v, want ErrNotFound", err)
	}
	var counter int64
	if err := s.r.db.QueryRowContext(ctx, "SELECT value FROM counters WHERE name = 'conversation'").Scan(&counter); err != nil || counter != maxConversationNum {
		t.Fatalf("conversation counter %d, %v: want %d, the refused append's update undone", counter, err, maxConversationNum)
	}
}

// TestGroupCommitAppendTail: AppendTail's reads, made in its group's
// transaction after its own statements, hold what the group wrote before
// them and nothing written after them, also when the group runs again
// (an append failing after it wrote).
func TestGroupCommitAppendTail(t *testing.T) {
	s, groups := openCounting(t)
	ctx := t.Context()
	a, b := chatmem.Key{Tenant: "t", ID: "a"}, chatmem.Key{Tenant: "t", ID: "b"}
	for _, key := range []chatmem.Key{a, b} {
		if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleSystem, Content: "system", Tokens: 1}}, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.w.db.ExecContext(ctx, "UPDATE counters SET value = ?1 WHERE name = 'conversation'", maxConversationNum); err != nil {
		t.Fatal(err)
	}
	res := make([]chatmem.AppendResult, 5)
	tails := []*tailRead{{q: chatmem.TailQuery{Tokens: 100}}, {q: chatmem.TailQuery{Turns: 5}}}
	before := groups.Load()
	errs := runGroupOf(s,
		appendReq(t, s, b, "beta before", chatmem.AppendOptions{}, &res[0]),
		appendTailReq(t, s, a, "alpha", chatmem.AppendOptions{}, &res[1], tails[0]),
		appendReq(t, s, chatmem.Key{Tenant: "t", ID: "new"}, "refused", chatmem.AppendOptions{}, &res[2]),
		appendTailReq(t, s, b, "beta", chatmem.AppendOptions{}, &res[3], tails[1]),
		appendReq(t, s, a, "alpha after", chatmem.AppendOptions{}, &res[4]))
	if errs[0] != nil || errs[1] != nil || errs[3] != nil || errs[4] != nil {
		t.Fatalf("appends that should succeed: %v", errs)
	}
	if errs[2] == nil || !strings.Contains(errs[2].Error(), "exhausted") {
		t.Fatalf("append to a new conversation with numbers exhausted: %v, want it refused", errs[2])
	}
	if n := groups.Load() - before; n != 1 {
		t.Fatalf("%d transactions committed, want 1", n)
	}
	contents := func(msgs []chatmem.Message) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.Content)
		}
		return out
	}
	for i, want := range [][]string{{"system", "alpha"}, {"system", "beta before", "beta"}} {
		read := tails[i].read
		if got := contents(read.System); !slices.Equal(got, []string{"system"}) {
			t.Errorf("AppendTail %d read system messages %q, want [system]", i, got)
		}
		if got := contents(read.Recent); !slices.Equal(got, want) {
			t.Errorf("AppendTail %d read the tail %q, want %q", i, got, want)
		}
	}
}

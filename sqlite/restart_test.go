package sqlite_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// recordingSummarizer wraps a summarizer and records the previous summary
// each call was given.
type recordingSummarizer struct {
	chatmem.Summarizer
	mu    sync.Mutex
	prevs []string
}

func (r *recordingSummarizer) Summarize(ctx context.Context, prev string, msgs []chatmem.Message) (string, error) {
	r.mu.Lock()
	r.prevs = append(r.prevs, prev)
	r.mu.Unlock()
	return r.Summarizer.Summarize(ctx, prev, msgs)
}

func (r *recordingSummarizer) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.prevs...)
}

// TestRestart runs a Memory with the offline summarizer over a file,
// closes the store, and carries on with a new store and a new Memory over
// the same file, as a restarted server does: the summary written before is
// the one found after, the next summary is made from it and moves on, and
// summary_buffer sends the stored summary followed, without a gap, by the
// messages after it.
func TestRestart(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "restart.db")
	key := chatmem.Key{Tenant: "acme", ID: "support-7"}
	policy := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 400}

	s1, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := &recordingSummarizer{Summarizer: offline.NewSummarizer(offline.Options{})}
	appendTurns(t, newMemory(t, s1, first), key, 0, 30)
	if len(first.calls()) == 0 {
		t.Fatal("the summarizer was not called over 30 turns")
	}
	before, err := s1.Summary(ctx, key)
	if err != nil {
		t.Fatalf("Summary after 30 turns: %v", err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	second := &recordingSummarizer{Summarizer: offline.NewSummarizer(offline.Options{})}
	mem := newMemory(t, s2, second)
	got, err := mem.Summary(ctx, key)
	if err != nil {
		t.Fatalf("Summary after the restart: %v", err)
	}
	if got.Text != before.Text || got.CoversSeq != before.CoversSeq || got.Tokens != before.Tokens ||
		got.Summarizer != before.Summarizer || !got.CreatedAt.Equal(before.CreatedAt) {
		t.Errorf("Summary after the restart = %+v, want %+v", got, before)
	}
	wantNoGap(t, "after the restart", mem, key, policy, before)
	if n := len(second.calls()); n != 0 {
		t.Errorf("the summarizer was called %d times before any new turn", n)
	}

	appendTurns(t, mem, key, 30, 10)
	after, err := mem.Summary(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if after.CoversSeq <= before.CoversSeq {
		t.Errorf("after 10 more turns the summary covers %d, want more than %d", after.CoversSeq, before.CoversSeq)
	}
	if calls := second.calls(); len(calls) == 0 || calls[0] != before.Text {
		t.Errorf("summarizer calls after the restart got prev %q, want the first to get the stored summary %q", calls, before.Text)
	}
	// The order ID was said in the first turn, summarized before the
	// restart: only the stored summary can have carried it over.
	if !strings.Contains(after.Text, "SE-10423") {
		t.Errorf("summary after the restart = %q, want it to keep the order ID SE-10423", after.Text)
	}
	wantNoGap(t, "after 10 more turns", mem, key, policy, after)
}

// newMemory returns a Memory over s that summarizes with sum inside Append.
func newMemory(t *testing.T, s chatmem.Store, sum chatmem.Summarizer) *chatmem.Memory {
	t.Helper()
	mem, err := chatmem.New(s, chatmem.Options{
		Counter:    tokenizer.Estimate{},
		Summarizer: sum,
		Summary:    chatmem.SummaryOptions{Trigger: 60, Target: 30},
		Sync:       true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return mem
}

// appendTurns appends n user and assistant turns, numbered from from. The
// first turn says who the user is; the others are small talk the offline
// summarizer mostly leaves out, so the summary fits the budget.
func appendTurns(t *testing.T, mem *chatmem.Memory, key chatmem.Key, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		msgs := []chatmem.Message{
			{Role: chatmem.RoleUser, Content: "That sounds fine, thanks."},
			{Role: chatmem.RoleAssistant, Content: "You are welcome, happy to help."},
		}
		if i == 0 {
			msgs[0].Content = "Hi, I am Kavya and my order SE-10423 has not arrived."
		}
		if _, err := mem.Append(t.Context(), key, msgs, chatmem.AppendOptions{}); err != nil {
			t.Fatalf("Append of turn %d: %v", i, err)
		}
	}
}

// wantNoGap fails the test unless Context under p sends want as the
// summary, followed by the message right after the last one it covers.
func wantNoGap(t *testing.T, what string, mem *chatmem.Memory, key chatmem.Key, p chatmem.Policy, want chatmem.Summary) {
	t.Helper()
	w, err := mem.Context(t.Context(), key, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatalf("%s: Context: %v", what, err)
	}
	if w.Summary == nil {
		t.Fatalf("%s: Context sent no summary (parts %+v)", what, w.Parts)
	}
	if w.Summary.CoversSeq != want.CoversSeq || w.Summary.Text != want.Text {
		t.Errorf("%s: Context sent the summary covering %d, want the stored one covering %d", what, w.Summary.CoversSeq, want.CoversSeq)
	}
	for _, m := range w.Messages {
		if m.Metadata[chatmem.MetaKey] != "" {
			continue // the summary itself
		}
		if m.Seq != w.Summary.CoversSeq+1 {
			t.Errorf("%s: the first message after the summary has seq %d, want %d (no gap)", what, m.Seq, w.Summary.CoversSeq+1)
		}
		return
	}
	t.Errorf("%s: Context sent only the summary", what)
}

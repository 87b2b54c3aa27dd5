package chatmem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
)

// TestRewindDropsCaches: after Memory.Rewind and appends that bring the
// conversation back to the same last seq, the windows hold the new
// messages, not the rewound ones the tail cache kept, and the summary
// the rewind removed is not sent.
func TestRewindDropsCaches(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	mem := newCachedMemory(t, store, 0)
	key := chatmem.Key{Tenant: "acme", ID: "edited"}
	cachedConversation(t, mem, key)
	if err := store.PutSummary(ctx, key, chatmem.Summary{Text: "The order left on Monday.", CoversSeq: 3, Summarizer: "test"}, 0); err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 400}

	conv, err := mem.Rewind(ctx, key, 1, chatmem.RewindOptions{ExpectedLastSeq: new(int64(3))})
	if err != nil || conv.LastSeq != 1 {
		t.Fatalf("Rewind(to 1) = LastSeq %d, %v; want 1, nil", conv.LastSeq, err)
	}
	if tail, summary := chatmem.CachedOf(mem, key); tail || summary {
		t.Errorf("after Rewind the tail is cached: %v, the summary: %v; want neither", tail, summary)
	}
	if _, err := mem.Append(ctx, key, []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "Where is my order SE-20000?"},
		{Role: chatmem.RoleAssistant, Content: "It is still in the warehouse."},
	}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Summary != nil {
		t.Errorf("Context after the rewind sends summary %q, which covered rewound messages", w.Summary.Text)
	}
	var got []string
	for _, m := range w.Messages {
		got = append(got, m.Content)
	}
	want := []string{"Be brief.", "Where is my order SE-20000?", "It is still in the warehouse."}
	if len(got) != len(want) || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("Context after the rewind = %q, want %q", got, want)
	}
}

// TestRewindChecks: bad arguments and a stale last seq change nothing.
func TestRewindChecks(t *testing.T) {
	ctx := context.Background()
	mem := newCachedMemory(t, memstore.New(), 0)
	key := chatmem.Key{Tenant: "acme", ID: "a"}
	cachedConversation(t, mem, key)
	for _, c := range []struct {
		to   int64
		opts chatmem.RewindOptions
		want error
	}{
		{-1, chatmem.RewindOptions{}, chatmem.ErrInvalid},
		{4, chatmem.RewindOptions{}, chatmem.ErrInvalid},
		{1, chatmem.RewindOptions{ExpectedLastSeq: new(int64(2))}, chatmem.ErrConflict},
		{1, chatmem.RewindOptions{ExpectedRevision: new(int64(1))}, chatmem.ErrConflict},
		{3, chatmem.RewindOptions{ExpectedRevision: new(int64(1))}, chatmem.ErrConflict},
		{1, chatmem.RewindOptions{ExpectedRevision: new(int64(-1))}, chatmem.ErrInvalid},
	} {
		if _, err := mem.Rewind(ctx, key, c.to, c.opts); !errors.Is(err, c.want) {
			t.Errorf("Rewind(to %d, %+v) error = %v, want %v", c.to, c.opts, err, c.want)
		}
	}
	if _, err := mem.Rewind(ctx, chatmem.Key{Tenant: "acme", ID: "missing"}, 0, chatmem.RewindOptions{}); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Rewind of a missing conversation error = %v, want ErrNotFound", err)
	}
	if _, err := mem.Rewind(ctx, chatmem.Key{Tenant: "acme", ID: "../x"}, 0, chatmem.RewindOptions{}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Rewind(../x) error = %v, want ErrInvalid", err)
	}
	// A store that rewinds but cannot check a revision refuses one.
	lastSeqOnly := newCachedMemory(t, struct {
		chatmem.Store
		chatmem.Rewinder
	}{mem.Store(), mem.Store().(chatmem.Rewinder)}, 0)
	if _, err := lastSeqOnly.Rewind(ctx, key, 1, chatmem.RewindOptions{ExpectedRevision: new(int64(0))}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Rewind(ExpectedRevision) on a store that is no RevisionRewinder error = %v, want ErrInvalid", err)
	}
	if msgs, err := mem.Messages(ctx, key, 0, 0); err != nil || len(msgs) != 3 {
		t.Errorf("Messages after refused rewinds = %d, %v; want all 3", len(msgs), err)
	}
}

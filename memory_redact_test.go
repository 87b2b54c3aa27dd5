package chatmem_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/sqlite"
)

// openSQLite opens two stores on one new SQLite file: two processes.
func openSQLite(t *testing.T) (a, b *sqlite.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chatmem.db")
	for _, s := range []**sqlite.Store{&a, &b} {
		st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		*s = st
	}
	return a, b
}

// contents returns the contents of w's messages.
func contents(w chatmem.Window) []string {
	var out []string
	for _, m := range w.Messages {
		out = append(out, m.Content)
	}
	return out
}

// TestStaleTailAcrossProcesses: a process whose tail cache holds a
// conversation sees a rewind and re-append (to the same last seq and
// totals) and a redaction made by another process at its next read.
func TestStaleTailAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	sa, sb := openSQLite(t)
	a, b := newCachedMemory(t, sa, 0), newCachedMemory(t, sb, 0)
	key := chatmem.Key{Tenant: "acme", ID: "shared"}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}
	if _, err := a.Append(ctx, key, []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "My name is Ada Lovelace."},
		{Role: chatmem.RoleAssistant, Content: "Hello Ada, how can I help?"},
	}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Context(ctx, key, p, chatmem.ContextOptions{}); err != nil {
		t.Fatal(err)
	}
	if tail, _ := chatmem.CachedOf(a, key); !tail {
		t.Fatal("after a read the tail is not cached")
	}

	// The other process regenerates the reply: same length, same count.
	if _, err := b.Rewind(ctx, key, 1, chatmem.RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleAssistant, Content: "Hi Ada! What can I do now?"}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := a.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(w); len(got) != 2 || got[1] != "Hi Ada! What can I do now?" {
		t.Errorf("Context after another process's rewind = %q, want the regenerated reply", got)
	}

	// The other process redacts the first message.
	conv, m, err := b.Redact(ctx, key, 1, "My name is [redacted].", chatmem.RedactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Content != "My name is [redacted]." || conv.Revision != 2 {
		t.Errorf("Redact = %q, revision %d; want the new content, revision 2", m.Content, conv.Revision)
	}
	w, err = a.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(contents(w), "|"); strings.Contains(got, "Lovelace") {
		t.Errorf("Context after another process's redaction = %q, still holds the old text", got)
	}
	// A turn through the cache's conditional append sees it too.
	_, w, err = a.Turn(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "What is my name?"}}, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(contents(w), "|"); strings.Contains(got, "Lovelace") || !strings.Contains(got, "[redacted]") {
		t.Errorf("Turn after another process's redaction = %q, want the redacted text only", got)
	}
}

// TestRedactRecounts: the redacted message is counted again with the
// conversation's tokenizer, and the window and totals follow.
func TestRedactRecounts(t *testing.T) {
	ctx := context.Background()
	sa, _ := openSQLite(t)
	mem := newCachedMemory(t, sa, 0)
	key := chatmem.Key{Tenant: "acme", ID: "r"}
	cachedConversation(t, mem, key)
	before, err := mem.Conversation(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	conv, m, err := mem.Redact(ctx, key, 2, "Where is my order [id]?", chatmem.RedactOptions{ExpectedLastSeq: new(int64(3))})
	if err != nil {
		t.Fatal(err)
	}
	// The seed estimate: 27 characters were 6 tokens, 23 are 5.
	if m.Tokens != 5 || conv.Tokens != before.Tokens-1 || m.Role != chatmem.RoleUser || m.Seq != 2 {
		t.Errorf("Redact = %+v, Tokens %d; want 5 tokens, a user message at 2, total %d", m, conv.Tokens, before.Tokens-1)
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(w); len(got) != 3 || got[1] != "Where is my order [id]?" {
		t.Errorf("Context after the redaction = %q", got)
	}
}

// TestRedactChecks: bad arguments, an invalid result and a stale last seq
// change nothing.
func TestRedactChecks(t *testing.T) {
	ctx := context.Background()
	sa, _ := openSQLite(t)
	mem := newCachedMemory(t, sa, 0)
	key := chatmem.Key{Tenant: "acme", ID: "a"}
	cachedConversation(t, mem, key)
	for _, c := range []struct {
		seq     int64
		content string
		opts    chatmem.RedactOptions
		want    error
	}{
		{0, "x", chatmem.RedactOptions{}, chatmem.ErrInvalid},
		{4, "x", chatmem.RedactOptions{}, chatmem.ErrInvalid},
		{2, "", chatmem.RedactOptions{}, chatmem.ErrInvalid},
		{2, "a\x00b", chatmem.RedactOptions{}, chatmem.ErrInvalid},
		{2, "x", chatmem.RedactOptions{ExpectedLastSeq: new(int64(2))}, chatmem.ErrConflict},
	} {
		if _, _, err := mem.Redact(ctx, key, c.seq, c.content, c.opts); !errors.Is(err, c.want) {
			t.Errorf("Redact(%d, %q, %+v) error = %v, want %v", c.seq, c.content, c.opts, err, c.want)
		}
	}
	if _, _, err := mem.Redact(ctx, chatmem.Key{Tenant: "acme", ID: "missing"}, 1, "x", chatmem.RedactOptions{}); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Redact of a missing conversation error = %v, want ErrNotFound", err)
	}
	msgs, err := mem.Messages(ctx, key, 0, 0)
	if err != nil || len(msgs) != 3 || msgs[1].Content != "Where is my order SE-10423?" {
		t.Errorf("Messages after refused redactions = %v, %v; want them unchanged", msgs, err)
	}
	if conv, err := mem.Conversation(ctx, key); err != nil || conv.Revision != 0 {
		t.Errorf("Revision after refused redactions = %d, %v; want 0", conv.Revision, err)
	}
}

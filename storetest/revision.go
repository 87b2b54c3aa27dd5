package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// testRewindRevisionConflict checks AppendOptions.ExpectedRevision: the
// conversation's revision matches (0 for one the append creates), and a
// stale one (the conversation was rewound, or redacted, since) wraps
// ErrConflict, as a stale ExpectedLastSeq does, and writes nothing, even
// when appends brought the conversation back to the LastSeq and totals
// the caller read. It is checked after the idempotency key, on every
// path of the append (with and without a key, AppendTail).
func testRewindRevisionConflict(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	one := func(text string) []chatmem.Message { return []chatmem.Message{msg(chatmem.RoleUser, text, 1)} }

	// A conversation the append creates is at revision 0.
	fresh := randomKey("rev-new")
	_, err := s.Append(ctx, fresh, one("early"), chatmem.AppendOptions{ExpectedRevision: ptr[int64](1)})
	wantErr(t, "Append(ExpectedRevision=1) to a new conversation", err, chatmem.ErrConflict)
	wantNotFound(t, s, fresh)
	_, err = s.Append(ctx, fresh, one("bad"), chatmem.AppendOptions{ExpectedRevision: ptr[int64](-1)})
	wantErr(t, "Append(ExpectedRevision=-1)", err, chatmem.ErrInvalid)
	wantNotFound(t, s, fresh)
	res := mustAppend(t, s, fresh, one("a"), chatmem.AppendOptions{ExpectedRevision: ptr[int64](0), ExpectedLastSeq: ptr[int64](0)})
	wantSeqs(t, "Append(ExpectedRevision=0) creating the conversation", res.Messages, 1)

	key := randomKey("rev")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{Tokenizer: "estimate"})
	res = mustAppend(t, s, key, one("at revision 0"), chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](8), ExpectedRevision: ptr[int64](0), IdempotencyKey: "k0"})
	wantSeqs(t, "Append(ExpectedLastSeq=8, ExpectedRevision=0)", res.Messages, 9)

	// Rewind and append back to the same LastSeq and totals: only the
	// revision tells the conversation apart from the one read before.
	read := mustConversation(t, s, key)
	mustRewind(t, s, key, 4, 9)
	mustAppend(t, s, key, []chatmem.Message{
		msg(chatmem.RoleAssistant, "indeed bananas, again", 13),
		msg(chatmem.RoleSystem, "be kind", 17),
		msg(chatmem.RoleUser, "cherries are dark", 19),
		msg(chatmem.RoleAssistant, "indeed cherries", 23),
		msg(chatmem.RoleUser, "at revision 1", 1),
	}, chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](4), IdempotencyKey: "k-back"})
	now := mustConversation(t, s, key)
	if now.LastSeq != read.LastSeq || now.Tokens != read.Tokens || now.SystemTokens != read.SystemTokens || now.Revision == read.Revision {
		t.Fatalf("after the rewind and appends: %+v; want LastSeq and totals of %+v at another revision", now, read)
	}
	before := mustRange(t, s, key, 0, 0)

	stale := func(what string, opts chatmem.AppendOptions) {
		t.Helper()
		opts.ExpectedRevision = ptr(read.Revision)
		_, err := s.Append(ctx, key, one("stale"), opts)
		wantErr(t, fmt.Sprintf("Append(%s, stale ExpectedRevision=%d)", what, read.Revision), err, chatmem.ErrConflict)
		if ta, ok := s.(chatmem.TailAppender); ok {
			_, _, err := ta.AppendTail(ctx, key, one("stale"), opts, chatmem.TailQuery{Turns: 2})
			wantErr(t, fmt.Sprintf("AppendTail(%s, stale ExpectedRevision=%d)", what, read.Revision), err, chatmem.ErrConflict)
		}
	}
	stale("ExpectedLastSeq=9", chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](9)})
	stale("no ExpectedLastSeq", chatmem.AppendOptions{})
	stale("an idempotency key", chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](9), IdempotencyKey: "k1"})
	stale("a tokenizer", chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](9), ExpectedTokenizer: "estimate"})
	got := mustConversation(t, s, key)
	wantConversation(t, "the conversation after refused appends", got, now)
	if got.Revision != now.Revision || !got.UpdatedAt.Equal(now.UpdatedAt) {
		t.Errorf("refused appends changed the conversation: %+v, was %+v", got, now)
	}
	wantMessages(t, "Range after refused appends", mustRange(t, s, key, 0, 0), before)

	// The retry of an append that landed replays, its revision stale or
	// not.
	res = mustAppend(t, s, key, one("at revision 1"), chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](4), ExpectedRevision: ptr(read.Revision), IdempotencyKey: "k-back"})
	if !res.Replayed {
		t.Errorf("the retry of k-back with a stale revision was not replayed: %+v", res.Messages)
	}

	res = mustAppend(t, s, key, one("current"), chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](9), ExpectedRevision: ptr(now.Revision)})
	wantSeqs(t, "Append(ExpectedLastSeq=9, current ExpectedRevision)", res.Messages, 10)
	if res.Conversation.Revision != now.Revision {
		t.Errorf("the append's result has revision %d, want %d", res.Conversation.Revision, now.Revision)
	}

	// A redaction moves the revision too.
	if _, ok := s.(chatmem.Redactor); ok {
		conv, _ := mustRedact(t, s, key, redaction(t, s, key, 2, "[redacted]", 1))
		_, err := s.Append(ctx, key, one("stale"), chatmem.AppendOptions{ExpectedLastSeq: ptr(conv.LastSeq), ExpectedRevision: ptr(now.Revision)})
		wantErr(t, "Append(ExpectedRevision) from before a redaction", err, chatmem.ErrConflict)
		res = mustAppend(t, s, key, one("after the redaction"), chatmem.AppendOptions{ExpectedLastSeq: ptr(conv.LastSeq), ExpectedRevision: ptr(conv.Revision)})
		wantSeqs(t, "Append(ExpectedRevision) after the redaction", res.Messages, conv.LastSeq+1)
	}
}

// testRevisionAfterExpiry checks that a conversation started afresh by
// an append after it expired is at revision 0, as its append result
// says, however often it was rewound before: appends conditional on
// that revision land.
func testRevisionAfterExpiry(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	one := func(text string) []chatmem.Message { return []chatmem.Message{msg(chatmem.RoleUser, text, 1)} }
	key := randomKey("rev-expired")
	t0 := time.Now()
	mustAppend(t, s, key, append(one("a"), msg(chatmem.RoleAssistant, "b", 1)), chatmem.AppendOptions{TTL: time.Hour, Now: t0})
	if conv := mustRewind(t, s, key, 1, 2); conv.Revision == 0 {
		t.Fatalf("Revision after a rewind = 0, want more")
	}
	res, err := s.Append(ctx, key, one("afresh"), chatmem.AppendOptions{Now: t0.Add(2 * time.Hour), ExpectedRevision: ptr[int64](0)})
	if err != nil {
		t.Fatalf("Append(ExpectedRevision=0) after expiry: %v", err)
	}
	wantSeqs(t, "Append after expiry", res.Messages, 1)
	if got := mustConversation(t, s, key).Revision; got != 0 || res.Conversation.Revision != 0 {
		t.Errorf("Revision after expiry: append result %d, Conversation %d; want 0 and 0", res.Conversation.Revision, got)
	}
	for i := range 2 {
		if _, err := s.Append(ctx, key, one("again"), chatmem.AppendOptions{Now: t0.Add(2 * time.Hour), ExpectedRevision: ptr[int64](0)}); err != nil {
			t.Errorf("Append %d (ExpectedRevision=0) to the conversation started afresh: %v", i+1, err)
		}
	}
}

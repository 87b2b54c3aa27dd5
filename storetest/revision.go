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

// testRewindExpectedRevision checks chatmem.RevisionRewinder: a rewind at
// a stale revision wraps ErrConflict and changes nothing, even when the
// conversation was rewound and appended back to the LastSeq the caller
// read (so the LastSeq check alone would pass); a negative revision wraps
// ErrInvalid; at the current revision the rewind is done as Rewind does
// it.
func testRewindExpectedRevision(t *testing.T, h Harness) {
	s := h.New(t)
	rw, ok := s.(chatmem.RevisionRewinder)
	if !ok {
		t.Skipf("store %T does not implement chatmem.RevisionRewinder", s)
	}
	ctx := t.Context()
	key := randomKey("rewind-rev")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	read := mustConversation(t, s, key)

	// Another process's rewind and appends bring it back to seq 8.
	mustRewind(t, s, key, 4, 8)
	mustAppend(t, s, key, rewindFixture()[4:], chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](4)})
	now := mustConversation(t, s, key)
	if now.LastSeq != read.LastSeq || now.Revision == read.Revision {
		t.Fatalf("after the rewind and appends: %+v; want the LastSeq of %+v at another revision", now, read)
	}
	want := takeSnapshot(t, s, key)
	for _, to := range []int64{2, 8} {
		_, err := rw.RewindRevision(ctx, key, to, 8, read.Revision)
		wantErr(t, fmt.Sprintf("RewindRevision(to %d, stale revision %d)", to, read.Revision), err, chatmem.ErrConflict)
	}
	_, err := rw.RewindRevision(ctx, key, 2, 7, now.Revision)
	wantErr(t, "RewindRevision(stale last seq, current revision)", err, chatmem.ErrConflict)
	_, err = rw.RewindRevision(ctx, key, 2, 8, -1)
	wantErr(t, "RewindRevision(revision -1)", err, chatmem.ErrInvalid)
	wantSnapshot(t, "after refused rewinds", s, key, want)

	conv, err := rw.RewindRevision(ctx, key, 8, 8, now.Revision)
	if err != nil {
		t.Fatalf("RewindRevision(to the last seq, current revision) error = %v", err)
	}
	wantConversation(t, "RewindRevision to the last seq", conv, now)
	conv, err = rw.RewindRevision(ctx, key, 2, 8, now.Revision)
	if err != nil {
		t.Fatalf("RewindRevision(to 2, current revision %d) error = %v", now.Revision, err)
	}
	if conv.LastSeq != 2 || conv.Revision != now.Revision+1 {
		t.Errorf("RewindRevision(to 2) = LastSeq %d, Revision %d; want 2, %d", conv.LastSeq, conv.Revision, now.Revision+1)
	}
	wantConversation(t, "Conversation after RewindRevision", mustConversation(t, s, key), conv)
	wantSeqs(t, "Range after RewindRevision", mustRange(t, s, key, 0, 0), 1, 2)
	_, err = rw.RewindRevision(ctx, randomKey("missing"), 0, 0, 0)
	wantErr(t, "RewindRevision of a missing conversation", err, chatmem.ErrNotFound)
}

package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// testAppendOrder checks that appends are numbered densely from 1 in order
// and that every field of a message survives the round trip, including
// CreatedAt (to the microsecond), Tokens, ToolCalls and Metadata. It also
// checks that the store keeps its own copies: changing the caller's
// messages, or the ones it got back, changes nothing stored.
func testAppendOrder(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("order")
	created := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	now := time.Date(2025, 1, 2, 3, 4, 5, 678901000, time.UTC)

	batch1 := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "You are a helpful shop assistant.", Tokens: 9, CreatedAt: created},
		{Role: chatmem.RoleUser, Content: "Hi, I'm Ada. Where is order A-17?", Name: "ada", Tokens: 12, CreatedAt: created,
			Metadata: map[string]string{"channel": "web", "lang": "en"}},
		{Role: chatmem.RoleAssistant, Tokens: 31, CreatedAt: created, ToolCalls: []chatmem.ToolCall{
			{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "lookup_order", Arguments: `{"id":"A-17"}`}},
			{ID: "call_2", Type: "function", Function: chatmem.FunctionCall{Name: "lookup_customer", Arguments: `{"name":"Ada"}`}},
		}},
	}
	batch2 := []chatmem.Message{
		{Role: chatmem.RoleTool, Content: `{"status":"shipped"}`, ToolCallID: "call_1", Tokens: 8},
		{Role: chatmem.RoleTool, Content: `{"tier":"gold"}`, ToolCallID: "call_2", Tokens: 7},
		{Role: chatmem.RoleAssistant, Content: "Order A-17 has shipped.", Tokens: 9, Metadata: map[string]string{"model": "m-1"}},
	}
	want := append(withSeqs(batch1, 1, now), withSeqs(batch2, 4, now)...)

	res := mustAppend(t, s, key, batch1, chatmem.AppendOptions{Now: now})
	wantMessages(t, "Append(batch 1).Messages", res.Messages, want[:3])
	if res.Replayed {
		t.Errorf("Append(batch 1).Replayed = true, want false")
	}
	if got := res.Conversation.LastSeq; got != 3 {
		t.Errorf("Append(batch 1).Conversation.LastSeq = %d, want 3", got)
	}
	if got := res.Conversation.Key; got != key {
		t.Errorf("Append(batch 1).Conversation.Key = %v, want %v", got, key)
	}
	res = mustAppend(t, s, key, batch2, chatmem.AppendOptions{Now: now})
	wantMessages(t, "Append(batch 2).Messages", res.Messages, want[3:])
	if got := res.Conversation.LastSeq; got != 6 {
		t.Errorf("Append(batch 2).Conversation.LastSeq = %d, want 6", got)
	}

	// The store must not share memory with the caller.
	batch1[1].Metadata["channel"] = "changed"
	batch1[2].ToolCalls[0].ID = "changed"
	batch2[2].Metadata["model"] = "changed"
	res.Messages[2].Metadata["model"] = "changed too"

	got := mustRange(t, s, key, 0, 0)
	wantMessages(t, "Range(0, 0)", got, want)
	got[1].Metadata["lang"] = "changed"
	got[2].ToolCalls[1].Function.Name = "changed"
	wantMessages(t, "Range(0, 0) after changing an earlier result", mustRange(t, s, key, 0, 0), want)
	tail := mustTail(t, s, key, chatmem.TailQuery{Turns: 100})
	wantMessages(t, "Tail(Turns=100)", tail, want)
	if len(tail) == len(want) {
		tail[1].Metadata["lang"] = "changed"
		tail[2].ToolCalls[0].Function.Arguments = "changed"
	}
	sys, err := s.System(t.Context(), key)
	if err != nil {
		t.Fatalf("System error = %v, want nil", err)
	}
	wantMessages(t, "System", sys, want[:1])
	if len(sys) == 1 {
		sys[0].Content = "changed"
	}
	wantMessages(t, "Tail(Tokens=1000) after changing earlier results", mustTail(t, s, key, chatmem.TailQuery{Tokens: 1000}), want)

	// A zero Now means the store's clock; a zero CreatedAt means Now.
	before := time.Now()
	res = mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "Thanks!", 2)}, chatmem.AppendOptions{})
	after := time.Now()
	wantSeqs(t, "Append(zero Now).Messages", res.Messages, 7)
	stored := mustRange(t, s, key, 6, 0)
	wantSeqs(t, "Range(6, 0)", stored, 7)
	for _, m := range append(res.Messages, stored...) {
		if m.CreatedAt.Before(before.Add(-time.Second)) || m.CreatedAt.After(after.Add(time.Second)) {
			t.Errorf("CreatedAt of a message appended with zero Now = %v, want between %v and %v", m.CreatedAt, before, after)
		}
	}
}

// testNotFound checks that every read and Delete of an unknown conversation
// wraps ErrNotFound, in an unknown tenant and in a known one.
func testNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	known := randomKey("known")
	mustAppend(t, s, known, []chatmem.Message{msg(chatmem.RoleUser, "hello", 1)}, chatmem.AppendOptions{})
	for _, key := range []chatmem.Key{randomKey("nobody"), {Tenant: known.Tenant, ID: "other"}} {
		wantNotFound(t, s, key)
		wantErr(t, fmt.Sprintf("Delete(%s)", key), s.Delete(t.Context(), key), chatmem.ErrNotFound)
	}
}

// testEmptyBatch checks that an append of no messages wraps ErrInvalid and
// neither creates nor changes a conversation.
func testEmptyBatch(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("empty")
	for _, batch := range [][]chatmem.Message{nil, {}} {
		_, err := s.Append(t.Context(), key, batch, chatmem.AppendOptions{IdempotencyKey: "k"})
		wantErr(t, fmt.Sprintf("Append(%#v) to a new conversation", batch), err, chatmem.ErrInvalid)
	}
	wantNotFound(t, s, key)

	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hello", 1)}, chatmem.AppendOptions{})
	_, err := s.Append(t.Context(), key, nil, chatmem.AppendOptions{})
	wantErr(t, "Append(nil) to an existing conversation", err, chatmem.ErrInvalid)
	if got := mustConversation(t, s, key).LastSeq; got != 1 {
		t.Errorf("LastSeq after an empty append = %d, want 1", got)
	}
}

// badIDs are names ValidateID refuses: each must wrap ErrInvalid wherever it
// is a tenant or a conversation ID.
var badIDs = []string{"", "../x", "a*b", "{x}", "a b", "a/b", "-x", strings.Repeat("a", 200)}

// testInvalidKeys checks that every method refuses a malformed tenant or ID
// with ErrInvalid and writes nothing.
func testInvalidKeys(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	tenant := randomTenant()
	one := []chatmem.Message{msg(chatmem.RoleUser, "hello", 1)}
	for _, bad := range badIDs {
		for _, key := range []chatmem.Key{{Tenant: bad, ID: "ok"}, {Tenant: tenant, ID: bad}} {
			name := fmt.Sprintf("%q/%q", key.Tenant, key.ID)
			if len(name) > 40 {
				name = name[:40] + "..."
			}
			_, err := s.Append(ctx, key, one, chatmem.AppendOptions{})
			wantErr(t, "Append("+name+")", err, chatmem.ErrInvalid)
			_, err = s.Conversation(ctx, key)
			wantErr(t, "Conversation("+name+")", err, chatmem.ErrInvalid)
			_, err = s.Tail(ctx, key, chatmem.TailQuery{Tokens: 100})
			wantErr(t, "Tail("+name+")", err, chatmem.ErrInvalid)
			_, err = s.Range(ctx, key, 0, 0)
			wantErr(t, "Range("+name+")", err, chatmem.ErrInvalid)
			_, err = s.System(ctx, key)
			wantErr(t, "System("+name+")", err, chatmem.ErrInvalid)
			wantErr(t, "Delete("+name+")", s.Delete(ctx, key), chatmem.ErrInvalid)
		}
		_, err := s.List(ctx, bad, chatmem.PageRequest{})
		wantErr(t, fmt.Sprintf("List(%.40q)", bad), err, chatmem.ErrInvalid)
		if p, ok := s.(chatmem.Purger); ok && bad != "" {
			_, err := p.PurgeInactive(ctx, bad, time.Now())
			wantErr(t, fmt.Sprintf("PurgeInactive(%.40q)", bad), err, chatmem.ErrInvalid)
		}
	}
	page, err := s.List(ctx, tenant, chatmem.PageRequest{})
	if err != nil || len(page.Conversations) != 0 {
		t.Errorf("List(%s) after refused appends = %d conversations, %v; want 0, nil", tenant, len(page.Conversations), err)
	}
}

// testIdempotency checks that a retried append (same idempotency key) writes
// nothing and returns the original messages with Replayed set, even when
// the retry carries other messages, a now stale ExpectedLastSeq, or races
// other retries; and that a new key appends.
func testIdempotency(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("idem")
	first := []chatmem.Message{msg(chatmem.RoleUser, "order 1", 3), msg(chatmem.RoleAssistant, "ok", 1)}
	orig := mustAppend(t, s, key, first, chatmem.AppendOptions{IdempotencyKey: "req-1", ExpectedLastSeq: ptr[int64](0)})
	wantSeqs(t, "first Append(req-1)", orig.Messages, 1, 2)

	check := func(what string, res chatmem.AppendResult, lastSeq int64) {
		t.Helper()
		if !res.Replayed {
			t.Errorf("%s: Replayed = false, want true", what)
		}
		wantMessages(t, what+": Messages", res.Messages, orig.Messages)
		if got := mustConversation(t, s, key).LastSeq; got != lastSeq {
			t.Errorf("%s: LastSeq = %d, want %d (a replay writes nothing)", what, got, lastSeq)
		}
	}
	// Retried with the same messages and the same precondition, which the
	// first attempt made stale: still a replay, not a conflict.
	res, err := s.Append(t.Context(), key, first, chatmem.AppendOptions{IdempotencyKey: "req-1", ExpectedLastSeq: ptr[int64](0)})
	if err != nil {
		t.Fatalf("retry of req-1 with its original ExpectedLastSeq 0: error = %v, want nil (a replay, not a conflict)", err)
	}
	check("retry of req-1", res, 2)

	res = mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "order 2", 3)}, chatmem.AppendOptions{IdempotencyKey: "req-2"})
	if res.Replayed {
		t.Errorf("Append(req-2).Replayed = true, want false")
	}
	wantSeqs(t, "Append(req-2)", res.Messages, 3)

	res = mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "something else", 4)}, chatmem.AppendOptions{IdempotencyKey: "req-1"})
	check("retry of req-1 with other messages, after req-2", res, 3)
	if got := mustRange(t, s, key, 0, 0); len(got) != 3 {
		t.Errorf("Range after replays = seqs %v, want [1 2 3]", seqs(got))
	}

	// Concurrent retries of one request: exactly one applies.
	key2 := chatmem.Key{Tenant: key.Tenant, ID: "idem-race"}
	const retries = 8
	results := make([]chatmem.AppendResult, retries)
	errs := make([]error, retries)
	start := make(chan struct{})
	done := make(chan int)
	for i := range retries {
		go func() {
			<-start
			results[i], errs[i] = s.Append(t.Context(), key2, first, chatmem.AppendOptions{IdempotencyKey: "same"})
			done <- i
		}()
	}
	close(start)
	for range retries {
		<-done
	}
	applied := 0
	for i := range retries {
		if errs[i] != nil {
			t.Errorf("concurrent retry %d: error = %v, want nil", i, errs[i])
			continue
		}
		if !results[i].Replayed {
			applied++
		}
		wantSeqs(t, fmt.Sprintf("concurrent retry %d", i), results[i].Messages, 1, 2)
	}
	if applied != 1 {
		t.Errorf("concurrent retries applied %d times, want 1", applied)
	}
	if got := mustConversation(t, s, key2).LastSeq; got != 2 {
		t.Errorf("LastSeq after concurrent retries = %d, want 2", got)
	}
}

// testIdempotencyFingerprint checks AppendOptions.Fingerprint: a key
// retried with its fingerprint replays; the key with another fingerprint
// wraps ErrIdempotencyKeyReused and writes nothing, before ExpectedLastSeq
// is looked at; an empty fingerprint on either side matches any; the check
// holds for a second process (Reopen) too.
func testIdempotencyFingerprint(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("idem-fp")
	first := []chatmem.Message{msg(chatmem.RoleUser, "order 1", 3)}
	fp := chatmem.Fingerprint(first)
	orig := mustAppend(t, s, key, first, chatmem.AppendOptions{IdempotencyKey: "req-1", Fingerprint: fp})
	before := mustRange(t, s, key, 0, 0)

	res := mustAppend(t, s, key, first, chatmem.AppendOptions{IdempotencyKey: "req-1", Fingerprint: fp})
	if !res.Replayed {
		t.Errorf("retry with the same fingerprint: Replayed = false, want true")
	}
	wantMessages(t, "retry with the same fingerprint", res.Messages, orig.Messages)

	other := []chatmem.Message{msg(chatmem.RoleUser, "order 2", 3)}
	for _, st := range []chatmem.Store{s, h.reopen(t, s)} {
		_, err := st.Append(t.Context(), key, other, chatmem.AppendOptions{IdempotencyKey: "req-1", Fingerprint: chatmem.Fingerprint(other)})
		wantErr(t, "Append(req-1) with another fingerprint", err, chatmem.ErrIdempotencyKeyReused)
		_, err = st.Append(t.Context(), key, other, chatmem.AppendOptions{IdempotencyKey: "req-1", Fingerprint: chatmem.Fingerprint(other), ExpectedLastSeq: ptr[int64](7)})
		wantErr(t, "Append(req-1) with another fingerprint and a stale ExpectedLastSeq", err, chatmem.ErrIdempotencyKeyReused)
	}
	wantMessages(t, "Range after the refused reuse", mustRange(t, s, key, 0, 0), before)

	// No fingerprint given: the key alone decides, as before fingerprints.
	res = mustAppend(t, s, key, other, chatmem.AppendOptions{IdempotencyKey: "req-1"})
	if !res.Replayed {
		t.Errorf("retry without a fingerprint: Replayed = false, want true")
	}
	// A key stored without a fingerprint matches any.
	mustAppend(t, s, key, other, chatmem.AppendOptions{IdempotencyKey: "req-2"})
	res = mustAppend(t, s, key, first, chatmem.AppendOptions{IdempotencyKey: "req-2", Fingerprint: fp})
	if !res.Replayed {
		t.Errorf("retry of a key stored without a fingerprint: Replayed = false, want true")
	}
	if got := mustConversation(t, s, key).LastSeq; got != 2 {
		t.Errorf("LastSeq = %d, want 2", got)
	}
}

// testConflict checks ExpectedLastSeq: 0 matches a conversation that does
// not exist yet, the current LastSeq matches, and any other value wraps
// ErrConflict and writes nothing.
func testConflict(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("cas")
	one := func(text string) []chatmem.Message { return []chatmem.Message{msg(chatmem.RoleUser, text, 1)} }

	_, err := s.Append(t.Context(), key, one("early"), chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](1)})
	wantErr(t, "Append(ExpectedLastSeq=1) to a new conversation", err, chatmem.ErrConflict)
	wantNotFound(t, s, key)

	res := mustAppend(t, s, key, one("a"), chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](0)})
	wantSeqs(t, "Append(ExpectedLastSeq=0)", res.Messages, 1)
	res = mustAppend(t, s, key, one("b"), chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](1)})
	wantSeqs(t, "Append(ExpectedLastSeq=1)", res.Messages, 2)

	for _, stale := range []int64{0, 1, 3, 99} {
		_, err := s.Append(t.Context(), key, one("stale"), chatmem.AppendOptions{ExpectedLastSeq: &stale})
		wantErr(t, fmt.Sprintf("Append(ExpectedLastSeq=%d) at LastSeq 2", stale), err, chatmem.ErrConflict)
	}
	if got := mustConversation(t, s, key).LastSeq; got != 2 {
		t.Errorf("LastSeq after conflicts = %d, want 2", got)
	}
	got := mustRange(t, s, key, 0, 0)
	wantSeqs(t, "Range after conflicts", got, 1, 2)
	for _, m := range got {
		if m.Content == "stale" || m.Content == "early" {
			t.Errorf("a refused append was stored: seq %d %q", m.Seq, m.Content)
		}
	}
	res = mustAppend(t, s, key, one("c"), chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](2)})
	wantSeqs(t, "Append(ExpectedLastSeq=2)", res.Messages, 3)
}

// testTokenizerConflict checks AppendOptions.ExpectedTokenizer: an append
// that creates the conversation matches; one to a conversation kept under
// another tokenizer fails with ErrConflict and writes nothing, whoever
// reads it (a second store over the same data too); the idempotency key
// is checked first, so a retry replays.
func testTokenizerConflict(t *testing.T, h Harness) {
	s := h.New(t)
	other := h.reopen(t, s)
	key := randomKey("tok")
	one := func(text string) []chatmem.Message { return []chatmem.Message{msg(chatmem.RoleUser, text, 1)} }

	res := mustAppend(t, s, key, one("a"), chatmem.AppendOptions{Tokenizer: "o200k_base", ExpectedTokenizer: "o200k_base"})
	wantSeqs(t, "Append(ExpectedTokenizer) creating the conversation", res.Messages, 1)
	res = mustAppend(t, s, key, one("b"), chatmem.AppendOptions{Tokenizer: "o200k_base", ExpectedTokenizer: "o200k_base", IdempotencyKey: "k1"})
	wantSeqs(t, "Append(ExpectedTokenizer=o200k_base)", res.Messages, 2)
	for _, st := range []chatmem.Store{s, other} {
		_, err := st.Append(t.Context(), key, one("stale"), chatmem.AppendOptions{Tokenizer: "estimate", ExpectedTokenizer: "estimate"})
		wantErr(t, "Append(ExpectedTokenizer=estimate) to an o200k_base conversation", err, chatmem.ErrConflict)
	}
	_, err := s.Append(t.Context(), key, one("stale"), chatmem.AppendOptions{ExpectedTokenizer: "estimate", ExpectedLastSeq: ptr[int64](2)})
	wantErr(t, "Append(ExpectedTokenizer=estimate, ExpectedLastSeq=2)", err, chatmem.ErrConflict)
	res = mustAppend(t, s, key, one("b again"), chatmem.AppendOptions{ExpectedTokenizer: "estimate", IdempotencyKey: "k1"})
	if !res.Replayed {
		t.Errorf("a retry with its idempotency key and another ExpectedTokenizer was not replayed: %+v", res.Messages)
	}
	conv := mustConversation(t, s, key)
	if conv.LastSeq != 2 || conv.Tokenizer != "o200k_base" {
		t.Errorf("after the refused appends: LastSeq %d, Tokenizer %q; want 2, o200k_base", conv.LastSeq, conv.Tokenizer)
	}
	got := mustRange(t, s, key, 0, 0)
	wantSeqs(t, "Range after the refused appends", got, 1, 2)
	res = mustAppend(t, other, key, one("c"), chatmem.AppendOptions{ExpectedTokenizer: "o200k_base"})
	wantSeqs(t, "Append(ExpectedTokenizer=o200k_base) through the second store", res.Messages, 3)

	// An expired conversation is started afresh: under the tokenizer of
	// the append, whatever it was kept under.
	const ttl = 100 * time.Millisecond
	expiring := randomKey("tok-expired")
	res = mustAppend(t, s, expiring, one("old"), chatmem.AppendOptions{Tokenizer: "o200k_base", TTL: ttl})
	time.Sleep(time.Until(res.Conversation.ExpiresAt) + 50*time.Millisecond)
	res = mustAppend(t, s, expiring, one("new"), chatmem.AppendOptions{Tokenizer: "estimate", ExpectedTokenizer: "estimate"})
	wantSeqs(t, "Append(ExpectedTokenizer=estimate) to an expired o200k_base conversation", res.Messages, 1)
	if conv := mustConversation(t, s, expiring); conv.Tokenizer != "estimate" || conv.LastSeq != 1 {
		t.Errorf("the expired conversation started afresh at %d under %q, want 1 under estimate", conv.LastSeq, conv.Tokenizer)
	}
}

// testConcurrentAppends runs 50 writers of 200 single-message appends each
// against one conversation, half of them through a second store over the
// same data, while a reader follows the conversation with Range. No append
// may be lost or duplicated, sequence numbers must be dense 1..10000, each
// writer's messages must land in its order, and the reader must never see a
// gap (a later message visible before an earlier one).
func testConcurrentAppends(t *testing.T, h Harness) {
	const writers, appends = 50, 200
	const total = writers * appends
	s1 := h.New(t)
	s2 := h.reopen(t, s1)
	key := randomKey("busy")
	ctx := t.Context()

	got := make([][]int64, writers) // seqs each writer was given
	var writersDone = make(chan struct{})
	finished := make(chan int, writers)
	for w := range writers {
		s := s1
		if w%2 == 1 {
			s = s2
		}
		go func() {
			defer func() { finished <- w }()
			for i := range appends {
				m := msg(chatmem.RoleUser, fmt.Sprintf("w%02d-%03d", w, i), 1)
				res, err := s.Append(ctx, key, []chatmem.Message{m}, chatmem.AppendOptions{})
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
				if len(res.Messages) != 1 {
					t.Errorf("writer %d append %d: %d messages back, want 1", w, i, len(res.Messages))
					return
				}
				got[w] = append(got[w], res.Messages[0].Seq)
			}
		}()
	}

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var after int64
		for {
			// Once every writer has finished, an empty read is final.
			var finished bool
			select {
			case <-writersDone:
				finished = true
			default:
			}
			msgs, err := s2.Range(ctx, key, after, 500)
			if errors.Is(err, chatmem.ErrNotFound) && after == 0 && !finished {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				t.Errorf("reader: Range(%d, 500): %v", after, err)
				return
			}
			for _, m := range msgs {
				if m.Seq != after+1 {
					t.Errorf("reader: after seq %d saw seq %d: a gap a follower would skip forever", after, m.Seq)
					return
				}
				after = m.Seq
			}
			if len(msgs) > 0 {
				continue
			}
			if finished {
				if after != total {
					t.Errorf("reader: saw %d messages after all writers finished, want %d", after, total)
				}
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for range writers {
		<-finished
	}
	close(writersDone)
	<-readerDone
	if t.Failed() {
		return
	}

	if got := mustConversation(t, s1, key).LastSeq; got != total {
		t.Errorf("LastSeq = %d, want %d", got, total)
	}
	stored := mustRange(t, s2, key, 0, 0)
	if len(stored) != total {
		t.Fatalf("Range(0, 0) = %d messages, want %d", len(stored), total)
	}
	bySeq := make(map[int64]string, total)
	seen := make(map[string]int64, total)
	for i, m := range stored {
		if m.Seq != int64(i+1) {
			t.Fatalf("Range(0, 0)[%d].Seq = %d, want %d", i, m.Seq, i+1)
		}
		if prev, dup := seen[m.Content]; dup {
			t.Errorf("message %q stored twice, at seqs %d and %d", m.Content, prev, m.Seq)
		}
		seen[m.Content] = m.Seq
		bySeq[m.Seq] = m.Content
	}
	for w, ws := range got {
		for i, seq := range ws {
			if want := fmt.Sprintf("w%02d-%03d", w, i); bySeq[seq] != want {
				t.Errorf("writer %d append %d was given seq %d, which holds %q", w, i, seq, bySeq[seq])
			}
			if i > 0 && seq <= ws[i-1] {
				t.Errorf("writer %d: append %d got seq %d after seq %d, want increasing", w, i, seq, ws[i-1])
			}
		}
	}
}

// testContextCanceled checks that Append with a cancelled context fails with
// an error wrapping context.Canceled and writes nothing.
func testContextCanceled(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("cancel")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	one := []chatmem.Message{msg(chatmem.RoleUser, "hello", 1)}

	_, err := s.Append(ctx, key, one, chatmem.AppendOptions{})
	wantErr(t, "Append(cancelled ctx) to a new conversation", err, context.Canceled)
	wantNotFound(t, s, key)

	mustAppend(t, s, key, one, chatmem.AppendOptions{})
	_, err = s.Append(ctx, key, one, chatmem.AppendOptions{IdempotencyKey: "k"})
	wantErr(t, "Append(cancelled ctx) to an existing conversation", err, context.Canceled)
	if got := mustConversation(t, s, key).LastSeq; got != 1 {
		t.Errorf("LastSeq after a cancelled append = %d, want 1", got)
	}
	res := mustAppend(t, s, key, one, chatmem.AppendOptions{IdempotencyKey: "k"})
	if res.Replayed {
		t.Errorf("Append(k) after a cancelled Append(k): Replayed = true, want false (the cancelled one wrote nothing)")
	}
}

// testContent checks that text beyond ASCII (emoji, CJK, combining marks,
// right-to-left text) and NUL bytes are stored exactly, or refused with
// ErrInvalid, never altered. It logs which cases a store refuses.
func testContent(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("unicode")
	cases := []struct {
		name string
		m    chatmem.Message
	}{
		{"emoji", msg(chatmem.RoleUser, "hi 👋🏽 family 👨‍👩‍👧 flag 🇯🇵", 5)},
		{"CJK", msg(chatmem.RoleAssistant, "你好，世界。注文番号はA-17です。안녕하세요", 9)},
		{"combining marks", msg(chatmem.RoleUser, "cafe\u0301 vs café, Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇", 7)},
		{"right-to-left", msg(chatmem.RoleUser, "مرحبا بالعالم שלום", 4)},
		{"separators", msg(chatmem.RoleUser, "line\u2028para\u2029tab\tcr\r\nbom\ufeffend", 4)},
		{"quotes and escapes", msg(chatmem.RoleUser, `'; DROP TABLE messages; -- "\u0000" \\ %s {x} *`, 6)},
		{"unicode name and metadata", chatmem.Message{Role: chatmem.RoleUser, Content: "ok", Name: "Zoë", Tokens: 1,
			Metadata: map[string]string{"città": "東京 🗼", "empty": ""}}},
		{"NUL in content", msg(chatmem.RoleUser, "before\x00after", 2)},
		{"NUL in metadata", chatmem.Message{Role: chatmem.RoleUser, Content: "ok", Tokens: 1, Metadata: map[string]string{"k": "a\x00b"}}},
		{"NUL in tool arguments", chatmem.Message{Role: chatmem.RoleAssistant, Tokens: 3, ToolCalls: []chatmem.ToolCall{
			{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "f", Arguments: "{\"a\":\"\x00\"}"}}}}},
		{"large", msg(chatmem.RoleUser, strings.Repeat("日本語 ", 8000), 16000)},
	}
	var seq int64
	for _, c := range cases {
		res, err := s.Append(t.Context(), key, []chatmem.Message{c.m}, chatmem.AppendOptions{})
		if err != nil {
			if !errors.Is(err, chatmem.ErrInvalid) {
				t.Errorf("%s: Append error = %v, want nil or ErrInvalid", c.name, err)
			} else {
				t.Logf("%s: refused with ErrInvalid: %v", c.name, err)
			}
			continue
		}
		seq++
		t.Logf("%s: stored exactly", c.name)
		want := withSeqs([]chatmem.Message{c.m}, seq, res.Messages[0].CreatedAt)
		wantMessages(t, c.name+": Append", res.Messages, want)
		wantMessages(t, c.name+": Range", mustRange(t, s, key, seq-1, 1), want)
		if tail := mustTail(t, s, key, chatmem.TailQuery{Turns: 100}); len(tail) > 0 {
			wantMessages(t, c.name+": Tail", tail[len(tail)-1:], want)
		}
	}
}

// testCreatedAtRange checks the one range of times every store keeps
// (chatmem.MinTime to chatmem.MaxTime, excluded): its ends and a time with
// microseconds read back exactly, from the append and from a second
// process; a time outside it wraps ErrInvalid, with the same message on
// every store, and writes nothing.
func testCreatedAtRange(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("created-at")
	times := []time.Time{
		chatmem.MinTime,
		chatmem.MaxTime.Add(-time.Microsecond),
		time.Date(2024, 2, 29, 23, 59, 59, 999999000, time.UTC),
	}
	batch := make([]chatmem.Message, len(times))
	for i, at := range times {
		batch[i] = msg(chatmem.RoleUser, fmt.Sprintf("at %d", i), 2)
		batch[i].CreatedAt = at
	}
	res := mustAppend(t, s, key, batch, chatmem.AppendOptions{})
	for _, st := range []chatmem.Store{s, h.reopen(t, s)} {
		got := mustRange(t, st, key, 0, 0)
		if len(got) != len(times) {
			t.Fatalf("Range = %d messages, want %d", len(got), len(times))
		}
		for i, at := range times {
			if !got[i].CreatedAt.Equal(at) || !res.Messages[i].CreatedAt.Equal(at) {
				t.Errorf("created_at %v: appended as %v, read back as %v", at, res.Messages[i].CreatedAt, got[i].CreatedAt)
			}
		}
	}
	for _, at := range []time.Time{
		chatmem.MinTime.Add(-time.Microsecond),
		chatmem.MaxTime,
		time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 3600)),
	} {
		m := msg(chatmem.RoleUser, "out of range", 2)
		m.CreatedAt = at
		_, err := s.Append(t.Context(), key, []chatmem.Message{msg(chatmem.RoleUser, "in range", 2), m}, chatmem.AppendOptions{})
		wantErr(t, fmt.Sprintf("Append(created_at %v)", at), err, chatmem.ErrInvalid)
		if want := chatmem.ValidateTime("created_at", at).Error(); err != nil && !strings.Contains(err.Error(), "message 1: "+want) {
			t.Errorf("Append(created_at %v) error %q, want it to hold %q", at, err, "message 1: "+want)
		}
	}
	if got := mustConversation(t, s, key).LastSeq; got != int64(len(times)) {
		t.Errorf("LastSeq after refused appends = %d, want %d", got, len(times))
	}
}

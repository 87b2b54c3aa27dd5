package storetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// redactTests lists the chatmem.Redactor subtests in the order
// testRedactions runs them when the store implements it.
var redactTests = []subtest{
	{"Message", testRedactMessage},
	{"System", testRedactSystem},
	{"ToolCalls", testRedactToolCalls},
	{"Marker", testRedactMarker},
	{"Invalid", testRedactInvalid},
	{"NotFound", testRedactNotFound},
	{"Conflict", testRedactConflict},
	{"Derived", testRedactDerived},
	{"Idempotency", testRedactIdempotency},
	{"User", testRedactUser},
	{"Revision", testRevision},
	{"Raw", testRedactRaw},
	{"ConcurrentAppends", testRedactConcurrentAppends},
}

// testRedactions runs the chatmem.Redactor subtests if the harness's
// stores implement it.
var testRedactions = optional[chatmem.Redactor](redactTests)

// redact redacts message seq of key to content, counted tokens, expecting
// the conversation at last and revision rev.
func redact(t *testing.T, s chatmem.Store, key chatmem.Key, r chatmem.Redaction) (chatmem.Conversation, chatmem.Message, error) {
	t.Helper()
	return as[chatmem.Redactor](t, s).Redact(t.Context(), key, r)
}

// mustRedact redacts and fails the test on an error.
func mustRedact(t *testing.T, s chatmem.Store, key chatmem.Key, r chatmem.Redaction) (chatmem.Conversation, chatmem.Message) {
	t.Helper()
	conv, m, err := redact(t, s, key, r)
	if err != nil {
		t.Fatalf("Redact(%s, %+v) error = %v, want nil", key, r, err)
	}
	return conv, m
}

// redaction is a Redaction of message seq of the conversation as it is.
func redaction(t *testing.T, s chatmem.Store, key chatmem.Key, seq int64, content string, tokens int) chatmem.Redaction {
	t.Helper()
	conv := mustConversation(t, s, key)
	return chatmem.Redaction{Seq: seq, Content: content, Tokens: tokens, ExpectedLastSeq: conv.LastSeq, ExpectedRevision: conv.Revision}
}

func testRedactMessage(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("redact")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{Tokenizer: "estimate"})
	before := mustConversation(t, s, key)
	want := mustRange(t, s, key, 0, 0)

	// Message 4 (11 tokens) becomes 2 tokens: the totals after it move.
	conv, m := mustRedact(t, s, key, redaction(t, s, key, 4, "[redacted]", 2))
	want[3].Content, want[3].Tokens = "[redacted]", 2
	markRedacted(&want[3])
	wantMessages(t, "Redact's message", []chatmem.Message{m}, want[3:4])
	if conv.LastSeq != 8 || conv.Tokens != before.Tokens-9 || conv.SystemTokens != before.SystemTokens || conv.Turns != before.Turns || conv.Revision != before.Revision+1 {
		t.Errorf("Redact returned LastSeq %d, Tokens %d, SystemTokens %d, Turns %d, Revision %d; want 8, %d, %d, %d, %d",
			conv.LastSeq, conv.Tokens, conv.SystemTokens, conv.Turns, conv.Revision, before.Tokens-9, before.SystemTokens, before.Turns, before.Revision+1)
	}
	if !conv.CreatedAt.Equal(before.CreatedAt) || conv.Tokenizer != "estimate" {
		t.Errorf("Redact returned CreatedAt %v, Tokenizer %q; want %v, \"estimate\"", conv.CreatedAt, conv.Tokenizer, before.CreatedAt)
	}
	for _, r := range []chatmem.Store{s, h.reopen(t, s)} {
		wantConversation(t, "Conversation after the redaction", mustConversation(t, r, key), conv)
		wantMessages(t, "Range after the redaction", mustRange(t, r, key, 0, 0), want)
		wantTails(t, "after the redaction", r, key, want)
	}
	// A larger count moves them the other way; appends continue the totals.
	conv, _ = mustRedact(t, s, key, redaction(t, s, key, 2, "a much longer replacement text", 40))
	want[1].Content, want[1].Tokens = "a much longer replacement text", 40
	markRedacted(&want[1])
	if tokens, system := totals(want); conv.Tokens != tokens || conv.SystemTokens != system || conv.Revision != before.Revision+2 {
		t.Errorf("after the second redaction Tokens %d, SystemTokens %d, Revision %d; want %d, %d, %d", conv.Tokens, conv.SystemTokens, conv.Revision, tokens, system, before.Revision+2)
	}
	res := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "dates", 3)}, chatmem.AppendOptions{})
	if tokens, _ := totals(want); res.Conversation.Tokens != tokens+3 || res.Conversation.Revision != conv.Revision {
		t.Errorf("Append after the redactions: Tokens %d, Revision %d; want %d, %d", res.Conversation.Tokens, res.Conversation.Revision, tokens+3, conv.Revision)
	}
	wantTails(t, "after an append", s, key, mustRange(t, s, key, 0, 0))
}

// markRedacted adds the metadata Redaction.Apply adds to m.
func markRedacted(m *chatmem.Message) {
	if m.Metadata == nil {
		m.Metadata = map[string]string{}
	}
	m.Metadata[chatmem.MetaRedacted] = "true"
}

// testRedactMarker checks that a redacted message keeps its metadata and
// gains chatmem.MetaRedacted, durably: the chat proxy relies on it.
func testRedactMarker(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("redact")
	tagged := msg(chatmem.RoleUser, "my phone is 555 0100", 5)
	tagged.Metadata = map[string]string{"source": "web"}
	mustAppend(t, s, key, []chatmem.Message{tagged, msg(chatmem.RoleAssistant, "noted", 1), msg(chatmem.RoleUser, "thanks", 1)}, chatmem.AppendOptions{})
	want := mustRange(t, s, key, 0, 0)
	for _, m := range want {
		if m.Metadata[chatmem.MetaRedacted] != "" {
			t.Fatalf("message %d is marked redacted before any redaction: %v", m.Seq, m.Metadata)
		}
	}
	_, m := mustRedact(t, s, key, redaction(t, s, key, 1, "[phone]", 1))
	want[0].Content, want[0].Tokens = "[phone]", 1
	markRedacted(&want[0])
	if m.Metadata["source"] != "web" || m.Metadata[chatmem.MetaRedacted] != "true" || len(m.Metadata) != 2 {
		t.Errorf("Redact's message metadata = %v, want source web and %s true", m.Metadata, chatmem.MetaRedacted)
	}
	_, m = mustRedact(t, s, key, redaction(t, s, key, 2, "[reply]", 1))
	want[1].Content, want[1].Tokens = "[reply]", 1
	markRedacted(&want[1])
	if len(m.Metadata) != 1 || m.Metadata[chatmem.MetaRedacted] != "true" {
		t.Errorf("Redact's message metadata = %v, want only %s true", m.Metadata, chatmem.MetaRedacted)
	}
	// Redacting a redacted message again keeps the one marker.
	mustRedact(t, s, key, redaction(t, s, key, 1, "[number]", 1))
	want[0].Content = "[number]"
	for _, r := range []chatmem.Store{s, h.reopen(t, s)} {
		wantMessages(t, "Range after the redactions", mustRange(t, r, key, 0, 0), want)
		wantTails(t, "after the redactions", r, key, want)
	}
}

func testRedactSystem(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("redact")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	before := mustConversation(t, s, key)
	want := mustRange(t, s, key, 0, 0)
	conv, _ := mustRedact(t, s, key, redaction(t, s, key, 6, "be", 1))
	want[5].Content, want[5].Tokens = "be", 1
	markRedacted(&want[5])
	if conv.Tokens != before.Tokens || conv.SystemTokens != before.SystemTokens-16 {
		t.Errorf("after redacting a system message Tokens %d, SystemTokens %d; want %d, %d", conv.Tokens, conv.SystemTokens, before.Tokens, before.SystemTokens-16)
	}
	wantMessages(t, "Range", mustRange(t, s, key, 0, 0), want)
	wantMessages(t, "System", mustSystem(t, s, key), []chatmem.Message{want[0], want[5]})
	wantTails(t, "after redacting a system message", s, key, want)
}

func testRedactToolCalls(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("redact")
	call := chatmem.Message{Role: chatmem.RoleAssistant, Tokens: 9, ToolCalls: []chatmem.ToolCall{
		{ID: "c1", Type: "function", Function: chatmem.FunctionCall{Name: "lookup_address", Arguments: `{"street":"12 Elm Road"}`}},
	}}
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "where", 1), call,
		{Role: chatmem.RoleTool, ToolCallID: "c1", Content: "found", Tokens: 1}}, chatmem.AppendOptions{})
	r := redaction(t, s, key, 2, "", 4)
	r.ClearToolCalls = true
	_, m := mustRedact(t, s, key, r)
	got := mustRange(t, s, key, 1, 1)
	wantMessages(t, "Redact's message", []chatmem.Message{m}, got)
	if len(got[0].ToolCalls) != 1 || got[0].ToolCalls[0].ID != "c1" || got[0].ToolCalls[0].Type != "function" ||
		got[0].ToolCalls[0].Function != (chatmem.FunctionCall{Name: chatmem.RedactedToolName, Arguments: chatmem.RedactedArguments}) || got[0].Tokens != 4 {
		t.Errorf("redacted tool call message = %+v, want the call's ID kept, its name and arguments cleared, 4 tokens", got[0])
	}
	wantPostings(t, "after clearing a tool call", s, key, 100, 10, map[string][]int64{stem("street"): nil, stem("elm"): nil})
}

func testRedactInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("redact")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	want := takeSnapshot(t, s, key)
	for _, r := range []chatmem.Redaction{
		{Seq: 0, Content: "x", Tokens: 1, ExpectedLastSeq: 8},
		{Seq: 9, Content: "x", Tokens: 1, ExpectedLastSeq: 8},
		{Seq: 5, Content: "x", Tokens: 1, ExpectedLastSeq: 4},
		{Seq: 2, Content: "x", Tokens: -1, ExpectedLastSeq: 8},
		{Seq: 2, Content: "x", Tokens: 1, ExpectedLastSeq: 8, ExpectedRevision: -1},
	} {
		if _, _, err := redact(t, s, key, r); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Redact(%+v) error = %v, want ErrInvalid", r, err)
		}
	}
	if _, _, err := redact(t, s, chatmem.Key{Tenant: key.Tenant, ID: "bad id"}, chatmem.Redaction{Seq: 1, ExpectedLastSeq: 1}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Redact with a bad key error = %v, want ErrInvalid", err)
	}
	wantSnapshot(t, "after refused redactions", s, key, want)
}

func testRedactNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("missing")
	r := chatmem.Redaction{Seq: 1, Content: "x", Tokens: 1, ExpectedLastSeq: 8}
	if _, _, err := redact(t, s, key, r); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Redact of a missing conversation error = %v, want ErrNotFound", err)
	}
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	if _, _, err := redact(t, s, chatmem.Key{Tenant: randomTenant(), ID: key.ID}, r); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Redact of the ID in another tenant error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := redact(t, s, key, r); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Redact of a deleted conversation error = %v, want ErrNotFound", err)
	}
}

func testRedactConflict(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("redact")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	want := takeSnapshot(t, s, key)
	for _, c := range []struct{ last, rev int64 }{{7, 0}, {9, 0}, {8, 1}} {
		r := chatmem.Redaction{Seq: 2, Content: "x", Tokens: 1, ExpectedLastSeq: c.last, ExpectedRevision: c.rev}
		if _, _, err := redact(t, s, key, r); !errors.Is(err, chatmem.ErrConflict) {
			t.Errorf("Redact expecting last seq %d, revision %d of a conversation at 8, 0: error = %v, want ErrConflict", c.last, c.rev, err)
		}
	}
	wantSnapshot(t, "after conflicting redactions", s, key, want)
	// A rewind and appends back to the same last seq: the revision tells.
	r := redaction(t, s, key, 8, "x", 1)
	mustRewind(t, s, key, 7, 8)
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleAssistant, "again", 23)}, chatmem.AppendOptions{})
	if _, _, err := redact(t, s, key, r); !errors.Is(err, chatmem.ErrConflict) {
		t.Errorf("Redact decided before a rewind and an append error = %v, want ErrConflict", err)
	}
}

func testRedactDerived(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	key := randomKey("redact")
	conv := mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{}).Conversation
	sums := as[chatmem.SummaryStore](t, s)
	if err := sums.PutSummary(ctx, key, chatmem.Summary{Text: "apples", CoversSeq: 3, Summarizer: "test"}, 0); err != nil {
		t.Fatal(err)
	}
	facts := []chatmem.Fact{
		{Key: "fruit", Value: "apple", SourceSeq: 2, SetBy: "rules", Confidence: 1},
		{Key: "fruit", Value: "banana", SourceSeq: 4, SetBy: "rules", Confidence: 1},
		{Key: "dark", Value: "cherry", SourceSeq: 7, SetBy: "rules", Confidence: 1},
	}
	if err := as[chatmem.FactMarker](t, s).SetFactsThrough(ctx, key, conv.CreatedAt, facts, 0, 8); err != nil {
		t.Fatal(err)
	}
	vecs, hasVectors := s.(chatmem.VectorStore)
	if hasVectors {
		if err := vecs.PutVectors(ctx, key, "m", []int64{2, 4, 7}, [][]float32{{1, 0}, {0, 1}, {1, 1}}); err != nil {
			t.Fatal(err)
		}
	}
	wantPostings(t, "before the redaction", s, key, 100, 10, map[string][]int64{stem("bananas"): {5, 4}, stem("plums"): nil})

	// Redacting message 4: the summary (to 3) stays, the fact it stated
	// goes, its postings and vector too.
	mustRedact(t, s, key, redaction(t, s, key, 4, "plums are purple", 3))
	for _, r := range []chatmem.Store{s, h.reopen(t, s)} {
		if sum, err := as[chatmem.SummaryStore](t, r).Summary(ctx, key); err != nil || sum.CoversSeq != 3 {
			t.Errorf("Summary not covering the redacted message = %+v, %v; want it kept", sum, err)
		}
		wantPostings(t, "after the redaction", r, key, 100, 10, map[string][]int64{stem("bananas"): {5}, stem("plums"): {4}, stem("purple"): {4}, stem("apples"): {3, 2}})
		got, err := as[chatmem.FactStore](t, r).Facts(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if s := factValues(got); s != "dark=cherry fruit=apple" {
			t.Errorf("Facts after the redaction = %s, want dark=cherry fruit=apple", s)
		}
		if hist, err := as[chatmem.FactStore](t, r).FactHistory(ctx, key, "fruit"); err != nil || len(hist) != 1 || hist[0].Value != "apple" {
			t.Errorf("FactHistory(fruit) after the redaction = %+v, %v; want apple alone", hist, err)
		}
		if mark, err := as[chatmem.FactMarker](t, r).FactMark(ctx, key); err != nil || mark.Seq != 8 {
			t.Errorf("FactMark after the redaction = %+v, %v; want Seq 8 (not extracted again)", mark, err)
		}
		if hasVectors {
			hits, err := as[chatmem.VectorStore](t, r).NearestVectors(ctx, key, "m", []float32{1, 1}, 100, 100, 10)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(hitSeqs(hits)); got != "[7 2]" && got != "[2 7]" {
				t.Errorf("NearestVectors after the redaction = seqs %s, want 2 and 7", got)
			}
		}
	}
	// Redacting a message the summary covers removes the summary.
	mustRedact(t, s, key, redaction(t, s, key, 3, "ok", 1))
	if _, err := sums.Summary(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Summary covering a redacted message error = %v, want ErrNotFound (removed)", err)
	}
	if err := sums.PutSummary(ctx, key, chatmem.Summary{Text: "a", CoversSeq: 5, Summarizer: "test"}, 0); err != nil {
		t.Errorf("PutSummary from 0 after the summary was dropped error = %v", err)
	}
}

func testRedactIdempotency(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("redact")
	first := []chatmem.Message{msg(chatmem.RoleUser, "my card is 4111", 1), msg(chatmem.RoleAssistant, "noted", 1)}
	other := []chatmem.Message{msg(chatmem.RoleUser, "something else", 1)}
	mustAppend(t, s, key, first, chatmem.AppendOptions{IdempotencyKey: "k1", Fingerprint: chatmem.Fingerprint(first)})
	if _, err := s.Append(t.Context(), key, other, chatmem.AppendOptions{IdempotencyKey: "k1", Fingerprint: chatmem.Fingerprint(other)}); !errors.Is(err, chatmem.ErrIdempotencyKeyReused) {
		t.Fatalf("key reused with other messages before the redaction: error = %v, want ErrIdempotencyKeyReused", err)
	}
	mustRedact(t, s, key, redaction(t, s, key, 1, "my card is [redacted]", 1))
	// The retry still replays (the redacted message), and the fingerprint
	// made from the old text is gone.
	res := mustAppend(t, s, key, first, chatmem.AppendOptions{IdempotencyKey: "k1", Fingerprint: chatmem.Fingerprint(first)})
	if !res.Replayed || len(res.Messages) != 2 || res.Messages[0].Content != "my card is [redacted]" {
		t.Errorf("retry after the redaction = Replayed %v, %d messages; want a replay of the redacted ones", res.Replayed, len(res.Messages))
	}
	res = mustAppend(t, s, key, other, chatmem.AppendOptions{IdempotencyKey: "k1", Fingerprint: chatmem.Fingerprint(other)})
	if !res.Replayed {
		t.Errorf("key reused after the redaction: Replayed = false, want a replay (the fingerprint is cleared)")
	}
	if conv := mustConversation(t, s, key); conv.LastSeq != 2 {
		t.Errorf("LastSeq after the retries = %d, want 2", conv.LastSeq)
	}
}

// testRedactUser: the user's index and the user's facts taken from the
// message follow the redaction.
func testRedactUser(t *testing.T, h Harness) {
	s := h.New(t)
	us, ok := s.(chatmem.UserStore)
	if !ok {
		t.Skip("store does not implement chatmem.UserStore")
	}
	ctx := t.Context()
	key := randomKey("redact")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{User: "ada"})
	user := chatmem.Key{Tenant: key.Tenant, ID: "ada"}
	fact := func(name, value string, seq int64) chatmem.Fact {
		return chatmem.Fact{Key: name, Value: value, Conversation: key.ID, SourceSeq: seq, SetBy: "rules", Confidence: 1}
	}
	if err := us.SetUserFacts(ctx, user, []chatmem.Fact{fact("city", "paris", 2), fact("city", "rome", 4), fact("pet", "cat", 4)}); err != nil {
		t.Fatal(err)
	}
	mustRedact(t, s, key, redaction(t, s, key, 4, "plums", 1))
	got, err := us.UserFacts(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if s := factValues(got); s != "city=paris" {
		t.Errorf("UserFacts after the redaction = %s, want city=paris", s)
	}
	if us, ok := s.(chatmem.UserSearcher); ok {
		hits, err := us.UserPostings(ctx, user, []string{stem("bananas"), stem("plums")}, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprint([][]chatmem.UserHit{{{Conversation: key.ID, Seq: 5}}, {{Conversation: key.ID, Seq: 4}}})
		if got := fmt.Sprint(hits); got != want {
			t.Errorf("UserPostings after the redaction = %s, want %s", got, want)
		}
	}
}

// testRevision: a conversation starts at revision 0; appends and a rewind
// to the last message leave it, a rewind that removes messages and a
// redaction move it on; a re-created conversation starts at 0 again.
func testRevision(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("rev")
	res := mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	check := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("Revision %s = %d, want %d", what, got, want)
		}
	}
	check("after the first append", res.Conversation.Revision, 0)
	check("of Conversation", mustConversation(t, s, key).Revision, 0)
	check("of a rewind to the last seq", mustRewind(t, s, key, 8, 8).Revision, 0)
	check("of a rewind", mustRewind(t, s, key, 6, 8).Revision, 1)
	check("of an append after it", mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleAssistant, "x", 1)}, chatmem.AppendOptions{}).Conversation.Revision, 1)
	conv, _ := mustRedact(t, s, key, redaction(t, s, key, 2, "y", 1))
	check("of a redaction", conv.Revision, 2)
	for _, r := range []chatmem.Store{s, h.reopen(t, s)} {
		check("of Conversation after a redaction", mustConversation(t, r, key).Revision, 2)
		if sr, ok := r.(chatmem.SinceReader); ok {
			c, _, err := sr.ConversationSince(t.Context(), key, 5, 10)
			if err != nil {
				t.Fatal(err)
			}
			check("of ConversationSince", c.Revision, 2)
		}
		page, err := r.List(t.Context(), key.Tenant, chatmem.PageRequest{})
		if err != nil || len(page.Conversations) != 1 {
			t.Fatalf("List = %v, %v", page, err)
		}
		check("of List", page.Conversations[0].Revision, 2)
	}
	if ta, ok := s.(chatmem.TailAppender); ok {
		res, _, err := ta.AppendTail(t.Context(), key, []chatmem.Message{msg(chatmem.RoleUser, "z", 1)}, chatmem.AppendOptions{}, chatmem.TailQuery{Tokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		check("of AppendTail", res.Conversation.Revision, 2)
	}
	if err := s.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	check("of a re-created conversation", mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{}).Conversation.Revision, 0)
}

// testRedactRaw: after a redaction, a scan of everything the store holds
// (Harness.Dump) no longer finds the old text; before it, the same scan
// finds it.
func testRedactRaw(t *testing.T, h Harness) {
	if h.Dump == nil {
		t.Skip("the harness has no Dump")
	}
	s := h.New(t)
	key := randomKey("redact")
	word := "zq" + strings.ToLower(rand.Text()[:10]) + "xj"
	mustAppend(t, s, key, []chatmem.Message{
		msg(chatmem.RoleUser, "my name is "+word, 5),
		msg(chatmem.RoleAssistant, "hello there", 2),
	}, chatmem.AppendOptions{User: "ada", IdempotencyKey: "k", Fingerprint: "f"})
	if ic, ok := s.(chatmem.IndexCatcher); ok {
		if err := ic.IndexPending(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Contains(h.Dump(t, s), []byte(word)) {
		t.Fatalf("before the redaction the raw dump lacks %q: the dump does not see the store's data", word)
	}
	mustRedact(t, s, key, redaction(t, s, key, 1, "my name is [redacted]", 5))
	dump := h.Dump(t, s)
	for _, needle := range []string{word, word[len(word)-8:]} {
		if i := bytes.Index(dump, []byte(needle)); i >= 0 {
			lo, hi := max(0, i-40), min(len(dump), i+len(needle)+40)
			t.Errorf("after the redaction the raw dump still holds %q at byte %d: %q", needle, i, dump[lo:hi])
		}
	}
	if !bytes.Contains(dump, []byte("hello there")) {
		t.Errorf("after the redaction the raw dump lacks the other message")
	}
}

// testRedactConcurrentAppends redacts, each time the newest message it
// read, while another store appends: every redaction lands or conflicts,
// and the messages' totals agree with the conversation's.
func testRedactConcurrentAppends(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.reopen(t, s)
	ctx := t.Context()
	key := randomKey("busy")
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleSystem, "sys", 4), msg(chatmem.RoleUser, "u0", 5)}, chatmem.AppendOptions{})

	wait := appendConcurrently(ctx, s2, key, 40)
	landed, conflicts := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for i := range 20 {
		conv := mustConversation(t, s, key)
		r := chatmem.Redaction{Seq: max(2, conv.LastSeq/2), Content: "redacted", Tokens: i % 7, ExpectedLastSeq: conv.LastSeq, ExpectedRevision: conv.Revision}
		switch _, _, err := redact(t, s, key, r); {
		case err == nil:
			landed++
		case errors.Is(err, chatmem.ErrConflict):
			conflicts++
		default:
			t.Fatalf("Redact during appends error = %v, want nil or ErrConflict", err)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if err := wait(); err != nil {
		t.Fatalf("Append during redactions error = %v", err)
	}
	t.Logf("%d redactions landed, %d conflicted", landed, conflicts)
	msgs := mustRange(t, s, key, 0, 0)
	for i, m := range msgs {
		if m.Seq != int64(i)+1 {
			t.Fatalf("message %d has seq %d after concurrent redactions: not dense", i, m.Seq)
		}
	}
	conv := mustConversation(t, s, key)
	if tokens, system := totals(msgs); conv.Tokens != tokens || conv.SystemTokens != system || conv.LastSeq != int64(len(msgs)) {
		t.Errorf("Conversation = Tokens %d, SystemTokens %d, LastSeq %d; messages hold %d, %d, %d", conv.Tokens, conv.SystemTokens, conv.LastSeq, tokens, system, len(msgs))
	}
	wantTails(t, "after concurrent redactions", s, key, msgs)
}

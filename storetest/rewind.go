package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// rewindTests lists the chatmem.Rewinder subtests in the order
// testRewinds runs them when the store implements it.
var rewindTests = []subtest{
	{"Messages", testRewindMessages},
	{"Invalid", testRewindInvalid},
	{"NotFound", testRewindNotFound},
	{"Conflict", testRewindConflict},
	{"Derived", testRewindDerived},
	{"Idempotency", testRewindIdempotency},
	{"UserIndex", testRewindUserIndex},
	{"UserFacts", testRewindUserFacts},
	{"ConcurrentAppends", testRewindConcurrentAppends},
	{"RevisionConflict", testRewindRevisionConflict},
	{"ExpectedRevision", testRewindExpectedRevision},
	{"RevisionAfterExpiry", testRevisionAfterExpiry},
}

// testRewinds runs the chatmem.Rewinder subtests if the harness's stores
// implement it.
var testRewinds = optional[chatmem.Rewinder](rewindTests)

// rewind rewinds key and returns what Rewind returned.
func rewind(t *testing.T, s chatmem.Store, key chatmem.Key, toSeq, expected int64) (chatmem.Conversation, error) {
	t.Helper()
	return as[chatmem.Rewinder](t, s).Rewind(t.Context(), key, toSeq, expected)
}

// mustRewind rewinds key and fails the test on an error.
func mustRewind(t *testing.T, s chatmem.Store, key chatmem.Key, toSeq, expected int64) chatmem.Conversation {
	t.Helper()
	conv, err := rewind(t, s, key, toSeq, expected)
	if err != nil {
		t.Fatalf("Rewind(%s, %d, %d) error = %v, want nil", key, toSeq, expected, err)
	}
	return conv
}

// rewindFixture is the conversation the rewind subtests take back: a
// system message, two turns, a second system message and a third turn
// (seqs 1..8).
func rewindFixture() []chatmem.Message {
	return []chatmem.Message{
		msg(chatmem.RoleSystem, "be brief", 3),
		msg(chatmem.RoleUser, "apples are red", 5),
		msg(chatmem.RoleAssistant, "indeed apples", 7),
		msg(chatmem.RoleUser, "bananas are yellow", 11),
		msg(chatmem.RoleAssistant, "indeed bananas", 13),
		msg(chatmem.RoleSystem, "be kind", 17),
		msg(chatmem.RoleUser, "cherries are dark", 19),
		msg(chatmem.RoleAssistant, "indeed cherries", 23),
	}
}

func testRewindMessages(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("rewind")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{Tokenizer: "estimate"})
	before := mustConversation(t, s, key)
	kept := mustRange(t, s, key, 0, 3)

	conv := mustRewind(t, s, key, 3, 8)
	if conv.LastSeq != 3 || conv.Tokens != 12 || conv.SystemTokens != 3 || conv.Turns != 1 {
		t.Errorf("Rewind returned LastSeq %d, Tokens %d, SystemTokens %d, Turns %d; want 3, 12, 3, 1", conv.LastSeq, conv.Tokens, conv.SystemTokens, conv.Turns)
	}
	if conv.Key != key || conv.Tokenizer != "estimate" || !conv.CreatedAt.Equal(before.CreatedAt) {
		t.Errorf("Rewind returned Key %v, Tokenizer %q, CreatedAt %v; want %v, \"estimate\", %v", conv.Key, conv.Tokenizer, conv.CreatedAt, key, before.CreatedAt)
	}
	for _, r := range []chatmem.Store{s, h.reopen(t, s)} {
		wantConversation(t, "Conversation after the rewind", mustConversation(t, r, key), conv)
		wantMessages(t, "Range after the rewind", mustRange(t, r, key, 0, 0), kept)
		wantSeqs(t, "System after the rewind", mustSystem(t, r, key), 1)
		wantSeqs(t, "Tail{Turns: 5} after the rewind", mustTail(t, r, key, chatmem.TailQuery{Turns: 5}), 1, 2, 3)
		wantSeqs(t, "Tail{Tokens: 1000} after the rewind", mustTail(t, r, key, chatmem.TailQuery{Tokens: 1000}), 1, 2, 3)
	}
	wantTails(t, "after the rewind", s, key, kept)

	// The same rewind again is a no-op; a rewind to the last seq too.
	if _, err := rewind(t, s, key, 3, 8); !errors.Is(err, chatmem.ErrConflict) {
		t.Errorf("Rewind with the old last seq error = %v, want ErrConflict", err)
	}
	wantConversation(t, "Rewind to the last seq", mustRewind(t, s, key, 3, 3), conv)

	// Appending continues at toSeq+1, with totals from the kept messages.
	res := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "dates are sweet", 2)}, chatmem.AppendOptions{})
	wantSeqs(t, "Append after the rewind", res.Messages, 4)
	if c := res.Conversation; c.LastSeq != 4 || c.Tokens != 14 || c.SystemTokens != 3 || c.Turns != 2 {
		t.Errorf("Append after the rewind: LastSeq %d, Tokens %d, SystemTokens %d, Turns %d; want 4, 14, 3, 2", c.LastSeq, c.Tokens, c.SystemTokens, c.Turns)
	}
	got := mustRange(t, s, key, 0, 0)
	wantSeqs(t, "Range after the append", got, 1, 2, 3, 4)
	if got[3].Content != "dates are sweet" {
		t.Errorf("message 4 after the rewind and append = %q, want the new one", got[3].Content)
	}
	wantTails(t, "after the append", s, key, got)

	// Rewinding everything leaves an empty conversation that still exists.
	conv = mustRewind(t, s, key, 0, 4)
	if conv.LastSeq != 0 || conv.Tokens != 0 || conv.SystemTokens != 0 || conv.Turns != 0 {
		t.Errorf("Rewind to 0 returned LastSeq %d, Tokens %d, SystemTokens %d, Turns %d; want zeros", conv.LastSeq, conv.Tokens, conv.SystemTokens, conv.Turns)
	}
	if msgs := mustRange(t, s, key, 0, 0); len(msgs) != 0 {
		t.Errorf("Range after a rewind to 0 = %d messages, want none", len(msgs))
	}
	wantSeqs(t, "Append after a rewind to 0", mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "again", 1)}, chatmem.AppendOptions{}).Messages, 1)
}

func testRewindInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("rewind")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	want := takeSnapshot(t, s, key)
	for _, c := range []struct{ to, expected int64 }{{-1, 8}, {9, 8}, {5, 4}} {
		if _, err := rewind(t, s, key, c.to, c.expected); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Rewind(to %d, expected %d) error = %v, want ErrInvalid", c.to, c.expected, err)
		}
	}
	if _, err := rewind(t, s, chatmem.Key{Tenant: key.Tenant, ID: "bad id"}, 0, 0); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Rewind with a bad key error = %v, want ErrInvalid", err)
	}
	wantSnapshot(t, "after refused rewinds", s, key, want)
}

func testRewindNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("missing")
	if _, err := rewind(t, s, key, 0, 0); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Rewind of a missing conversation error = %v, want ErrNotFound", err)
	}
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	other := chatmem.Key{Tenant: randomTenant(), ID: key.ID}
	if _, err := rewind(t, s, other, 0, 8); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Rewind of the ID in another tenant error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if _, err := rewind(t, s, key, 0, 8); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Rewind of a deleted conversation error = %v, want ErrNotFound", err)
	}
}

func testRewindConflict(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("rewind")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{})
	want := takeSnapshot(t, s, key)
	for _, expected := range []int64{7, 9, 20} {
		if _, err := rewind(t, s, key, 2, expected); !errors.Is(err, chatmem.ErrConflict) {
			t.Errorf("Rewind(to 2, expected %d) of a conversation at 8 error = %v, want ErrConflict", expected, err)
		}
	}
	wantSnapshot(t, "after conflicting rewinds", s, key, want)
}

func testRewindDerived(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	key := randomKey("rewind")
	conv := mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{}).Conversation

	// A summary covering a kept message stays; one covering a rewound
	// message goes.
	sums := as[chatmem.SummaryStore](t, s)
	if err := sums.PutSummary(ctx, key, chatmem.Summary{Text: "apples", CoversSeq: 3, Summarizer: "test"}, 0); err != nil {
		t.Fatal(err)
	}
	facts := []chatmem.Fact{
		{Key: "fruit", Value: "apple", SourceSeq: 2, SetBy: "rules", Confidence: 1},
		{Key: "fruit", Value: "banana", SourceSeq: 4, SetBy: "rules", Confidence: 1},
		{Key: "dark", Value: "cherry", SourceSeq: 7, SetBy: "rules", Confidence: 1},
		{Key: "app", Value: "set", SetBy: "app", Confidence: 1},
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
	wantPostings(t, "before the rewind", s, key, 100, 10, map[string][]int64{stem("apples"): {3, 2}, stem("bananas"): {5, 4}, stem("cherries"): {8, 7}})

	mustRewind(t, s, key, 5, 8)
	for _, r := range []chatmem.Store{s, h.reopen(t, s)} {
		if sum, err := as[chatmem.SummaryStore](t, r).Summary(ctx, key); err != nil || sum.CoversSeq != 3 {
			t.Errorf("Summary covering kept messages after the rewind = %+v, %v; want it kept", sum, err)
		}
		wantPostings(t, "after the rewind", r, key, 100, 10, map[string][]int64{stem("apples"): {3, 2}, stem("bananas"): {5, 4}, stem("cherries"): nil})
		if hasVectors {
			hits, err := as[chatmem.VectorStore](t, r).NearestVectors(ctx, key, "m", []float32{1, 1}, 100, 100, 10)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(hitSeqs(hits)); got != "[4 2]" && got != "[2 4]" {
				t.Errorf("NearestVectors after the rewind = seqs %s, want 2 and 4", got)
			}
		}
		got, err := as[chatmem.FactStore](t, r).Facts(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if s := factValues(got); s != "app=set fruit=banana" {
			t.Errorf("Facts after the rewind to 5 = %s, want app=set fruit=banana", s)
		}
		mark, err := as[chatmem.FactMarker](t, r).FactMark(ctx, key)
		if err != nil || mark.Seq != 5 || mark.LastSeq != 5 {
			t.Errorf("FactMark after the rewind = %+v, %v; want Seq 5, LastSeq 5", mark, err)
		}
	}
	if _, err := as[chatmem.FactStore](t, s).FactHistory(ctx, key, "dark"); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("FactHistory of a fact stated only by rewound messages error = %v, want ErrNotFound", err)
	}

	// Rewinding past the summary removes it, and the fact's older value is
	// current again.
	mustRewind(t, s, key, 2, 5)
	if _, err := sums.Summary(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Summary covering rewound messages error = %v, want ErrNotFound (removed)", err)
	}
	got, err := as[chatmem.FactStore](t, s).Facts(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if s := factValues(got); s != "app=set fruit=apple" {
		t.Errorf("Facts after the rewind to 2 = %s, want app=set fruit=apple", s)
	}
	hist, err := as[chatmem.FactStore](t, s).FactHistory(ctx, key, "fruit")
	if err != nil || len(hist) != 1 || hist[0].Value != "apple" {
		t.Errorf("FactHistory(fruit) after the rewind to 2 = %+v, %v; want apple alone", hist, err)
	}
	wantPostings(t, "after the rewind to 2", s, key, 100, 10, map[string][]int64{stem("apples"): {2}, stem("bananas"): nil})
	// The summarizer starts again from nothing.
	if err := sums.PutSummary(ctx, key, chatmem.Summary{Text: "a", CoversSeq: 2, Summarizer: "test"}, 0); err != nil {
		t.Errorf("PutSummary from 0 after the summary was rewound error = %v", err)
	}

	// New messages at the rewound seqs are indexed as themselves.
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleAssistant, "indeed grapes", 1)}, chatmem.AppendOptions{})
	wantPostings(t, "after an append at a rewound seq", s, key, 100, 10, map[string][]int64{stem("apples"): {2}, stem("grapes"): {3}, stem("indeed"): {3}})
}

// stem returns the search term of word.
func stem(word string) string { return chatmem.Terms(word)[0] }

// hitSeqs returns the seqs of hits.
func hitSeqs(hits []chatmem.VectorHit) []int64 {
	out := make([]int64, len(hits))
	for i, h := range hits {
		out[i] = h.Seq
	}
	return out
}

// factValues renders facts as "key=value ..." in their order.
func factValues(facts []chatmem.Fact) string {
	out := ""
	for i, f := range facts {
		if i > 0 {
			out += " "
		}
		out += f.Key + "=" + f.Value
	}
	return out
}

func testRewindIdempotency(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("rewind")
	first := []chatmem.Message{msg(chatmem.RoleUser, "one", 1), msg(chatmem.RoleAssistant, "two", 1)}
	second := []chatmem.Message{msg(chatmem.RoleUser, "three", 1), msg(chatmem.RoleAssistant, "four", 1)}
	mustAppend(t, s, key, first, chatmem.AppendOptions{IdempotencyKey: "k1"})
	mustAppend(t, s, key, second, chatmem.AppendOptions{IdempotencyKey: "k2"})
	// 3 cuts k2's append in half: its key goes too.
	mustRewind(t, s, key, 3, 4)

	res := mustAppend(t, s, key, first, chatmem.AppendOptions{IdempotencyKey: "k1"})
	if !res.Replayed {
		t.Errorf("retry of a kept append: Replayed = false, want a replay")
	}
	wantSeqs(t, "retry of a kept append", res.Messages, 1, 2)
	res = mustAppend(t, s, key, second, chatmem.AppendOptions{IdempotencyKey: "k2"})
	if res.Replayed {
		t.Errorf("retry of a rewound append: Replayed = true, want it appended again")
	}
	wantSeqs(t, "retry of a rewound append", res.Messages, 4, 5)
	res = mustAppend(t, s, key, second, chatmem.AppendOptions{IdempotencyKey: "k2"})
	if !res.Replayed {
		t.Errorf("second retry: Replayed = false, want a replay of the new append")
	}
	wantSeqs(t, "second retry", res.Messages, 4, 5)
}

func testRewindUserIndex(t *testing.T, h Harness) {
	s := h.New(t)
	if _, ok := s.(chatmem.UserSearcher); !ok {
		t.Skip("store does not implement chatmem.UserSearcher")
	}
	ctx := t.Context()
	key := randomKey("rewind")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{User: "ada"})
	user := chatmem.Key{Tenant: key.Tenant, ID: "ada"}
	search := func(what string, want string) {
		t.Helper()
		hits, err := s.(chatmem.UserSearcher).UserPostings(ctx, user, []string{stem("apples"), stem("cherries")}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(hits); got != want {
			t.Errorf("UserPostings %s = %s, want %s", what, got, want)
		}
	}
	search("before the rewind", fmt.Sprint([][]chatmem.UserHit{{{Conversation: key.ID, Seq: 3}, {Conversation: key.ID, Seq: 2}}, {{Conversation: key.ID, Seq: 8}, {Conversation: key.ID, Seq: 7}}}))
	mustRewind(t, s, key, 5, 8)
	search("after the rewind", fmt.Sprint([][]chatmem.UserHit{{{Conversation: key.ID, Seq: 3}, {Conversation: key.ID, Seq: 2}}, nil}))
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "cherries again", 1)}, chatmem.AppendOptions{User: "ada"})
	search("after an append", fmt.Sprint([][]chatmem.UserHit{{{Conversation: key.ID, Seq: 3}, {Conversation: key.ID, Seq: 2}}, {{Conversation: key.ID, Seq: 6}}}))
}

// testRewindUserFacts: the values of the user's facts taken from rewound
// messages of the conversation leave their histories; those taken from
// kept messages, from another conversation or set by the app stay.
func testRewindUserFacts(t *testing.T, h Harness) {
	s := h.New(t)
	us, ok := s.(chatmem.UserStore)
	if !ok {
		t.Skip("store does not implement chatmem.UserStore")
	}
	ctx := t.Context()
	key := randomKey("rewind")
	mustAppend(t, s, key, rewindFixture(), chatmem.AppendOptions{User: "ada"})
	user := chatmem.Key{Tenant: key.Tenant, ID: "ada"}
	fact := func(name, value, conv string, seq int64) chatmem.Fact {
		return chatmem.Fact{Key: name, Value: value, Conversation: conv, SourceSeq: seq, SetBy: "rules", Confidence: 1}
	}
	if err := us.SetUserFacts(ctx, user, []chatmem.Fact{
		fact("city", "paris", key.ID, 2),
		fact("city", "rome", key.ID, 7),
		fact("pet", "cat", key.ID, 8),
		fact("lang", "go", "other", 7),
		fact("email", "ada@example.com", "", 0),
	}); err != nil {
		t.Fatal(err)
	}
	mustRewind(t, s, key, 5, 8)
	got, err := us.UserFacts(ctx, user)
	if err != nil {
		t.Fatal(err)
	}
	if s := factValues(got); s != "city=paris email=ada@example.com lang=go" {
		t.Errorf("UserFacts after the rewind = %s, want city=paris email=ada@example.com lang=go", s)
	}
	if hist, err := us.UserFactHistory(ctx, user, "city"); err != nil || len(hist) != 1 || hist[0].Value != "paris" {
		t.Errorf("UserFactHistory(city) after the rewind = %+v, %v; want paris alone", hist, err)
	}
	if _, err := us.UserFactHistory(ctx, user, "pet"); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("UserFactHistory(pet) after the rewind error = %v, want ErrNotFound", err)
	}
}

// testRewindConcurrentAppends rewinds, each time to half the last seq it
// read, while another store appends: every rewind lands or conflicts, and
// whatever landed leaves dense messages whose totals agree.
func testRewindConcurrentAppends(t *testing.T, h Harness) {
	s := h.New(t)
	s2 := h.reopen(t, s)
	ctx := t.Context()
	key := randomKey("busy")
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleSystem, "sys", 4), msg(chatmem.RoleUser, "u0", 5)}, chatmem.AppendOptions{})

	wait := appendConcurrently(ctx, s2, key, 40)
	landed, conflicts := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for range 20 {
		last := mustConversation(t, s, key).LastSeq
		switch _, err := rewind(t, s, key, max(2, last/2), last); {
		case err == nil:
			landed++
		case errors.Is(err, chatmem.ErrConflict):
			conflicts++
		default:
			t.Fatalf("Rewind during appends error = %v, want nil or ErrConflict", err)
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if err := wait(); err != nil {
		t.Fatalf("Append during rewinds error = %v", err)
	}
	t.Logf("%d rewinds landed, %d conflicted", landed, conflicts)

	msgs := mustRange(t, s, key, 0, 0)
	for i, m := range msgs {
		if m.Seq != int64(i)+1 {
			t.Fatalf("message %d has seq %d after concurrent rewinds: not dense", i, m.Seq)
		}
	}
	conv := mustConversation(t, s, key)
	turns := int64(0)
	for _, m := range msgs {
		if m.Role == chatmem.RoleUser {
			turns++
		}
	}
	if tokens, system := totals(msgs); conv.Tokens != tokens || conv.SystemTokens != system || conv.LastSeq != int64(len(msgs)) || conv.Turns != turns {
		t.Errorf("Conversation = Tokens %d, SystemTokens %d, LastSeq %d, Turns %d; messages hold %d, %d, %d, %d", conv.Tokens, conv.SystemTokens, conv.LastSeq, conv.Turns, tokens, system, len(msgs), turns)
	}
	wantTails(t, "after concurrent rewinds", s, key, msgs)
}

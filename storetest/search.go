package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// searchTests lists the chatmem.Searcher subtests in the order testSearch
// runs them.
var searchTests = []subtest{
	{"Postings", testPostings},
	{"PostingsLimitAndBefore", testPostingsLimitAndBefore},
	{"PostingsInvalid", testPostingsInvalid},
	{"PostingsTenantIsolation", testPostingsTenantIsolation},
	{"PostingsReplay", testPostingsReplay},
	{"PostingsConcurrent", testPostingsConcurrent},
	{"PostingsEndings", testPostingsEndings},
	{"MessagesAt", testMessagesAt},
}

// testSearch runs the chatmem.Searcher subtests if the harness's stores
// implement it.
var testSearch = optional[chatmem.Searcher](searchTests)

// mustPostings returns the postings of terms, failing the test on error.
func mustPostings(t *testing.T, s chatmem.Store, key chatmem.Key, terms []string, before int64, limit int) [][]int64 {
	t.Helper()
	out, err := as[chatmem.Searcher](t, s).Postings(t.Context(), key, terms, before, limit)
	if err != nil {
		t.Fatalf("Postings(%s, %q, %d, %d) error = %v", key, terms, before, limit, err)
	}
	if len(out) != len(terms) {
		t.Fatalf("Postings(%s, %q) returned %d lists, want one per term (%d)", key, terms, len(out), len(terms))
	}
	return out
}

// wantPostings fails the test unless the postings of each term are want's.
func wantPostings(t *testing.T, what string, s chatmem.Store, key chatmem.Key, before int64, limit int, want map[string][]int64) {
	t.Helper()
	terms := make([]string, 0, len(want))
	for term := range want {
		terms = append(terms, term)
	}
	slices.Sort(terms)
	got := mustPostings(t, s, key, terms, before, limit)
	for i, term := range terms {
		if !slices.Equal(got[i], want[term]) && len(got[i])+len(want[term]) > 0 {
			t.Errorf("%s: postings of %q (before %d, limit %d) = %v, want %v", what, term, before, limit, got[i], want[term])
		}
	}
}

func testPostings(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("search")
	mustAppend(t, s, key, []chatmem.Message{
		msg(chatmem.RoleSystem, "You help customers with their orders.", 5),
		msg(chatmem.RoleUser, "My order SE-10423 has not arrived.", 8),
		msg(chatmem.RoleAssistant, "Sorry to hear that! Let me check the order.", 9),
		{Role: chatmem.RoleAssistant, Tokens: 12, ToolCalls: []chatmem.ToolCall{{ID: "c1", Type: "function",
			Function: chatmem.FunctionCall{Name: "lookup_order", Arguments: `{"order_id":"SE-10423"}`}}}},
		{Role: chatmem.RoleTool, ToolCallID: "c1", Content: `{"status":"shipped","city":"東京"}`, Tokens: 10},
		msg(chatmem.RoleUser, "O'Brien's parcel: is it in Tokyo (東京) yet?", 12),
	}, chatmem.AppendOptions{})
	want := map[string][]int64{
		"order":   {4, 3, 2}, // the system message (seq 1) is never indexed
		"10423":   {4, 2},
		"se":      {4, 2},
		"lookup":  {4},
		"ship":    {5},
		"東京":      {6, 5},
		"o'brien": {6},
		"parcel":  {6},
		"custom":  nil, // "customers", only in the system message
		"absent":  nil,
	}
	for term := range want {
		if got := chatmem.Terms(term); len(got) != 1 || got[0] != term {
			t.Fatalf("test bug: %q is not a term (Terms = %q)", term, got)
		}
	}
	wantPostings(t, "one append", s, key, 100, 10, want)
	wantPostings(t, "another store over the same data", h.reopen(t, s), key, 100, 10, want)

	if got := mustPostings(t, s, key, nil, 100, 10); len(got) != 0 {
		t.Errorf("Postings(no terms) = %v, want none", got)
	}
	if got := mustPostings(t, s, key, []string{"order", "order"}, 100, 10); !slices.Equal(got[0], got[1]) {
		t.Errorf("a term asked twice answered %v and %v", got[0], got[1])
	}
}

func testPostingsLimitAndBefore(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("search")
	var msgs []chatmem.Message
	var every, even []int64
	for i := 1; i <= 40; i++ {
		text := "apple"
		if i%2 == 0 {
			text += " banana"
		}
		role := chatmem.RoleUser
		if i%2 == 0 {
			role = chatmem.RoleAssistant
		}
		msgs = append(msgs, msg(role, fmt.Sprintf("%s number %d", text, i), 3))
	}
	// Two appends, so the postings span batches.
	mustAppend(t, s, key, msgs[:25], chatmem.AppendOptions{})
	mustAppend(t, s, key, msgs[25:], chatmem.AppendOptions{})
	for seq := int64(40); seq >= 1; seq-- {
		every = append(every, seq)
		if seq%2 == 0 {
			even = append(even, seq)
		}
	}
	wantPostings(t, "everything", s, key, 41, 100, map[string][]int64{"appl": every, "banana": even})
	wantPostings(t, "limit 5", s, key, 41, 5, map[string][]int64{"appl": every[:5], "banana": even[:5]})
	wantPostings(t, "before 30", s, key, 30, 3, map[string][]int64{"appl": {29, 28, 27}, "banana": {28, 26, 24}})
	wantPostings(t, "before 1", s, key, 1, 3, map[string][]int64{"appl": nil, "banana": nil})
	wantPostings(t, "a number", s, key, 41, 3, map[string][]int64{"17": {17}})
}

func testPostingsInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	sr := as[chatmem.Searcher](t, s)
	ctx := t.Context()
	key := randomKey("search")
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hello there", 2)}, chatmem.AppendOptions{})

	_, err := sr.Postings(ctx, key, []string{"hello"}, 10, 0)
	wantErr(t, "Postings(limit 0)", err, chatmem.ErrInvalid)
	_, err = sr.Postings(ctx, key, []string{""}, 10, 5)
	wantErr(t, "Postings(empty term)", err, chatmem.ErrInvalid)
	_, err = sr.Postings(ctx, chatmem.Key{Tenant: key.Tenant, ID: ""}, []string{"hello"}, 10, 5)
	wantErr(t, "Postings(empty ID)", err, chatmem.ErrInvalid)
	_, err = sr.Postings(ctx, randomKey("never-written"), []string{"hello"}, 10, 5)
	wantErr(t, "Postings(missing conversation)", err, chatmem.ErrNotFound)
	_, err = sr.MessagesAt(ctx, randomKey("never-written"), []int64{1})
	wantErr(t, "MessagesAt(missing conversation)", err, chatmem.ErrNotFound)
	_, err = sr.MessagesAt(ctx, chatmem.Key{Tenant: "", ID: "x"}, []int64{1})
	wantErr(t, "MessagesAt(empty tenant)", err, chatmem.ErrInvalid)
}

func testPostingsTenantIsolation(t *testing.T, h Harness) {
	s := h.New(t)
	a := randomKey("shared-id")
	b := chatmem.Key{Tenant: randomTenant(), ID: a.ID}
	c := chatmem.Key{Tenant: a.Tenant, ID: a.ID + "-other"}
	mustAppend(t, s, a, []chatmem.Message{msg(chatmem.RoleUser, "secret alpha", 2)}, chatmem.AppendOptions{})
	mustAppend(t, s, b, []chatmem.Message{msg(chatmem.RoleUser, "nothing here", 2), msg(chatmem.RoleAssistant, "secret beta", 2)}, chatmem.AppendOptions{})
	mustAppend(t, s, c, []chatmem.Message{msg(chatmem.RoleUser, "x", 1), msg(chatmem.RoleUser, "y", 1), msg(chatmem.RoleUser, "secret gamma", 2)}, chatmem.AppendOptions{})
	wantPostings(t, "tenant a", s, a, 10, 10, map[string][]int64{"secret": {1}, "alpha": {1}, "beta": nil, "gamma": nil})
	wantPostings(t, "tenant b", s, b, 10, 10, map[string][]int64{"secret": {2}, "alpha": nil, "beta": {2}})
	wantPostings(t, "another conversation", s, c, 10, 10, map[string][]int64{"secret": {3}, "alpha": nil, "gamma": {3}})
}

func testPostingsReplay(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("search")
	opts := chatmem.AppendOptions{IdempotencyKey: "once"}
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "first words", 2)}, opts)
	res := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "other words entirely", 3)}, opts)
	if !res.Replayed {
		t.Fatal("second append with the same idempotency key was not a replay")
	}
	wantPostings(t, "after a replay", s, key, 10, 10, map[string][]int64{"first": {1}, "word": {1}, "entir": nil})

	// A conditional append that conflicts indexes nothing either.
	_, err := s.Append(t.Context(), key, []chatmem.Message{msg(chatmem.RoleUser, "conflicting words", 2)},
		chatmem.AppendOptions{ExpectedLastSeq: ptr[int64](0)})
	wantErr(t, "conditional append", err, chatmem.ErrConflict)
	wantPostings(t, "after a conflict", s, key, 10, 10, map[string][]int64{"word": {1}, "conflict": nil})
}

func testPostingsConcurrent(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("search")
	const writers, each = 8, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			st := h.reopen(t, s)
			for i := range each {
				_, err := st.Append(t.Context(), key, []chatmem.Message{
					msg(chatmem.RoleUser, fmt.Sprintf("common writer%d item%d", w, i), 3),
				}, chatmem.AppendOptions{})
				if err != nil {
					t.Errorf("writer %d append %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	all := span(1, writers*each)
	slices.Reverse(all)
	got := mustPostings(t, s, key, []string{"common"}, writers*each+1, 1000)[0]
	if !slices.Equal(got, all) {
		t.Errorf("postings of a term every concurrent append carried = %v, want %v", got, all)
	}
	// Each writer's term names exactly the messages that writer appended.
	msgs := mustRange(t, s, key, 0, 0)
	for w := range writers {
		term := fmt.Sprintf("writer%d", w)
		var want []int64
		for i := len(msgs) - 1; i >= 0; i-- {
			if slices.Contains(chatmem.Terms(msgs[i].Content), term) {
				want = append(want, msgs[i].Seq)
			}
		}
		if got := mustPostings(t, s, key, []string{term}, writers*each+1, 1000)[0]; !slices.Equal(got, want) || len(want) != each {
			t.Errorf("postings of %q = %v, want %v (%d messages)", term, got, want, each)
		}
	}
}

func testPostingsEndings(t *testing.T, h Harness) {
	s := h.New(t)
	sr := as[chatmem.Searcher](t, s)
	endings(t, s,
		func(key chatmem.Key) {
			// Dated back, so that the conversation PurgeInactive ends stays
			// inactive.
			mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "zebra crossing", 2)},
				chatmem.AppendOptions{Now: time.Now().Add(-48 * time.Hour)})
		},
		func(how string, key chatmem.Key) {
			_, err := sr.Postings(t.Context(), key, []string{"zebra"}, 100, 10)
			wantErr(t, fmt.Sprintf("Postings(%s) after %s", key, how), err, chatmem.ErrNotFound)
		},
		func(how string, key chatmem.Key) {
			wantPostings(t, "after "+how+" and a new append", s, key, 100, 10, map[string][]int64{"zebra": nil, "hello": {1}})
		})
}

func testMessagesAt(t *testing.T, h Harness) {
	s := h.New(t)
	sr := as[chatmem.Searcher](t, s)
	key := randomKey("search")
	var msgs []chatmem.Message
	for i := 1; i <= 12; i++ {
		role := chatmem.RoleUser
		if i%2 == 0 {
			role = chatmem.RoleAssistant
		}
		msgs = append(msgs, msg(role, fmt.Sprintf("message %d", i), i))
	}
	mustAppend(t, s, key, msgs, chatmem.AppendOptions{})
	all := mustRange(t, s, key, 0, 0)

	got, err := sr.MessagesAt(t.Context(), key, []int64{9, 2, 12, 2, 40, 0, -1, 5})
	if err != nil {
		t.Fatalf("MessagesAt error = %v", err)
	}
	wantMessages(t, "MessagesAt(9, 2, 12, 2, 40, 0, -1, 5)", got, []chatmem.Message{all[1], all[4], all[8], all[11]})
	got, err = as[chatmem.Searcher](t, h.reopen(t, s)).MessagesAt(t.Context(), key, nil)
	if err != nil || len(got) != 0 {
		t.Errorf("MessagesAt(none) = %v, %v; want nothing, nil", got, err)
	}
}

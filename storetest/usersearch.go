package storetest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// userSearchTests are the subtests of chatmem.UserSearcher.
var userSearchTests = []subtest{
	{"Postings", testUserPostings},
	{"MessagesAt", testUserMessagesAt},
	{"Endings", testUserPostingsEndings},
	{"Order", testUserPostingsOrder},
	{"Invalid", testUserPostingsInvalid},
}

// testUserSearch runs the chatmem.UserSearcher subtests if the harness's
// stores implement it.
var testUserSearch = optional[chatmem.UserSearcher](userSearchTests)

// term returns the index term of word (its stem), failing the test unless
// word is one.
func term(t *testing.T, word string) string {
	t.Helper()
	got := chatmem.Terms(word)
	if len(got) != 1 {
		t.Fatalf("test bug: %q is not one term (Terms = %q)", word, got)
	}
	return got[0]
}

// hit returns the UserHit of seq in conversation conv.
func hit(conv string, seq int64) chatmem.UserHit {
	return chatmem.UserHit{Conversation: conv, Seq: seq}
}

// wantUserPostings fails the test unless the user's postings of each word's
// term, at most limit, are want's (in order).
func wantUserPostings(t *testing.T, what string, s chatmem.Store, user chatmem.Key, limit int, want map[string][]chatmem.UserHit) {
	t.Helper()
	words := slices.Sorted(func(yield func(string) bool) {
		for w := range want {
			if !yield(w) {
				return
			}
		}
	})
	terms := make([]string, len(words))
	for i, w := range words {
		terms[i] = term(t, w)
	}
	got, err := as[chatmem.UserSearcher](t, s).UserPostings(t.Context(), user, terms, limit)
	if err != nil {
		t.Fatalf("%s: UserPostings(%s, %q, %d) error = %v", what, user, terms, limit, err)
	}
	if len(got) != len(terms) {
		t.Fatalf("%s: UserPostings(%s, %q) returned %d lists, want one per term", what, user, terms, len(got))
	}
	for i, w := range words {
		if !slices.Equal(got[i], want[w]) && len(got[i])+len(want[w]) > 0 {
			t.Errorf("%s: user %s's postings of %q (limit %d) = %v, want %v", what, user, terms[i], limit, got[i], want[w])
		}
	}
}

// userSearchBase is the time the fixtures' messages are dated from: each
// message has its own CreatedAt, so the order asked of UserPostings is that
// of the dates, not of the appends.
var userSearchBase = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// at returns a message dated sec seconds after userSearchBase.
func at(role chatmem.Role, content string, sec int) chatmem.Message {
	m := msg(role, content, 2)
	m.CreatedAt = userSearchBase.Add(time.Duration(sec) * time.Second)
	return m
}

// userSearchFixture writes, in a fresh tenant, two conversations of user
// "u-search" (a, then b, their dates interleaved, two pairs of dates
// equal), a conversation of another user of the tenant (v1), one without a
// user (free), and in another tenant a conversation a of a user also named
// "u-search": the last three all newer and all about apples. It returns
// the user and the other tenant's user.
func userSearchFixture(t *testing.T, s chatmem.Store) (u, elsewhere chatmem.Key) {
	t.Helper()
	tenant := randomTenant()
	u = chatmem.Key{Tenant: tenant, ID: "u-search"}
	elsewhere = chatmem.Key{Tenant: randomTenant(), ID: u.ID}
	mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "a"}, []chatmem.Message{
		at(chatmem.RoleSystem, "apple policy", 0), // never indexed
		at(chatmem.RoleUser, "apple pie", 1),
		at(chatmem.RoleAssistant, "apple tart", 3),
	}, chatmem.AppendOptions{User: u.ID})
	// b's second message has a's third's date: b, the greater ID, comes
	// first; its third and fourth share a date: seq 4 comes first.
	mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "b"}, []chatmem.Message{
		at(chatmem.RoleUser, "apple juice", 2),
		at(chatmem.RoleAssistant, "apple cider", 3),
	}, chatmem.AppendOptions{User: u.ID})
	mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "b"}, []chatmem.Message{
		at(chatmem.RoleUser, "banana apple", 5),
		at(chatmem.RoleAssistant, "apple crumble", 5),
	}, chatmem.AppendOptions{})
	mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "v1"}, []chatmem.Message{at(chatmem.RoleUser, "apple vanilla", 10)},
		chatmem.AppendOptions{User: "v"})
	mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "free"}, []chatmem.Message{at(chatmem.RoleUser, "apple free", 10)},
		chatmem.AppendOptions{})
	mustAppend(t, s, chatmem.Key{Tenant: elsewhere.Tenant, ID: "a"}, []chatmem.Message{at(chatmem.RoleUser, "apple away", 10)},
		chatmem.AppendOptions{User: elsewhere.ID})
	return u, elsewhere
}

// testUserPostings: UserPostings lists the messages of the user's
// conversations under each term, newest first by date, then conversation
// ID, then seq, at most limit; nothing of another user of the tenant, of a
// conversation without a user, of a user of the same ID in another tenant,
// nor of a system message.
func testUserPostings(t *testing.T, h Harness) {
	s := h.New(t)
	u, elsewhere := userSearchFixture(t, s)
	apples := []chatmem.UserHit{hit("b", 4), hit("b", 3), hit("b", 2), hit("a", 3), hit("b", 1), hit("a", 2)}
	want := map[string][]chatmem.UserHit{
		"apple":   apples,
		"banana":  {hit("b", 3)},
		"pie":     {hit("a", 2)},
		"policy":  nil, // the system message's only
		"free":    nil, // the conversation without a user's
		"away":    nil, // the other tenant's
		"vanilla": nil, // the other user's
		"unknown": nil,
	}
	wantUserPostings(t, "two conversations", s, u, 10, want)
	wantUserPostings(t, "another store over the same data", h.reopen(t, s), u, 10, want)
	wantUserPostings(t, "limit 3", s, u, 3, map[string][]chatmem.UserHit{"apple": apples[:3], "banana": {hit("b", 3)}})
	wantUserPostings(t, "limit 1", s, u, 1, map[string][]chatmem.UserHit{"apple": apples[:1]})
	wantUserPostings(t, "the other user", s, userOf(u, "v"), 10, map[string][]chatmem.UserHit{"apple": {hit("v1", 1)}, "pie": nil})
	wantUserPostings(t, "the other tenant's user", s, elsewhere, 10,
		map[string][]chatmem.UserHit{"apple": {hit("a", 1)}, "away": {hit("a", 1)}, "pie": nil})
	wantUserPostings(t, "a user with nothing", s, userOf(u, "nobody"), 10, map[string][]chatmem.UserHit{"apple": nil})

	us := as[chatmem.UserSearcher](t, s)
	if got, err := us.UserPostings(t.Context(), u, nil, 10); err != nil || len(got) != 0 {
		t.Errorf("UserPostings(no terms) = %v, %v; want none", got, err)
	}
	apple := term(t, "apple")
	got, err := us.UserPostings(t.Context(), u, []string{apple, apple}, 10)
	if err != nil || len(got) != 2 || !slices.Equal(got[0], got[1]) {
		t.Errorf("UserPostings(a term twice) = %v, %v; want two equal lists", got, err)
	}
}

// testUserMessagesAt: UserMessagesAt returns the messages the hits name in
// the user's conversations, ordered by conversation and seq, each once,
// and skips the hits of other users' conversations, of conversations
// without a user, of missing conversations and of missing seqs.
func testUserMessagesAt(t *testing.T, h Harness) {
	s := h.New(t)
	u, elsewhere := userSearchFixture(t, s)
	us := as[chatmem.UserSearcher](t, s)
	ctx := t.Context()
	hits := []chatmem.UserHit{hit("b", 4), hit("a", 2), hit("v1", 1), hit("free", 1), hit("a", 99), hit("nope", 1),
		hit("b", 4), hit("a", 0), hit("a", 1)}
	got, err := us.UserMessagesAt(ctx, u, hits)
	if err != nil {
		t.Fatalf("UserMessagesAt error = %v", err)
	}
	want := []chatmem.UserMessage{
		{Conversation: "a", Message: at(chatmem.RoleSystem, "apple policy", 0)},
		{Conversation: "a", Message: at(chatmem.RoleUser, "apple pie", 1)},
		{Conversation: "b", Message: at(chatmem.RoleAssistant, "apple crumble", 5)},
	}
	for i, seq := range []int64{1, 2, 4} {
		want[i].Seq = seq
	}
	wantUserMessages(t, "UserMessagesAt", got, want)

	got, err = us.UserMessagesAt(ctx, elsewhere, []chatmem.UserHit{hit("a", 1), hit("a", 2), hit("b", 1)})
	if err != nil {
		t.Fatalf("UserMessagesAt(the other tenant's user) error = %v", err)
	}
	away := at(chatmem.RoleUser, "apple away", 10)
	away.Seq = 1
	wantUserMessages(t, "UserMessagesAt(the other tenant's user)", got, []chatmem.UserMessage{{Conversation: "a", Message: away}})

	for _, other := range []chatmem.Key{userOf(u, "v"), userOf(u, "nobody")} {
		got, err = us.UserMessagesAt(ctx, other, []chatmem.UserHit{hit("a", 2), hit("b", 1), hit("free", 1)})
		if err != nil || len(got) != 0 {
			t.Errorf("UserMessagesAt(%s, the hits of another user) = %d messages, %v; want none", other, len(got), err)
		}
	}
	if got, err = us.UserMessagesAt(ctx, u, nil); err != nil || len(got) != 0 {
		t.Errorf("UserMessagesAt(no hits) = %d messages, %v; want none", len(got), err)
	}
}

// wantUserMessages fails the test unless got equals want message by
// message.
func wantUserMessages(t *testing.T, what string, got, want []chatmem.UserMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %d messages, want %d: %v", what, len(got), len(want), got)
		return
	}
	for i := range got {
		if got[i].Conversation != want[i].Conversation {
			t.Errorf("%s message %d: Conversation = %q, want %q", what, i, got[i].Conversation, want[i].Conversation)
		}
		if d := diffMessage(got[i].Message, want[i].Message); d != "" {
			t.Errorf("%s message %d: %s", what, i, d)
		}
	}
}

// testUserPostingsEndings: a conversation's entries go when it ends
// (Delete, expiry, Sweep, PurgeInactive), and do not come back when its ID
// starts afresh, for the same user or another; all of the user's go with
// DeleteUser, and the other users' stay.
func testUserPostingsEndings(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	u, _ := userSearchFixture(t, s)
	conv := func(id string) chatmem.Key { return chatmem.Key{Tenant: u.Tenant, ID: id} }

	if err := s.Delete(ctx, conv("a")); err != nil {
		t.Fatal(err)
	}
	apples := []chatmem.UserHit{hit("b", 4), hit("b", 3), hit("b", 2), hit("b", 1)}
	wantUserPostings(t, "after Delete(a)", s, u, 10, map[string][]chatmem.UserHit{"apple": apples, "pie": nil, "tart": nil})
	// a again, for another user: nothing of it is u's.
	mustAppend(t, s, conv("a"), []chatmem.Message{at(chatmem.RoleUser, "apple tart", 20)}, chatmem.AppendOptions{User: "v"})
	wantUserPostings(t, "a created again for v", s, u, 10, map[string][]chatmem.UserHit{"apple": apples, "tart": nil})
	wantUserPostings(t, "a created again for v", s, userOf(u, "v"), 10,
		map[string][]chatmem.UserHit{"apple": {hit("a", 1), hit("v1", 1)}, "tart": {hit("a", 1)}})

	// Expired (its messages dated an hour ago, its TTL a minute), then
	// started afresh with one message: the old three are gone.
	past := time.Now().Add(-time.Hour)
	old := []chatmem.Message{msg(chatmem.RoleUser, "kiwi one", 2), msg(chatmem.RoleAssistant, "kiwi two", 2), msg(chatmem.RoleUser, "kiwi three", 2)}
	mustAppend(t, s, conv("e"), old, chatmem.AppendOptions{User: u.ID, TTL: time.Minute, Now: past})
	wantUserPostings(t, "expired", s, u, 10, map[string][]chatmem.UserHit{"kiwi": nil})
	mustAppend(t, s, conv("e"), []chatmem.Message{msg(chatmem.RoleUser, "kiwi again", 2)}, chatmem.AppendOptions{User: u.ID})
	wantUserPostings(t, "expired, then started afresh", s, u, 10, map[string][]chatmem.UserHit{"kiwi": {hit("e", 1)}})

	if sw, ok := s.(chatmem.Sweeper); ok {
		mustAppend(t, s, conv("sw"), old, chatmem.AppendOptions{User: u.ID, TTL: time.Minute, Now: past})
		if _, err := sw.Sweep(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		wantUserPostings(t, "swept", s, u, 10, map[string][]chatmem.UserHit{"kiwi": {hit("e", 1)}})
	}
	if p, ok := s.(chatmem.Purger); ok {
		mustAppend(t, s, conv("p"), []chatmem.Message{msg(chatmem.RoleUser, "mango one", 2), msg(chatmem.RoleUser, "mango two", 2)},
			chatmem.AppendOptions{User: u.ID, Now: time.Now().Add(-48 * time.Hour)})
		wantUserPostings(t, "before PurgeInactive", s, u, 10, map[string][]chatmem.UserHit{"mango": {hit("p", 2), hit("p", 1)}})
		if _, err := p.PurgeInactive(ctx, u.Tenant, time.Now().Add(-24*time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantUserPostings(t, "purged", s, u, 10, map[string][]chatmem.UserHit{"mango": nil})
		mustAppend(t, s, conv("p"), []chatmem.Message{msg(chatmem.RoleUser, "mango fresh", 2)}, chatmem.AppendOptions{User: u.ID})
		wantUserPostings(t, "purged, then started afresh", s, u, 10, map[string][]chatmem.UserHit{"mango": {hit("p", 1)}})
	}

	if _, err := us.DeleteUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	wantUserPostings(t, "after DeleteUser", s, u, 10, map[string][]chatmem.UserHit{"apple": nil, "kiwi": nil, "mango": nil})
	wantUserPostings(t, "the other user after DeleteUser", s, userOf(u, "v"), 10,
		map[string][]chatmem.UserHit{"apple": {hit("a", 1), hit("v1", 1)}})
	// The user's ID may start afresh.
	mustAppend(t, s, conv("b"), []chatmem.Message{at(chatmem.RoleUser, "apple anew", 30)}, chatmem.AppendOptions{User: u.ID})
	wantUserPostings(t, "a new conversation after DeleteUser", s, u, 10, map[string][]chatmem.UserHit{"apple": {hit("b", 1)}})
}

// testUserPostingsOrder: UserPostings keeps its order (date, then
// conversation ID, then seq, all descending) and its limit where dates
// tie, within one append and across conversations, where appends come
// out of date order, where a conversation ends in between and where
// expired ones hold postings among the others: random
// appends of up to 40 messages, all dated within two milliseconds (a
// store may group its index by millisecond), to conversations whose IDs
// do not follow their creation, checked against the same order computed
// here for every limit.
func testUserPostingsOrder(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	u := chatmem.Key{Tenant: randomTenant(), ID: "u-order"}
	r := rand.New(rand.NewPCG(17, 4))
	base := userSearchBase.Add(time.Hour)
	instants := []time.Duration{0, time.Microsecond, 2 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, time.Millisecond + time.Microsecond}
	convs := []string{"m", "c", "x", "a", "q"}
	type posting struct {
		hit chatmem.UserHit
		at  time.Time
	}
	var all []posting
	seqs := map[string]int64{}
	check := func(what string) {
		t.Helper()
		want := slices.Clone(all)
		slices.SortFunc(want, func(a, b posting) int {
			return cmp.Or(b.at.Compare(a.at), cmp.Compare(b.hit.Conversation, a.hit.Conversation), cmp.Compare(b.hit.Seq, a.hit.Seq))
		})
		hits := make([]chatmem.UserHit, len(want))
		for i, p := range want {
			hits[i] = p.hit
		}
		for limit := 1; limit <= len(hits)+1; limit++ {
			wantUserPostings(t, fmt.Sprintf("%s, limit %d", what, limit), s, u, limit,
				map[string][]chatmem.UserHit{"kiwi": hits[:min(limit, len(hits))]})
		}
	}
	kiwis := func(conv string, n int, when time.Time) []chatmem.Message {
		msgs := make([]chatmem.Message, n)
		for i := range msgs {
			role := chatmem.RoleUser
			if i%2 == 1 {
				role = chatmem.RoleAssistant
			}
			msgs[i] = msg(role, "kiwi", 1)
			msgs[i].CreatedAt = when
			if conv != "" {
				seqs[conv]++
				all = append(all, posting{hit(conv, seqs[conv]), when})
			}
		}
		return msgs
	}
	// expire appends n messages dated when to a new conversation of the
	// user that has expired and may not be swept yet: they are in no list.
	expire := func(id string, n int, when time.Time) {
		mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: id}, kiwis("", n, when),
			chatmem.AppendOptions{User: u.ID, TTL: time.Minute, Now: time.Now().Add(-time.Hour)})
	}
	// First in date order, the expired conversation's messages between
	// two appends of a live one.
	mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "m"}, kiwis("m", 10, base), chatmem.AppendOptions{User: u.ID})
	expire("e", 10, base.Add(time.Microsecond))
	mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "m"}, kiwis("m", 10, base.Add(2*time.Microsecond)), chatmem.AppendOptions{User: u.ID})
	check("in date order")
	// One date, the lower conversation ID appended last: its row alone
	// is out of order, and is among the newest.
	later := base.Add(10 * time.Millisecond)
	mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "b"}, kiwis("b", 3, later), chatmem.AppendOptions{User: u.ID})
	mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "a"}, kiwis("a", 1, later), chatmem.AppendOptions{User: u.ID})
	check("one date, the lower conversation ID last")
	for step := range 14 {
		conv := convs[r.IntN(len(convs))]
		if step == 9 {
			// The conversation with the newest message ends: its
			// postings go, the others keep their order, and later
			// appends of the same dates fit among them.
			newest := all[0]
			for _, p := range all {
				if p.at.After(newest.at) {
					newest = p
				}
			}
			conv = newest.hit.Conversation
			if err := s.Delete(ctx, chatmem.Key{Tenant: u.Tenant, ID: conv}); err != nil {
				t.Fatal(err)
			}
			all = slices.DeleteFunc(all, func(p posting) bool { return p.hit.Conversation == conv })
			delete(seqs, conv)
			check(fmt.Sprintf("after deleting %s", conv))
			continue
		}
		when := base.Add(instants[r.IntN(len(instants))])
		if step%4 == 1 {
			expire(fmt.Sprintf("e%d", step), 1+r.IntN(40), when)
		}
		msgs := kiwis(conv, 1+r.IntN(40), when)
		mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: conv}, msgs, chatmem.AppendOptions{User: u.ID})
		if step%3 == 2 {
			check(fmt.Sprintf("after append %d", step))
		}
	}
	check("at the end")
}

// testUserPostingsInvalid: a bad user key, a limit below 1 and an empty
// term wrap ErrInvalid.
func testUserPostingsInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	us := as[chatmem.UserSearcher](t, s)
	ctx := t.Context()
	u := userOf(randomKey("x"), "u1")
	mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "c1"}, []chatmem.Message{msg(chatmem.RoleUser, "hello there", 2)},
		chatmem.AppendOptions{User: u.ID})
	for _, bad := range []chatmem.Key{{Tenant: u.Tenant, ID: ""}, {Tenant: u.Tenant, ID: "u/1"}, {Tenant: "", ID: "u1"}} {
		_, err := us.UserPostings(ctx, bad, []string{"hello"}, 5)
		wantErr(t, fmt.Sprintf("UserPostings(%q)", bad), err, chatmem.ErrInvalid)
		_, err = us.UserMessagesAt(ctx, bad, []chatmem.UserHit{hit("c1", 1)})
		wantErr(t, fmt.Sprintf("UserMessagesAt(%q)", bad), err, chatmem.ErrInvalid)
	}
	_, err := us.UserPostings(ctx, u, []string{"hello"}, 0)
	wantErr(t, "UserPostings(limit 0)", err, chatmem.ErrInvalid)
	_, err = us.UserPostings(ctx, u, []string{"hello", ""}, 5)
	wantErr(t, "UserPostings(an empty term)", err, chatmem.ErrInvalid)
}

package storetest

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// userTests are the subtests of chatmem.UserStore.
var userTests = []subtest{
	{"Binding", testUserBinding},
	{"BindingInvalid", testUserBindingInvalid},
	{"List", testUserList},
	{"Facts", testUserFacts},
	{"FactsInvalid", testUserFactsInvalid},
	{"ConcurrentFacts", testUserFactsConcurrent},
	{"TenantIsolation", testUserTenantIsolation},
	{"Delete", testDeleteUser},
	{"DeleteResumes", testDeleteUserResumes},
	{"EraseRaw", testEraseRaw},
	{"Erasure", optional[chatmem.UserStore](erasureTests)},             // erasure.go
	{"Search", testUserSearch},                                         // chatmem.UserSearcher: usersearch.go
	{"Lister", optional[chatmem.UserLister](userListerTests)},          // userlist.go
	{"ReplaceFacts", optional[chatmem.UserFactReplacer](replaceTests)}, // userlist.go
}

// userOf returns the key of user id in key's tenant.
func userOf(key chatmem.Key, id string) chatmem.Key {
	return chatmem.Key{Tenant: key.Tenant, ID: id}
}

// conversationIDs returns the IDs of a page's conversations.
func conversationIDs(p chatmem.Page) []string {
	ids := make([]string, len(p.Conversations))
	for i, c := range p.Conversations {
		ids[i] = c.Key.ID
	}
	return ids
}

// testUserBinding: the append that creates a conversation binds it to
// AppendOptions.User; later appends may repeat the user or leave it out;
// another user, or a user on a conversation created without one, is
// ErrConflict and writes nothing; an idempotent retry replays first.
func testUserBinding(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	key := randomKey("c-bound")
	res := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)},
		chatmem.AppendOptions{User: "u-42", IdempotencyKey: "first"})
	if res.Conversation.User != "u-42" {
		t.Errorf("Append(User u-42).Conversation.User = %q, want u-42", res.Conversation.User)
	}
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleAssistant, "hello", 1)}, chatmem.AppendOptions{})
	res = mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "again", 1)}, chatmem.AppendOptions{User: "u-42"})
	if res.Conversation.User != "u-42" || res.Conversation.LastSeq != 3 {
		t.Errorf("Append(same user).Conversation = %q at %d, want u-42 at 3", res.Conversation.User, res.Conversation.LastSeq)
	}
	_, err := s.Append(ctx, key, []chatmem.Message{msg(chatmem.RoleUser, "intruder", 1)}, chatmem.AppendOptions{User: "u-43"})
	wantErr(t, "Append(another user)", err, chatmem.ErrConflict)
	if c := mustConversation(t, s, key); c.User != "u-42" || c.LastSeq != 3 {
		t.Errorf("after the conflict Conversation = %q at %d, want u-42 at 3", c.User, c.LastSeq)
	}
	// The idempotency key is checked first: the retry of the first append
	// replays whatever user it names.
	res, err = s.Append(ctx, key, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)},
		chatmem.AppendOptions{User: "u-43", IdempotencyKey: "first"})
	if err != nil || !res.Replayed {
		t.Errorf("retry of the first append = replayed %v, %v; want a replay", res.Replayed, err)
	}
	if got := mustRange(t, s, key, 0, 0); len(got) != 3 {
		t.Errorf("conversation holds %d messages, want 3", len(got))
	}

	// A conversation created without a user stays without one.
	free := chatmem.Key{Tenant: key.Tenant, ID: "c-free"}
	res = mustAppend(t, s, free, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}, chatmem.AppendOptions{})
	if res.Conversation.User != "" {
		t.Errorf("Append(no user).Conversation.User = %q, want empty", res.Conversation.User)
	}
	_, err = s.Append(ctx, free, []chatmem.Message{msg(chatmem.RoleUser, "late", 1)}, chatmem.AppendOptions{User: "u-42"})
	wantErr(t, "Append(user) to a conversation created without one", err, chatmem.ErrConflict)
	if c := mustConversation(t, s, free); c.User != "" || c.LastSeq != 1 {
		t.Errorf("Conversation(c-free) = %q at %d, want no user at 1", c.User, c.LastSeq)
	}

	// Every read of the conversation carries its user, and so does a
	// second process's.
	s2 := h.reopen(t, s)
	if c := mustConversation(t, s2, key); c.User != "u-42" {
		t.Errorf("reopened Conversation.User = %q, want u-42", c.User)
	}
	page, err := s2.List(ctx, key.Tenant, chatmem.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range page.Conversations {
		want := map[string]string{"c-bound": "u-42", "c-free": ""}[c.Key.ID]
		if c.User != want {
			t.Errorf("List: %s has user %q, want %q", c.Key.ID, c.User, want)
		}
	}
	if sr, ok := s2.(chatmem.SinceReader); ok {
		c, _, err := sr.ConversationSince(ctx, key, 0, 1)
		if err != nil || c.User != "u-42" {
			t.Errorf("ConversationSince().User = %q, %v; want u-42", c.User, err)
		}
	}

	// Deleted, the ID may start afresh with another user.
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	res = mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "new", 1)}, chatmem.AppendOptions{User: "u-43"})
	if res.Conversation.User != "u-43" {
		t.Errorf("re-created conversation has user %q, want u-43", res.Conversation.User)
	}
}

// testUserBindingInvalid: a malformed user ID wraps ErrInvalid and writes
// nothing.
func testUserBindingInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("c1")
	for _, bad := range []string{"-u", "u/1", "u{1}", "u 1", strings.Repeat("u", chatmem.MaxIDLen+1)} {
		_, err := s.Append(t.Context(), key, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}, chatmem.AppendOptions{User: bad})
		wantErr(t, fmt.Sprintf("Append(User %q)", bad), err, chatmem.ErrInvalid)
	}
	wantNotFound(t, s, key)
	us := as[chatmem.UserStore](t, s)
	_, err := us.UserConversations(t.Context(), chatmem.Key{Tenant: key.Tenant, ID: "u/1"}, chatmem.PageRequest{})
	wantErr(t, "UserConversations(bad user)", err, chatmem.ErrInvalid)
	_, err = us.UserConversations(t.Context(), userOf(key, "u1"), chatmem.PageRequest{Limit: 1001})
	wantErr(t, "UserConversations(limit 1001)", err, chatmem.ErrInvalid)
	_, err = us.UserFacts(t.Context(), chatmem.Key{Tenant: key.Tenant, ID: ""})
	wantErr(t, "UserFacts(empty user)", err, chatmem.ErrInvalid)
	_, err = us.DeleteUser(t.Context(), chatmem.Key{Tenant: "", ID: "u1"})
	wantErr(t, "DeleteUser(empty tenant)", err, chatmem.ErrInvalid)
}

// testUserList: UserConversations lists the user's live conversations in
// ID order, page by page, and nothing of other users.
func testUserList(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	tenant := randomTenant()
	u := chatmem.Key{Tenant: tenant, ID: "u-1"}
	for _, id := range []string{"c-3", "c-1", "c-5", "c-2"} {
		mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: id}, []chatmem.Message{msg(chatmem.RoleUser, "hi "+id, 1)},
			chatmem.AppendOptions{User: "u-1"})
	}
	mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "c-4"}, []chatmem.Message{msg(chatmem.RoleUser, "other", 1)},
		chatmem.AppendOptions{User: "u-2"})
	mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "c-0"}, []chatmem.Message{msg(chatmem.RoleUser, "nobody", 1)},
		chatmem.AppendOptions{})
	// A conflicting append binds nothing to u-1.
	_, err := s.Append(ctx, chatmem.Key{Tenant: tenant, ID: "c-4"}, []chatmem.Message{msg(chatmem.RoleUser, "x", 1)},
		chatmem.AppendOptions{User: "u-1"})
	wantErr(t, "Append(c-4, u-1)", err, chatmem.ErrConflict)

	var got []string
	var pages int
	req := chatmem.PageRequest{Limit: 2}
	for {
		p, err := us.UserConversations(ctx, u, req)
		if err != nil {
			t.Fatalf("UserConversations(%+v) error = %v", req, err)
		}
		pages++
		for _, c := range p.Conversations {
			if c.User != "u-1" || c.Key.Tenant != tenant || c.LastSeq != 1 {
				t.Errorf("UserConversations: %+v, want a conversation of u-1 with one message", c)
			}
		}
		got = append(got, conversationIDs(p)...)
		if p.Next == "" || pages > 5 {
			break
		}
		req.After = p.Next
	}
	if want := []string{"c-1", "c-2", "c-3", "c-5"}; !slices.Equal(got, want) {
		t.Errorf("UserConversations(u-1) = %v, want %v", got, want)
	}
	p, err := us.UserConversations(ctx, chatmem.Key{Tenant: tenant, ID: "u-2"}, chatmem.PageRequest{})
	if err != nil || !slices.Equal(conversationIDs(p), []string{"c-4"}) || p.Next != "" {
		t.Errorf("UserConversations(u-2) = %v next %q, %v; want [c-4]", conversationIDs(p), p.Next, err)
	}
	p, err = us.UserConversations(ctx, chatmem.Key{Tenant: tenant, ID: "u-none"}, chatmem.PageRequest{})
	if err != nil || len(p.Conversations) != 0 {
		t.Errorf("UserConversations(unknown user) = %v, %v; want none", conversationIDs(p), err)
	}
	// A deleted conversation leaves the list; an expired one is not listed.
	if err := s.Delete(ctx, chatmem.Key{Tenant: tenant, ID: "c-2"}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "c-6"}, []chatmem.Message{msg(chatmem.RoleUser, "brief", 1)},
		chatmem.AppendOptions{User: "u-1", TTL: time.Minute, Now: past})
	p, err = us.UserConversations(ctx, u, chatmem.PageRequest{})
	if want := []string{"c-1", "c-3", "c-5"}; err != nil || !slices.Equal(conversationIDs(p), want) {
		t.Errorf("after a delete and an expiry UserConversations(u-1) = %v, %v; want %v", conversationIDs(p), err, want)
	}
}

// testUserFacts: user facts have their own current values and history,
// apart from every conversation's facts; the conversation they came from
// is kept.
func testUserFacts(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	key := randomKey("c-1")
	u := userOf(key, "u-1")
	facts, err := us.UserFacts(ctx, u)
	if err != nil || len(facts) != 0 {
		t.Errorf("UserFacts(new user) = %v, %v; want none, nil", facts, err)
	}
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "I am Kavya", 1)}, chatmem.AppendOptions{User: "u-1"})
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	err = us.SetUserFacts(ctx, u, []chatmem.Fact{
		{Key: "name", Value: "Kavya", SourceSeq: 1, SetBy: "rules", Confidence: 0.9, Conversation: "c-1", CreatedAt: t0},
		{Key: "language", Value: "hi", SetBy: "app", Confidence: 1, CreatedAt: t0},
	})
	if err != nil {
		t.Fatalf("SetUserFacts error = %v", err)
	}
	err = us.SetUserFacts(ctx, u, []chatmem.Fact{
		{Key: "language", Value: "en", SourceSeq: 7, SetBy: "rules", Confidence: 0.8, Conversation: "c-2", CreatedAt: t0.Add(time.Hour)},
		{Key: "language", Value: "es", SourceSeq: 9, SetBy: "rules", Confidence: 0.7, Conversation: "c-2", CreatedAt: t0.Add(2 * time.Hour)},
	})
	if err != nil {
		t.Fatalf("SetUserFacts(second) error = %v", err)
	}
	s2 := h.reopen(t, s)
	us2 := as[chatmem.UserStore](t, s2)
	facts, err = us2.UserFacts(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	want := []chatmem.Fact{
		{Key: "language", Value: "es", SourceSeq: 9, SetBy: "rules", Confidence: 0.7, Conversation: "c-2", CreatedAt: t0.Add(2 * time.Hour)},
		{Key: "name", Value: "Kavya", SourceSeq: 1, SetBy: "rules", Confidence: 0.9, Conversation: "c-1", CreatedAt: t0},
	}
	wantUserFacts(t, "UserFacts", facts, want)
	hist, err := us2.UserFactHistory(ctx, u, "language")
	if err != nil {
		t.Fatal(err)
	}
	wantUserFacts(t, "UserFactHistory(language)", hist, []chatmem.Fact{
		{Key: "language", Value: "hi", SetBy: "app", Confidence: 1, CreatedAt: t0},
		{Key: "language", Value: "en", SourceSeq: 7, SetBy: "rules", Confidence: 0.8, Conversation: "c-2", CreatedAt: t0.Add(time.Hour)},
		want[0],
	})
	_, err = us2.UserFactHistory(ctx, u, "email")
	wantErr(t, "UserFactHistory(never set)", err, chatmem.ErrNotFound)

	// The conversation's own facts are apart from the user's.
	if fs, ok := s.(chatmem.FactStore); ok {
		own, err := fs.Facts(ctx, key)
		if err != nil || len(own) != 0 {
			t.Errorf("Facts(conversation) = %v, %v; want none: user facts are not the conversation's", own, err)
		}
		if err := fs.SetFacts(ctx, key, []chatmem.Fact{{Key: "order_id", Value: "A-1", SetBy: "app", Confidence: 1}}); err != nil {
			t.Fatal(err)
		}
		if facts, _ := us2.UserFacts(ctx, u); len(facts) != 2 {
			t.Errorf("UserFacts after a conversation fact = %d facts, want 2", len(facts))
		}
	}

	if err := us2.DeleteUserFact(ctx, u, "language"); err != nil {
		t.Fatalf("DeleteUserFact error = %v", err)
	}
	wantErr(t, "DeleteUserFact(again)", us.DeleteUserFact(ctx, u, "language"), chatmem.ErrNotFound)
	_, err = us.UserFactHistory(ctx, u, "language")
	wantErr(t, "UserFactHistory(deleted)", err, chatmem.ErrNotFound)
	facts, _ = us.UserFacts(ctx, u)
	wantUserFacts(t, "UserFacts after DeleteUserFact", facts, want[1:])

	// A user without conversations may have facts; they are set and read
	// all the same. A zero CreatedAt gets the store's clock.
	lone := userOf(key, "u-lone")
	before := time.Now().Add(-time.Second)
	if err := us.SetUserFacts(ctx, lone, []chatmem.Fact{{Key: "email", Value: "a@b.c", SetBy: "app", Confidence: 1}}); err != nil {
		t.Fatal(err)
	}
	facts, err = us.UserFacts(ctx, lone)
	if err != nil || len(facts) != 1 || facts[0].CreatedAt.Before(before) {
		t.Errorf("UserFacts(lone user) = %+v, %v; want one fact created now", facts, err)
	}
}

// wantUserFacts compares facts by their stored fields.
func wantUserFacts(t *testing.T, what string, got, want []chatmem.Fact) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %d facts %+v, want %d", what, len(got), got, len(want))
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.Value != w.Value || g.SourceSeq != w.SourceSeq || g.SetBy != w.SetBy ||
			g.Confidence != w.Confidence || g.Conversation != w.Conversation || !g.CreatedAt.Equal(w.CreatedAt) {
			t.Errorf("%s[%d] = %+v, want %+v", what, i, g, w)
		}
	}
}

// testUserFactsConcurrent: concurrent writers of one user's fact, from
// two store instances, all land: the history holds every value, once, and
// the current value is the last of it.
func testUserFactsConcurrent(t *testing.T, h Harness) {
	s := h.New(t)
	stores := []chatmem.UserStore{as[chatmem.UserStore](t, s), as[chatmem.UserStore](t, h.reopen(t, s))}
	u := chatmem.Key{Tenant: randomTenant(), ID: "u-busy"}
	const writers, each = 4, 5
	errs := make(chan error, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				f := chatmem.Fact{Key: "language", Value: fmt.Sprintf("v%d-%d", w, i), SetBy: "app", Confidence: 1}
				errs <- stores[w%2].SetUserFacts(t.Context(), u, []chatmem.Fact{f})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("SetUserFacts: %v", err)
		}
	}
	hist, err := stores[0].UserFactHistory(t.Context(), u, "language")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range hist {
		seen[f.Value] = true
	}
	if len(hist) != writers*each || len(seen) != writers*each {
		t.Errorf("history holds %d values (%d distinct), want %d", len(hist), len(seen), writers*each)
	}
	facts, err := stores[1].UserFacts(t.Context(), u)
	if err != nil || len(facts) != 1 || len(hist) == 0 || facts[0].Value != hist[len(hist)-1].Value {
		t.Errorf("UserFacts = %+v, %v; want the history's last value", facts, err)
	}
}

// testUserFactsInvalid: bad facts and names wrap ErrInvalid and write
// nothing.
func testUserFactsInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	u := chatmem.Key{Tenant: randomTenant(), ID: "u-1"}
	good := chatmem.Fact{Key: "name", Value: "Kavya", SetBy: "app", Confidence: 1}
	for name, bad := range map[string]chatmem.Fact{
		"bad key":          {Key: "Name", Value: "x", SetBy: "app"},
		"empty value":      {Key: "name", SetBy: "app"},
		"bad conversation": {Key: "name", Value: "x", SetBy: "app", Conversation: "a/b"},
		"confidence":       {Key: "name", Value: "x", SetBy: "app", Confidence: 2},
	} {
		err := us.SetUserFacts(ctx, u, []chatmem.Fact{good, bad})
		wantErr(t, "SetUserFacts("+name+")", err, chatmem.ErrInvalid)
	}
	if facts, err := us.UserFacts(ctx, u); err != nil || len(facts) != 0 {
		t.Errorf("after refused writes UserFacts = %v, %v; want none", facts, err)
	}
	wantErr(t, "UserFactHistory(bad name)", func() error { _, err := us.UserFactHistory(ctx, u, "Bad"); return err }(), chatmem.ErrInvalid)
	wantErr(t, "DeleteUserFact(bad name)", us.DeleteUserFact(ctx, u, "Bad"), chatmem.ErrInvalid)
	wantErr(t, "SetUserFacts(bad user)", us.SetUserFacts(ctx, chatmem.Key{Tenant: u.Tenant, ID: "u*"}, []chatmem.Fact{good}), chatmem.ErrInvalid)
}

// testUserTenantIsolation: one user ID in two tenants is two users.
func testUserTenantIsolation(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	a := chatmem.Key{Tenant: randomTenant(), ID: "u-1"}
	b := chatmem.Key{Tenant: randomTenant(), ID: "u-1"}
	mustAppend(t, s, chatmem.Key{Tenant: a.Tenant, ID: "c-1"}, []chatmem.Message{msg(chatmem.RoleUser, "a", 1)}, chatmem.AppendOptions{User: "u-1"})
	mustAppend(t, s, chatmem.Key{Tenant: b.Tenant, ID: "c-2"}, []chatmem.Message{msg(chatmem.RoleUser, "b", 1)}, chatmem.AppendOptions{User: "u-1"})
	if err := us.SetUserFacts(ctx, a, []chatmem.Fact{{Key: "name", Value: "Ana", SetBy: "app", Confidence: 1}}); err != nil {
		t.Fatal(err)
	}
	p, err := us.UserConversations(ctx, b, chatmem.PageRequest{})
	if err != nil || !slices.Equal(conversationIDs(p), []string{"c-2"}) {
		t.Errorf("UserConversations(b) = %v, %v; want [c-2]", conversationIDs(p), err)
	}
	if facts, err := us.UserFacts(ctx, b); err != nil || len(facts) != 0 {
		t.Errorf("UserFacts(b) = %v, %v; want none (a's facts)", facts, err)
	}
	wantErr(t, "DeleteUserFact(b, a's fact)", us.DeleteUserFact(ctx, b, "name"), chatmem.ErrNotFound)
	if n, err := us.DeleteUser(ctx, b); err != nil || n != 1 {
		t.Errorf("DeleteUser(b) = %d, %v; want 1", n, err)
	}
	mustConversation(t, s, chatmem.Key{Tenant: a.Tenant, ID: "c-1"})
	if facts, err := us.UserFacts(ctx, a); err != nil || len(facts) != 1 {
		t.Errorf("after DeleteUser(b) UserFacts(a) = %v, %v; want Ana", facts, err)
	}
}

// userFixture writes a user with two conversations holding messages, a
// summary, facts, vectors and idempotency keys, and user facts; every text
// contains word, and the conversation IDs start with the user's ID.
func userFixture(t *testing.T, s chatmem.Store, u chatmem.Key, word string) []chatmem.Key {
	t.Helper()
	ctx := t.Context()
	var keys []chatmem.Key
	for i := range 2 {
		key := chatmem.Key{Tenant: u.Tenant, ID: fmt.Sprintf("%s-conv-%d", u.ID, i)}
		keys = append(keys, key)
		past := time.Now().Add(-time.Hour)
		opts := chatmem.AppendOptions{User: u.ID, IdempotencyKey: "idem-" + word}
		if i == 1 {
			opts.TTL, opts.Now = time.Minute, past // expired: erasure removes it too
		}
		mustAppend(t, s, key, []chatmem.Message{
			msg(chatmem.RoleSystem, "system about "+word, 3),
			msg(chatmem.RoleUser, "my name is "+word+" and I live in "+word+"ville", 5),
			msg(chatmem.RoleAssistant, "hello "+word, 2),
		}, opts)
		if i == 1 {
			continue
		}
		if ss, ok := s.(chatmem.SummaryStore); ok {
			if err := ss.PutSummary(ctx, key, chatmem.Summary{Text: "summary of " + word, CoversSeq: 2, Tokens: 3, Summarizer: "test"}, 0); err != nil {
				t.Fatal(err)
			}
		}
		if fs, ok := s.(chatmem.FactStore); ok {
			if err := fs.SetFacts(ctx, key, []chatmem.Fact{{Key: "order_id", Value: "order-" + word, SetBy: "app", Confidence: 1}}); err != nil {
				t.Fatal(err)
			}
		}
		if vs, ok := s.(chatmem.VectorStore); ok {
			if err := vs.PutVectors(ctx, key, "model-"+word, []int64{2, 3}, [][]float32{{1, 0}, {0, 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	us := as[chatmem.UserStore](t, s)
	err := us.SetUserFacts(ctx, u, []chatmem.Fact{
		{Key: "name", Value: word, SetBy: "app", Confidence: 1, Conversation: keys[0].ID, SourceSeq: 2},
		{Key: "name", Value: word + "a", SetBy: "app", Confidence: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// testDeleteUser: DeleteUser removes the user's conversations (expired
// ones too) with everything of theirs and the user's facts, leaves other
// users and conversations alone, and may run again.
func testDeleteUser(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	u := chatmem.Key{Tenant: randomTenant(), ID: "u-gone"}
	keys := userFixture(t, s, u, "plumtree")
	other := userOf(u, "u-stays")
	otherKeys := userFixture(t, s, other, "cherry")
	free := chatmem.Key{Tenant: u.Tenant, ID: "free"}
	mustAppend(t, s, free, []chatmem.Message{msg(chatmem.RoleUser, "no user", 1)}, chatmem.AppendOptions{})

	n, err := us.DeleteUser(ctx, u)
	if err != nil || n != 2 {
		t.Fatalf("DeleteUser = %d, %v; want 2, nil", n, err)
	}
	for _, key := range keys {
		wantNotFound(t, s, key)
	}
	if p, err := us.UserConversations(ctx, u, chatmem.PageRequest{}); err != nil || len(p.Conversations) != 0 {
		t.Errorf("UserConversations after DeleteUser = %v, %v; want none", conversationIDs(p), err)
	}
	if facts, err := us.UserFacts(ctx, u); err != nil || len(facts) != 0 {
		t.Errorf("UserFacts after DeleteUser = %v, %v; want none", facts, err)
	}
	_, err = us.UserFactHistory(ctx, u, "name")
	wantErr(t, "UserFactHistory after DeleteUser", err, chatmem.ErrNotFound)
	if n, err := us.DeleteUser(ctx, u); err != nil || n != 0 {
		t.Errorf("DeleteUser(again) = %d, %v; want 0, nil", n, err)
	}
	// Nothing of the old conversation reaches a new one at its ID: the
	// idempotency key no longer replays, the summary and facts are gone.
	res := mustAppend(t, s, keys[0], []chatmem.Message{msg(chatmem.RoleUser, "fresh", 1)}, chatmem.AppendOptions{IdempotencyKey: "idem-plumtree"})
	if res.Replayed || res.Conversation.LastSeq != 1 || res.Conversation.User != "" {
		t.Errorf("append after erasure = replayed %v at %d user %q; want a fresh conversation", res.Replayed, res.Conversation.LastSeq, res.Conversation.User)
	}
	if ss, ok := s.(chatmem.SummaryStore); ok {
		_, err := ss.Summary(ctx, keys[0])
		wantErr(t, "Summary after erasure", err, chatmem.ErrNotFound)
	}
	if fs, ok := s.(chatmem.FactStore); ok {
		if facts, err := fs.Facts(ctx, keys[0]); err != nil || len(facts) != 0 {
			t.Errorf("Facts after erasure = %v, %v; want none", facts, err)
		}
	}
	if se, ok := s.(chatmem.Searcher); ok {
		got, err := se.Postings(ctx, keys[0], []string{"plumtre", "plumtree"}, 100, 10)
		if err != nil || len(got[0])+len(got[1]) != 0 {
			t.Errorf("Postings after erasure = %v, %v; want none", got, err)
		}
	}
	// The other user and the free conversation are untouched.
	mustConversation(t, s, otherKeys[0])
	mustConversation(t, s, free)
	if facts, err := us.UserFacts(ctx, other); err != nil || len(facts) != 1 {
		t.Errorf("UserFacts(other user) = %v, %v; want 1", facts, err)
	}
	if p, err := us.UserConversations(ctx, other, chatmem.PageRequest{}); err != nil || len(p.Conversations) != 1 {
		t.Errorf("UserConversations(other user) = %v, %v; want its live conversation", conversationIDs(p), err)
	}
}

// testDeleteUserResumes: DeleteUser finishes an erasure that stopped
// halfway, with some of the user's conversations deleted and others not
// (the state a crash between its steps leaves).
func testDeleteUserResumes(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	u := chatmem.Key{Tenant: randomTenant(), ID: "u-half"}
	keys := userFixture(t, s, u, "halfway")
	if err := s.Delete(ctx, keys[0]); err != nil {
		t.Fatal(err)
	}
	n, err := us.DeleteUser(ctx, u)
	if err != nil || n != 1 {
		t.Fatalf("DeleteUser after a half-done erasure = %d, %v; want 1 (the expired conversation)", n, err)
	}
	if facts, err := us.UserFacts(ctx, u); err != nil || len(facts) != 0 {
		t.Errorf("UserFacts = %v, %v; want none", facts, err)
	}
	if p, err := us.UserConversations(ctx, u, chatmem.PageRequest{}); err != nil || len(p.Conversations) != 0 {
		t.Errorf("UserConversations = %v, %v; want none", conversationIDs(p), err)
	}
	if h.Dump != nil {
		if dump := h.Dump(t, s); bytes.Contains(dump, []byte(u.ID)) || bytes.Contains(dump, []byte("halfway")) {
			t.Errorf("after the resumed erasure the raw dump still names the user or their text")
		}
	}
}

// testEraseRaw: after DeleteUser, a scan of everything the store holds
// (Harness.Dump) finds neither the user's ID nor any of their text; before
// it, the same scan finds both, so the scan sees what it should.
func testEraseRaw(t *testing.T, h Harness) {
	if h.Dump == nil {
		t.Skip("the harness has no Dump")
	}
	s := h.New(t)
	us := as[chatmem.UserStore](t, s)
	mark := strings.ToLower(rand.Text()[:10])
	u := chatmem.Key{Tenant: randomTenant(), ID: "erasee" + mark}
	word := "zq" + mark + "xj"
	userFixture(t, s, u, word)
	other := userOf(u, "keeper")
	userFixture(t, s, other, "keptword")

	dump := h.Dump(t, s)
	for _, needle := range []string{u.ID, word} {
		if !bytes.Contains(dump, []byte(needle)) {
			t.Fatalf("before DeleteUser the raw dump (%d bytes) lacks %q: the dump does not see the store's data", len(dump), needle)
		}
	}
	if n, err := us.DeleteUser(t.Context(), u); err != nil || n != 2 {
		t.Fatalf("DeleteUser = %d, %v; want 2", n, err)
	}
	dump = h.Dump(t, s)
	// The word's end catches pieces of it (prefix-compressed index terms,
	// say) as well as the whole.
	for _, needle := range []string{u.ID, word, word[len(word)-8:]} {
		if i := bytes.Index(dump, []byte(needle)); i >= 0 {
			lo, hi := max(0, i-40), min(len(dump), i+len(needle)+40)
			t.Errorf("after DeleteUser the raw dump still holds %q at byte %d: %q", needle, i, dump[lo:hi])
		}
	}
	if !bytes.Contains(dump, []byte("keptword")) {
		t.Errorf("after DeleteUser the raw dump lacks the other user's text")
	}
}

package storetest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// userListerTests are the subtests of chatmem.UserLister.
var userListerTests = []subtest{
	{"Users", testUsersListed},
	{"Paging", testUsersPaging},
}

// replaceTests are the subtests of chatmem.UserFactReplacer.
var replaceTests = []subtest{
	{"Replace", testReplaceUserFacts},
	{"Atomic", testReplaceUserFactsAtomic},
}

// allUsers walks every page of the tenant's users, limit at a time.
func allUsers(t *testing.T, ul chatmem.UserLister, tenant string, limit int) []string {
	t.Helper()
	var got []string
	req := chatmem.PageRequest{Limit: limit}
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("Users(%s) has not ended after %d pages", tenant, pages)
		}
		p, err := ul.Users(t.Context(), tenant, req)
		if err != nil {
			t.Fatalf("Users(%s, %+v) error = %v", tenant, req, err)
		}
		if page := cmp.Or(limit, 50); len(p.Users) > page {
			t.Errorf("Users(%s, %+v) = %d users, over the limit", tenant, req, len(p.Users))
		}
		got = append(got, p.Users...)
		if p.Next == "" {
			return got
		}
		if len(p.Users) == 0 || p.Next != p.Users[len(p.Users)-1] {
			t.Fatalf("Users(%s, %+v) = %v next %q; want next to be the page's last user", tenant, req, p.Users, p.Next)
		}
		req.After = p.Next
	}
}

// testUsersListed: Users lists the tenant's users that have a fact or a
// live conversation, whichever they have: a user with facts only, with a
// conversation only, with both; not one whose conversations were deleted
// or have expired and who has no fact, not one whose facts were deleted,
// not one erased with DeleteUser, and never another tenant's.
func testUsersListed(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	ul := as[chatmem.UserLister](t, s)
	tenant, other := randomTenant(), randomTenant()
	conv := func(tenant, id, user string, opts chatmem.AppendOptions) chatmem.Key {
		key := chatmem.Key{Tenant: tenant, ID: id}
		opts.User = user
		mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hi from "+user, 1)}, opts)
		return key
	}
	facts := func(tenant, user string) {
		err := us.SetUserFacts(ctx, chatmem.Key{Tenant: tenant, ID: user}, []chatmem.Fact{{Key: "name", Value: "N " + user, SetBy: "app", Confidence: 1}})
		if err != nil {
			t.Fatalf("SetUserFacts(%s) error = %v", user, err)
		}
	}

	facts(tenant, "u-facts-only")
	conv(tenant, "c-conv", "u-conv-only", chatmem.AppendOptions{})
	conv(tenant, "c-both", "u-both", chatmem.AppendOptions{})
	facts(tenant, "u-both")
	// Facts that outlive the user's only conversation.
	gone := conv(tenant, "c-gone", "u-facts-outlive", chatmem.AppendOptions{})
	facts(tenant, "u-facts-outlive")
	if err := s.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	// Nothing left: a deleted conversation, an expired one, deleted facts.
	if err := s.Delete(ctx, conv(tenant, "c-deleted", "u-deleted-conv", chatmem.AppendOptions{})); err != nil {
		t.Fatal(err)
	}
	conv(tenant, "c-expired", "u-expired", chatmem.AppendOptions{TTL: time.Minute, Now: time.Now().Add(-time.Hour)})
	facts(tenant, "u-fact-deleted")
	if err := us.DeleteUserFact(ctx, chatmem.Key{Tenant: tenant, ID: "u-fact-deleted"}, "name"); err != nil {
		t.Fatal(err)
	}
	// Erased: facts and a conversation, then DeleteUser.
	conv(tenant, "c-erased", "u-erased", chatmem.AppendOptions{})
	facts(tenant, "u-erased")
	if _, err := us.DeleteUser(ctx, chatmem.Key{Tenant: tenant, ID: "u-erased"}); err != nil {
		t.Fatal(err)
	}
	// Another tenant's users, one of them with an ID of this tenant's.
	facts(other, "u-facts-only")
	facts(other, "u-other")
	conv(other, "c-other", "u-other-conv", chatmem.AppendOptions{})

	want := []string{"u-both", "u-conv-only", "u-facts-only", "u-facts-outlive"}
	if got := allUsers(t, ul, tenant, 0); !slices.Equal(got, want) {
		t.Errorf("Users(%s) = %v, want %v", tenant, got, want)
	}
	if got, want := allUsers(t, ul, other, 0), []string{"u-facts-only", "u-other", "u-other-conv"}; !slices.Equal(got, want) {
		t.Errorf("Users(other tenant) = %v, want %v", got, want)
	}
	if got := allUsers(t, ul, randomTenant(), 0); len(got) != 0 {
		t.Errorf("Users(empty tenant) = %v, want none", got)
	}
	// A user erased comes back only with new data.
	facts(tenant, "u-erased")
	if got := allUsers(t, ul, tenant, 0); !slices.Contains(got, "u-erased") {
		t.Errorf("Users after new facts of an erased user = %v, want u-erased listed", got)
	}
	for _, limit := range []int{-1, 1001} {
		_, err := ul.Users(ctx, tenant, chatmem.PageRequest{Limit: limit})
		wantErr(t, fmt.Sprintf("Users(limit %d)", limit), err, chatmem.ErrInvalid)
	}
	_, err := ul.Users(ctx, "bad/tenant", chatmem.PageRequest{})
	wantErr(t, "Users(bad tenant)", err, chatmem.ErrInvalid)
	if s2 := h.reopen(t, s); s2 != s {
		if got := allUsers(t, as[chatmem.UserLister](t, s2), tenant, 0); len(got) != len(want)+1 {
			t.Errorf("Users after reopening = %v, want %d users", got, len(want)+1)
		}
	}
}

// testUsersPaging: pages of every size list each user once, in byte order
// of ID, the last page with an empty Next; a page starts after After.
func testUsersPaging(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	ul := as[chatmem.UserLister](t, s)
	tenant := randomTenant()
	ids := []string{"U-9", "a", "b.2", "b-1", "u-10", "u-2", "u:x", "z"}
	for i, id := range ids {
		if i%2 == 0 {
			err := us.SetUserFacts(ctx, chatmem.Key{Tenant: tenant, ID: id}, []chatmem.Fact{{Key: "k", Value: "v", SetBy: "app", Confidence: 1}})
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: "c-" + id}, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)},
			chatmem.AppendOptions{User: id})
	}
	want := slices.Sorted(slices.Values(ids))
	for _, limit := range []int{1, 2, 3, 7, 8, 1000} {
		if got := allUsers(t, ul, tenant, limit); !slices.Equal(got, want) {
			t.Errorf("Users(limit %d) = %v, want %v", limit, got, want)
		}
	}
	p, err := ul.Users(ctx, tenant, chatmem.PageRequest{After: "b.2", Limit: 2})
	if err != nil || !slices.Equal(p.Users, []string{"u-10", "u-2"}) || p.Next != "u-2" {
		t.Errorf("Users(after b.2, limit 2) = %v next %q, %v; want [u-10 u-2] next u-2", p.Users, p.Next, err)
	}
	p, err = ul.Users(ctx, tenant, chatmem.PageRequest{After: "u:x"})
	if err != nil || !slices.Equal(p.Users, []string{"z"}) || p.Next != "" {
		t.Errorf("Users(after u:x) = %v next %q, %v; want [z], no next", p.Users, p.Next, err)
	}
}

// testReplaceUserFacts: ReplaceUserFacts leaves the user with exactly the
// facts given, each key's history only the given values, the user's
// conversations and other users untouched; bad input changes nothing.
func testReplaceUserFacts(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	ur := as[chatmem.UserFactReplacer](t, s)
	key := randomKey("c-1")
	u, other := userOf(key, "u-1"), userOf(key, "u-2")
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}, chatmem.AppendOptions{User: u.ID})
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	old := []chatmem.Fact{
		{Key: "name", Value: "Kavya", SetBy: "rules", Confidence: 0.9, Conversation: "c-1", SourceSeq: 1, CreatedAt: t0},
		{Key: "name", Value: "Kavya R.", SetBy: "app", Confidence: 1, CreatedAt: t0.Add(time.Minute)},
		{Key: "language", Value: "hi", SetBy: "app", Confidence: 1, CreatedAt: t0},
	}
	for _, who := range []chatmem.Key{u, other} {
		if err := us.SetUserFacts(ctx, who, old); err != nil {
			t.Fatal(err)
		}
	}
	repl := []chatmem.Fact{
		{Key: "name", Value: "K.", SetBy: "app", Confidence: 1, CreatedAt: t0.Add(time.Hour)},
		{Key: "city", Value: "Pune", SetBy: "rules", Confidence: 0.5, Conversation: "c-9", SourceSeq: 4, CreatedAt: t0.Add(2 * time.Hour)},
		{Key: "city", Value: "Mumbai", SetBy: "app", Confidence: 1, CreatedAt: t0.Add(3 * time.Hour)},
	}
	before, err := us.UserFacts(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	// Bad input changes nothing.
	wantErr(t, "ReplaceUserFacts(none)", ur.ReplaceUserFacts(ctx, u, nil), chatmem.ErrInvalid)
	bad := append(slices.Clone(repl), chatmem.Fact{Key: "", Value: "x", SetBy: "app", Confidence: 1})
	wantErr(t, "ReplaceUserFacts(a fact without a key)", ur.ReplaceUserFacts(ctx, u, bad), chatmem.ErrInvalid)
	wantErr(t, "ReplaceUserFacts(bad user)", ur.ReplaceUserFacts(ctx, chatmem.Key{Tenant: u.Tenant, ID: "a/b"}, repl), chatmem.ErrInvalid)
	if got, err := us.UserFacts(ctx, u); err != nil || !slices.EqualFunc(got, before, sameFact) {
		t.Errorf("after refused replaces UserFacts = %v, %v; want %v", got, err, before)
	}

	if err := ur.ReplaceUserFacts(ctx, u, repl); err != nil {
		t.Fatalf("ReplaceUserFacts error = %v", err)
	}
	got, err := us.UserFacts(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	wantUserFacts(t, "UserFacts after ReplaceUserFacts", got, []chatmem.Fact{repl[2], repl[0]})
	if h, err := us.UserFactHistory(ctx, u, "name"); err != nil || len(h) != 1 || h[0].Value != "K." {
		t.Errorf("UserFactHistory(name) after the replace = %v, %v; want only K.", h, err)
	}
	if h, err := us.UserFactHistory(ctx, u, "city"); err != nil || len(h) != 2 || h[0].Value != "Pune" || h[0].Conversation != "c-9" || h[1].Value != "Mumbai" {
		t.Errorf("UserFactHistory(city) after the replace = %v, %v; want Pune (c-9) then Mumbai", h, err)
	}
	_, err = us.UserFactHistory(ctx, u, "language")
	wantErr(t, "UserFactHistory(language) after the replace", err, chatmem.ErrNotFound)
	if p, err := us.UserConversations(ctx, u, chatmem.PageRequest{}); err != nil || !slices.Equal(conversationIDs(p), []string{"c-1"}) {
		t.Errorf("UserConversations after the replace = %v, %v; want [c-1]", conversationIDs(p), err)
	}
	if got, err := us.UserFacts(ctx, other); err != nil || len(got) != 2 {
		t.Errorf("the other user's facts after the replace = %v, %v; want its 2", got, err)
	}
	// A user with no facts yet gets them.
	fresh := userOf(key, "u-new")
	if err := ur.ReplaceUserFacts(ctx, fresh, repl[:1]); err != nil {
		t.Fatal(err)
	}
	if got, err := us.UserFacts(ctx, fresh); err != nil || len(got) != 1 || got[0].Value != "K." {
		t.Errorf("UserFacts(new user) after ReplaceUserFacts = %v, %v; want name K.", got, err)
	}
}

// sameFact compares the fields a store keeps of a user fact.
func sameFact(a, b chatmem.Fact) bool {
	return a.Key == b.Key && a.Value == b.Value && a.SetBy == b.SetBy && a.Conversation == b.Conversation && a.SourceSeq == b.SourceSeq
}

// testReplaceUserFactsAtomic: while ReplaceUserFacts swaps a user's facts
// back and forth, a reader never finds the user without facts or with a
// mix of both sets (a delete followed by a write would show either).
func testReplaceUserFactsAtomic(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	us := as[chatmem.UserStore](t, s)
	ur := as[chatmem.UserFactReplacer](t, s)
	u := chatmem.Key{Tenant: randomTenant(), ID: "u-swap"}
	sets := [2][]chatmem.Fact{
		{{Key: "a", Value: "1", SetBy: "app", Confidence: 1}, {Key: "b", Value: "1", SetBy: "app", Confidence: 1}},
		{{Key: "b", Value: "2", SetBy: "app", Confidence: 1}, {Key: "c", Value: "2", SetBy: "app", Confidence: 1}},
	}
	if err := ur.ReplaceUserFacts(ctx, u, sets[0]); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads, bad atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			got, err := us.UserFacts(ctx, u)
			if err != nil {
				t.Errorf("UserFacts during the replaces error = %v", err)
				return
			}
			reads.Add(1)
			if !slices.EqualFunc(got, sets[0], sameFact) && !slices.EqualFunc(got, sets[1], sameFact) {
				if bad.Add(1) == 1 {
					t.Errorf("UserFacts during the replaces = %v, want one set whole", got)
				}
			}
		}
	}()
	for i := range 40 {
		if err := ur.ReplaceUserFacts(ctx, u, sets[(i+1)%2]); err != nil {
			t.Errorf("ReplaceUserFacts %d error = %v", i, err)
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d reads during 40 replaces", reads.Load())
	if got, err := us.UserFacts(ctx, u); err != nil || !slices.EqualFunc(got, sets[0], sameFact) {
		t.Errorf("UserFacts after 40 replaces = %v, %v; want %v", got, err, sets[0])
	}
}

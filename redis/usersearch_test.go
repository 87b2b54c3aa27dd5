package redis

import (
	"slices"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestUserIndexCatchUp checks that an append whose user index step was
// lost (here: the user index deleted after it) is caught up by the next
// append to the conversation, and until then UserPostings lacks it.
func TestUserIndexCatchUp(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	user := chatmem.Key{Tenant: "acme", ID: "u1"}
	key := chatmem.Key{Tenant: "acme", ID: "c1"}
	two := []chatmem.Message{{Role: chatmem.RoleUser, Content: "alpha one", Tokens: 2}, {Role: chatmem.RoleAssistant, Content: "alpha two", Tokens: 2}}
	if _, err := s.Append(ctx, key, two, chatmem.AppendOptions{User: user.ID}); err != nil {
		t.Fatal(err)
	}
	if err := s.dropUserIndex(ctx, user); err != nil { // as if the step had failed
		t.Fatal(err)
	}
	postings := func() []chatmem.UserHit {
		t.Helper()
		got, err := s.UserPostings(ctx, user, []string{"alpha"}, 10)
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	if got := postings(); len(got) != 0 {
		t.Fatalf("postings with the index step lost = %v, want none", got)
	}
	// The next append (without repeating the user) indexes 1 and 2 too.
	if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "alpha three", Tokens: 2}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []chatmem.UserHit{{Conversation: "c1", Seq: 3}, {Conversation: "c1", Seq: 2}, {Conversation: "c1", Seq: 1}}
	if got := postings(); !slices.Equal(got, want) {
		t.Errorf("postings after the next append = %v, want %v", got, want)
	}
	mark, err := s.client.HGet(ctx, s.userIndexKeys(user)[1], "c1").Result()
	if err != nil || mark == "" || mark[len(mark)-2:] != ":3" {
		t.Errorf("mark of c1 = %q, %v; want <gen>:3", mark, err)
	}
}

// TestUserIndexStaleRemoved checks that the members of a deleted
// conversation are removed by the first UserPostings that meets them.
func TestUserIndexStaleRemoved(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	user := chatmem.Key{Tenant: "acme", ID: "u1"}
	for _, id := range []string{"gone", "kept"} {
		msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "beta " + id, Tokens: 2}}
		if _, err := s.Append(ctx, chatmem.Key{Tenant: "acme", ID: id}, msgs, chatmem.AppendOptions{User: user.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, chatmem.Key{Tenant: "acme", ID: "gone"}); err != nil {
		t.Fatal(err)
	}
	set := s.userTermKey(user, "beta")
	if n, err := s.client.ZCard(ctx, set).Result(); err != nil || n != 2 {
		t.Fatalf("members before UserPostings = %d, %v; want 2 (one stale)", n, err)
	}
	got, err := s.UserPostings(ctx, user, []string{"beta"}, 10)
	if err != nil || !slices.Equal(got[0], []chatmem.UserHit{{Conversation: "kept", Seq: 1}}) {
		t.Errorf("UserPostings = %v, %v; want kept's message", got, err)
	}
	if n, err := s.client.ZCard(ctx, set).Result(); err != nil || n != 1 {
		t.Errorf("members after UserPostings = %d, %v; want 1", n, err)
	}
}

// TestUserIndexCatchUpInSteps checks that an append catches up at most
// maxCatchUp messages the index lacks, leaving its own to a later append
// once the gap is larger.
func TestUserIndexCatchUpInSteps(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	user := chatmem.Key{Tenant: "acme", ID: "u1"}
	key := chatmem.Key{Tenant: "acme", ID: "c1"}
	msgs := make([]chatmem.Message, 750)
	for i := range msgs {
		msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: "gamma", Tokens: 1}
	}
	for range 2 {
		if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{User: user.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.dropUserIndex(ctx, user); err != nil { // 1,500 messages behind
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		got, err := s.UserPostings(ctx, user, []string{"gamma"}, 5000)
		if err != nil {
			t.Fatal(err)
		}
		return len(got[0])
	}
	if _, err := s.Append(ctx, key, msgs[:1], chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != maxCatchUp {
		t.Errorf("after one append the index holds %d messages, want %d", n, maxCatchUp)
	}
	if _, err := s.Append(ctx, key, msgs[:1], chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1502 {
		t.Errorf("after two appends the index holds %d messages, want 1502", n)
	}
}

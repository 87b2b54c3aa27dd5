package redis

import (
	"slices"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestUsersListedFromOlderData checks that users written before the
// tenants' sets of users existed (here: the sets and the marker deleted
// after the writes) are found by the first Users, in any process, once.
func TestUsersListedFromOlderData(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	facts := []chatmem.Fact{{Key: "name", Value: "Kavya", SetBy: "app", Confidence: 1}}
	for _, u := range []chatmem.Key{{Tenant: "acme", ID: "u-facts"}, {Tenant: "other", ID: "u-x"}} {
		if err := s.SetUserFacts(ctx, u, facts); err != nil {
			t.Fatal(err)
		}
	}
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}
	if _, err := s.Append(ctx, chatmem.Key{Tenant: "acme", ID: "c1"}, msgs, chatmem.AppendOptions{User: "u-conv"}); err != nil {
		t.Fatal(err)
	}
	// As the data of an older version: no sets of users, no marker.
	if err := s.client.Del(ctx, s.usersKey("acme"), s.usersKey("other"), s.usersListedKey()).Err(); err != nil {
		t.Fatal(err)
	}
	s2, err := New(s.client, Options{Prefix: s.Prefix()}) // another process
	if err != nil {
		t.Fatal(err)
	}
	p, err := s2.Users(ctx, "acme", chatmem.PageRequest{})
	if want := []string{"u-conv", "u-facts"}; err != nil || !slices.Equal(p.Users, want) {
		t.Errorf("Users(acme) over older data = %v, %v; want %v", p.Users, err, want)
	}
	if n, err := s.client.Exists(ctx, s.usersListedKey()).Result(); err != nil || n != 1 {
		t.Errorf("the marker after the first Users: exists = %d, %v; want 1", n, err)
	}
	p, err = s2.Users(ctx, "other", chatmem.PageRequest{})
	if err != nil || !slices.Equal(p.Users, []string{"u-x"}) {
		t.Errorf("Users(other) = %v, %v; want [u-x]", p.Users, err)
	}
	// Once the marker is set, the sets are trusted: no second scan.
	if err := s.client.Del(ctx, s.usersKey("other")).Err(); err != nil {
		t.Fatal(err)
	}
	s3, err := New(s.client, Options{Prefix: s.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s3.Users(ctx, "other", chatmem.PageRequest{}); err != nil || len(p.Users) != 0 {
		t.Errorf("Users(other) with the marker set and the set deleted = %v, %v; want none (no rescan)", p.Users, err)
	}
}

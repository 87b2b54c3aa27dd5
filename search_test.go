package chatmem_test

import (
	"errors"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestSearch finds a detail given far back, ranks the rarer term's
// message first, and refuses bad input.
func TestSearch(t *testing.T) {
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "search"}
	ctx := t.Context()
	msgs := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "You are a shop assistant; order numbers look like SE-10423."},
		{Role: chatmem.RoleUser, Content: "My order is SE-10423, a blue kettle."},
		{Role: chatmem.RoleAssistant, Content: "Thanks, I noted it."},
	}
	msgs = append(msgs, filler(600, 3)...)
	if _, err := mem.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	hits, err := mem.Search(ctx, key, "which kettle was order SE-10423?", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || hits[0].Message.Seq != 2 {
		t.Fatalf("Search(kettle SE-10423) first hit = %+v, want seq 2", hits)
	}
	if len(hits) > 5 {
		t.Errorf("Search(limit 5) = %d hits", len(hits))
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Score > hits[i-1].Score {
			t.Errorf("hits out of order: %v before %v", hits[i-1].Score, hits[i].Score)
		}
	}
	for _, h := range hits {
		if h.Message.Role == chatmem.RoleSystem {
			t.Errorf("system message %d is a hit; it is never indexed", h.Message.Seq)
		}
	}
	if hits, err := mem.Search(ctx, key, "the of and", 5); err != nil || len(hits) != 0 {
		t.Errorf("Search(stop words only) = %v, %v; want no hits", hits, err)
	}
	if _, err := mem.Search(ctx, chatmem.Key{Tenant: "t", ID: "none"}, "kettle", 5); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Search(missing conversation) err = %v, want ErrNotFound", err)
	}
	if _, err := mem.Search(ctx, chatmem.Key{Tenant: "other", ID: "search"}, "kettle", 5); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Search(other tenant) err = %v, want ErrNotFound", err)
	}
	for _, limit := range []int{0, -1, chatmem.MaxSearchLimit + 1} {
		if _, err := mem.Search(ctx, key, "kettle", limit); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Search(limit %d) err = %v, want ErrInvalid", limit, err)
		}
	}
}

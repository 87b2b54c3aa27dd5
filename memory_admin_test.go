package chatmem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
)

// cachedConversation appends a few turns to key and reads its context
// under a budget and with its summary, so that mem caches its tail and
// its (absent) summary; it fails the test unless both are cached.
func cachedConversation(t *testing.T, mem *chatmem.Memory, key chatmem.Key) {
	t.Helper()
	ctx := context.Background()
	msgs := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "Be brief."},
		{Role: chatmem.RoleUser, Content: "Where is my order SE-10423?"},
		{Role: chatmem.RoleAssistant, Content: "It left the warehouse on Monday."},
	}
	if _, err := mem.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []chatmem.Policy{
		{Kind: chatmem.PolicyTokenBudget, Budget: 400},
		{Kind: chatmem.PolicySummaryBuffer, Budget: 400},
	} {
		if _, err := mem.Context(ctx, key, p, chatmem.ContextOptions{}); err != nil {
			t.Fatalf("Context(%s): %v", p.Kind, err)
		}
	}
	if tail, summary := chatmem.CachedOf(mem, key); !tail || !summary {
		t.Fatalf("after two reads the tail is cached: %v, the summary: %v; want both", tail, summary)
	}
}

// TestDeleteDropsCaches: once Delete returns, nothing of the conversation
// is left in the tail cache or the summary cache, and another
// conversation's entries stay.
func TestDeleteDropsCaches(t *testing.T) {
	mem := newCachedMemory(t, memstore.New(), 0)
	gone := chatmem.Key{Tenant: "acme", ID: "gone"}
	kept := chatmem.Key{Tenant: "acme", ID: "kept"}
	cachedConversation(t, mem, gone)
	cachedConversation(t, mem, kept)
	if err := mem.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if tail, summary := chatmem.CachedOf(mem, gone); tail || summary {
		t.Errorf("after Delete the tail is cached: %v, the summary: %v; want neither", tail, summary)
	}
	if tail, summary := chatmem.CachedOf(mem, kept); !tail || !summary {
		t.Errorf("after deleting another conversation the tail is cached: %v, the summary: %v; want both", tail, summary)
	}
}

// TestImportForgets: a conversation an import replaces behind Memory's
// back is dropped from the caches when the import says it wrote it; the
// blind spot it closes is a replacement with the same CreatedAt, which
// the cache's own checks cannot tell from the original.
func TestImportForgets(t *testing.T) {
	ctx := context.Background()
	mem := newCachedMemory(t, memstore.New(), 0)
	key := chatmem.Key{Tenant: "acme", ID: "imported"}
	cachedConversation(t, mem, key)
	err := mem.Import(func(st chatmem.Store, forget func(chatmem.Key)) error {
		if err := st.Delete(ctx, key); err != nil {
			return err
		}
		forget(key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if tail, summary := chatmem.CachedOf(mem, key); tail || summary {
		t.Errorf("after an import that replaced it the tail is cached: %v, the summary: %v; want neither", tail, summary)
	}
}

// TestAdminReads: List, Messages and Ping read what the store holds, and
// Messages refuses an invalid key.
func TestAdminReads(t *testing.T) {
	ctx := context.Background()
	mem := newCachedMemory(t, memstore.New(), 0)
	key := chatmem.Key{Tenant: "acme", ID: "a"}
	cachedConversation(t, mem, key)
	page, err := mem.List(ctx, "acme", chatmem.PageRequest{})
	if err != nil || len(page.Conversations) != 1 || page.Conversations[0].Key != key {
		t.Errorf("List(acme) = %+v, %v; want conversation a", page, err)
	}
	msgs, err := mem.Messages(ctx, key, 1, 1)
	if err != nil || len(msgs) != 1 || msgs[0].Seq != 2 {
		t.Errorf("Messages(a, after 1, limit 1) = %+v, %v; want seq 2", msgs, err)
	}
	if _, err := mem.Messages(ctx, chatmem.Key{Tenant: "acme", ID: "../x"}, 0, 0); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Messages(../x) = %v, want ErrInvalid", err)
	}
	if err := mem.Ping(ctx); err != nil {
		t.Errorf("Ping = %v", err)
	}
}

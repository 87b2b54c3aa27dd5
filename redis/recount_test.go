package redis

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TestRecountKeepsExpiry checks that the lists Recount renames into place
// keep the conversation's time to live, and that no scratch key is left.
func TestRecountKeepsExpiry(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	key := chatmem.Key{Tenant: "acme", ID: "ttl"}
	msgs := []chatmem.Message{{Role: chatmem.RoleSystem, Content: "s", Tokens: 1}, {Role: chatmem.RoleUser, Content: "u", Tokens: 2}}
	if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Recount(ctx, key, "double", 2, []int{2, 4}); err != nil {
		t.Fatal(err)
	}
	for _, k := range s.keysAt(key, kMeta, kMsgs, kCum, kSys, kUsers) {
		if ttl, err := s.client.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
			t.Errorf("PTTL(%s) after Recount = %v, %v; want within 1h", k, ttl, err)
		}
	}
	left, err := s.client.Keys(ctx, s.prefix+":*recount*").Result()
	if err != nil || len(left) != 0 {
		t.Errorf("scratch keys after Recount = %q, %v; want none", left, err)
	}
}

// TestRecountRefusesUnknownRecord checks that a stored message the script
// cannot rewrite makes Recount fail without changing anything.
func TestRecountRefusesUnknownRecord(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	key := chatmem.Key{Tenant: "acme", ID: "odd"}
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "u", Tokens: 2}, {Role: chatmem.RoleAssistant, Content: "a", Tokens: 3}}
	if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{Tokenizer: "estimate"}); err != nil {
		t.Fatal(err)
	}
	keys := s.keysAt(key, kMsgs, kCum)
	if err := s.client.LSet(ctx, keys[0], 1, `{"seq":2,"role":"assistant","content":"a"}`).Err(); err != nil {
		t.Fatal(err)
	}
	lists := func() string {
		m, _ := s.client.LRange(ctx, keys[0], 0, -1).Result()
		c, _ := s.client.LRange(ctx, keys[1], 0, -1).Result()
		return fmt.Sprint(m, c)
	}
	before := lists()
	err := s.Recount(ctx, key, "double", 2, []int{4, 6})
	if err == nil || !strings.Contains(err.Error(), "stored message 2") {
		t.Errorf("Recount over a record without tokens error = %v, want one naming stored message 2", err)
	}
	if after := lists(); after != before {
		t.Errorf("lists after a failed Recount = %s, want %s", after, before)
	}
	if c, err := s.Conversation(ctx, key); err != nil || c.Tokenizer != "estimate" || c.Tokens != 5 {
		t.Errorf("Conversation after a failed Recount = %+v, %v; want tokenizer estimate, 5 tokens", c, err)
	}
}

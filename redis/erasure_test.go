package redis

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestEraseAfterAdmission: an erasure that starts between an append's
// admission (in the user's slot) and its script (in the conversation's)
// finds the conversation in the user's index, not created yet, and leaves
// a tombstone that makes the script refuse to create it, even for an
// append without Started.
func TestEraseAfterAdmission(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	u := chatmem.Key{Tenant: "t-" + rand.Text()[:12], ID: "u1"}
	key := chatmem.Key{Tenant: u.Tenant, ID: "c1"}
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "my email is ana@example.com", Tokens: 5}}
	s.admitted = func() {
		s.admitted = nil
		if _, err := s.DeleteUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{User: u.ID}); !errors.Is(err, chatmem.ErrErased) {
		t.Fatalf("Append admitted before an erasure = %v, want ErrErased", err)
	}
	if _, err := s.Conversation(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Conversation after the refused append = %v, want ErrNotFound", err)
	}
	if p, err := s.UserConversations(ctx, u, chatmem.PageRequest{}); err != nil || len(p.Conversations) != 0 {
		t.Errorf("UserConversations = %v, %v; want none", p.Conversations, err)
	}
	// Admitted after the erasure: created.
	res, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{User: u.ID})
	if err != nil || res.Conversation.User != u.ID {
		t.Fatalf("Append after the erasure = %+v, %v; want a conversation of u1", res.Conversation, err)
	}
}

// TestSlotTag: the erasure records' tags fall in the slot of the tag
// they stand for.
func TestSlotTag(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3 (CRC-16/XMODEM)", got)
	}
	for _, tag := range []string{"acme/u-42", "t/u", "", "a/" + rand.Text()} {
		if got, want := crc16(slotTag(tag))%16384, crc16(tag)%16384; got != want {
			t.Errorf("slot of slotTag(%q) = %d, want %d", tag, got, want)
		}
	}
}

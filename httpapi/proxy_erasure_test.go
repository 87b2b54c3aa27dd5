package httpapi

import (
	"context"
	"errors"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestProxyTurnDuringErasure: a user erased while their turn waits for the
// upstream stays erased. The reply's append would re-create the
// conversation bound to the user: it is refused, the client is not told
// the turn was stored, and nothing of the user is left.
func TestProxyTurnDuringErasure(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	user := chatmem.Key{Tenant: "acme", ID: "ana"}
	key := chatmem.Key{Tenant: "acme", ID: "erased-turn"}
	erased := false
	env.up.answer = func(int) string {
		if _, err := env.mem.DeleteUser(context.Background(), user); err != nil {
			t.Errorf("DeleteUser = %v", err)
		}
		erased = true
		return "noted, ana@example.com"
	}
	body := `{"model":"m","messages":[{"role":"user","content":"my email is ana@example.com"}]}`
	status, _, resp := env.post(t, map[string]string{"X-Chatmem-Conversation": key.ID, "X-Chatmem-User": user.ID}, body)
	if !erased {
		t.Fatalf("the upstream was not called (%d %s): the test does not erase where it means to", status, resp)
	}
	if status == 200 {
		t.Errorf("turn whose user was erased meanwhile = 200 %s; want an error (its reply was not stored)", resp)
	}
	ctx := context.Background()
	if c, err := env.mem.Store().Conversation(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Conversation after the erasure = %+v, %v; want ErrNotFound", c, err)
	}
	if p, err := env.mem.UserConversations(ctx, user, chatmem.PageRequest{}); err != nil || len(p.Conversations) != 0 {
		t.Errorf("UserConversations after the erasure = %+v, %v; want none", p.Conversations, err)
	}
}

package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestProxyUser: X-Chatmem-User binds the conversation the first turn
// creates; a turn naming another user is refused with 409 before the
// upstream is called, and a malformed user with 400.
func TestProxyUser(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	status, _, resp := env.post(t, map[string]string{"X-Chatmem-Conversation": "pu", "X-Chatmem-User": "kavya"}, body)
	if status != 200 {
		t.Fatalf("turn with X-Chatmem-User = %d %s, want 200", status, resp)
	}
	conv, err := env.mem.Store().Conversation(t.Context(), chatmem.Key{Tenant: "acme", ID: "pu"})
	if err != nil || conv.User != "kavya" {
		t.Errorf("Conversation(pu).User = %q, %v; want kavya", conv.User, err)
	}
	calls := len(env.up.requests())
	status, _, resp = env.post(t, map[string]string{"X-Chatmem-Conversation": "pu", "X-Chatmem-User": "ravi"}, body)
	if status != 409 {
		t.Errorf("turn of another user = %d %s, want 409", status, resp)
	}
	status, _, resp = env.post(t, map[string]string{"X-Chatmem-Conversation": "pu", "X-Chatmem-User": "bad user"}, body)
	if status != 400 {
		t.Errorf("turn of a malformed user = %d %s, want 400", status, resp)
	}
	if n := len(env.up.requests()); n != calls {
		t.Errorf("upstream got %d more requests, want none for refused turns", n-calls)
	}
	if msgs := env.stored(t, "pu"); len(msgs) != 2 {
		t.Errorf("conversation pu holds %d messages, want the first turn's 2", len(msgs))
	}

	// The user's facts reach a new conversation of theirs.
	if err := env.mem.SetUserFacts(t.Context(), chatmem.Key{Tenant: "acme", ID: "kavya"}, []chatmem.Fact{{Key: "name", Value: "Kavya"}}); err != nil {
		t.Fatal(err)
	}
	status, _, resp = env.post(t, map[string]string{"X-Chatmem-Conversation": "pu2", "X-Chatmem-User": "kavya", "X-Chatmem-Facts": "true"}, body)
	if status != 200 {
		t.Fatalf("turn in a new conversation = %d %s, want 200", status, resp)
	}
	msgs := env.up.last(t).messages(t)
	if len(msgs) == 0 || msgs[0]["role"] != "system" || !strings.Contains(fmt.Sprint(msgs[0]["content"]), "name=Kavya") {
		t.Errorf("upstream messages = %v, want the user's facts first", msgs)
	}
}

package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

// smallTalk makes n alternating user and assistant messages of small talk.
func smallTalk(n int) []chatmem.Message {
	words := strings.Fields("weather garden coffee movie weekend train dinner recipe music book holiday pizza friend city walk rain")
	out := make([]chatmem.Message, n)
	for i := range out {
		var b strings.Builder
		for j := range 8 {
			fmt.Fprintf(&b, "%s ", words[(i*7+j*3)%len(words)])
		}
		role := chatmem.RoleUser
		if i%2 == 1 {
			role = chatmem.RoleAssistant
		}
		out[i] = chatmem.Message{Role: role, Content: b.String()}
	}
	return out
}

// kettleOrder is a conversation in which the user gives an order number
// among small talk.
func kettleOrder() []chatmem.Message {
	msgs := smallTalk(30)
	msgs = append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: "My order is SE-10423, a blue kettle."},
		chatmem.Message{Role: chatmem.RoleAssistant, Content: "Thanks, I noted order SE-10423."})
	return append(msgs, smallTalk(30)...)
}

// TestContextScopeUser: context?policy=recall&scope=user brings a turn of
// one of the user's conversations into a new one of theirs, marked with its
// conversation, on every store that indexes users; another tenant's user of
// the same ID gets nothing of it; a bad scope is a 400 that says why.
func TestContextScopeUser(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store := b.open(t)
			if _, ok := store.(chatmem.UserSearcher); !ok {
				t.Skipf("%T keeps no index of users", store)
			}
			ts := newTestServer(t, newMemory(t, store, nil), Options{Limits: testLimits})
			ctx := t.Context()
			acme, globex := ts.client(acmeKey), ts.client(globexKey)
			msgs := kettleOrder()
			for i := 0; i < len(msgs); i += 20 {
				_, err := acme.Append(ctx, "mon", msgs[i:min(i+20, len(msgs))], client.AppendOptions{User: "kavya"})
				must(t, "Append(mon)", err)
			}
			ask := []chatmem.Message{{Role: chatmem.RoleUser, Content: "Which order number did I give for the kettle?"}}
			for _, c := range []*client.Client{acme, globex} {
				_, err := c.Append(ctx, "fri", ask, client.AppendOptions{User: "kavya"})
				must(t, "Append(fri)", err)
			}
			p := client.ContextParams{Policy: chatmem.PolicyRecall, Budget: 200, Scope: chatmem.ScopeUser}
			w, err := acme.Context(ctx, "fri", p)
			must(t, "Context(fri, scope user)", err)
			found := false
			for _, m := range w.Messages {
				if strings.Contains(m.Content, "SE-10423") && m.Metadata[chatmem.MetaConversation] == "mon" {
					found = true
				}
			}
			text := fmt.Sprint(contentsOfMsgs(w.Messages))
			if !found || !strings.Contains(text, "[mon #") || w.Tokens > p.Budget {
				t.Errorf("Context(fri, scope user) = %s (%d tokens), want mon's order recalled, marked [mon #...]", text, w.Tokens)
			}
			w, err = globex.Context(ctx, "fri", p)
			must(t, "Context(globex fri, scope user)", err)
			if text := fmt.Sprint(contentsOfMsgs(w.Messages)); strings.Contains(text, "SE-10423") {
				t.Errorf("another tenant's kavya got %s", text)
			}
			w, err = acme.Context(ctx, "fri", client.ContextParams{Policy: chatmem.PolicyRecall, Budget: 200})
			must(t, "Context(fri)", err)
			if text := fmt.Sprint(contentsOfMsgs(w.Messages)); strings.Contains(text, "SE-10423") {
				t.Errorf("conversation scope recalled another conversation: %s", text)
			}

			for _, q := range []string{"policy=recall&budget=200&scope=team", "policy=token_budget&budget=200&scope=user"} {
				r := ts.raw(t, "GET", "/v1/conversations/fri/context?"+q, acmeKey, nil, "")
				if e := r.apiError(); r.status != 400 || e == nil || !strings.Contains(e.Message, "scope") {
					t.Errorf("context?%s = %d %s, want 400 naming the scope", q, r.status, r.body)
				}
			}
		})
	}
}

func contentsOfMsgs(msgs []chatmem.Message) []string {
	s := make([]string, len(msgs))
	for i, m := range msgs {
		s[i] = m.Content
	}
	return s
}

// TestProxyScopeUser: X-Chatmem-Scope: user with the recall policy sends
// the upstream a turn of the user's other conversation; a bad scope is a
// 400 before the upstream is called.
func TestProxyScopeUser(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	if _, err := env.mem.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: "mon"}, kettleOrder(), chatmem.AppendOptions{User: "kavya"}); err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"Which order number did I give for the kettle?"}]}`
	h := map[string]string{"X-Chatmem-Conversation": "fri", "X-Chatmem-User": "kavya", "X-Chatmem-Policy": "recall",
		"X-Chatmem-Budget": "200", "X-Chatmem-Scope": "user"}
	status, _, resp := env.post(t, h, body)
	if status != 200 {
		t.Fatalf("turn with X-Chatmem-Scope: user = %d %s, want 200", status, resp)
	}
	if sent := fmt.Sprint(env.up.last(t).messages(t)); !strings.Contains(sent, "SE-10423") || !strings.Contains(sent, "[mon #") {
		t.Errorf("upstream messages = %s, want mon's order recalled", sent)
	}
	calls := len(env.up.requests())
	for _, scope := range []string{"everyone", ""} {
		h["X-Chatmem-Scope"] = scope
		if scope == "" {
			h["X-Chatmem-Scope"], h["X-Chatmem-Policy"] = "user", "token_budget"
		}
		status, _, resp = env.post(t, h, body)
		if status != 400 || !strings.Contains(string(resp), "X-Chatmem-Scope") {
			t.Errorf("turn with %v = %d %s, want 400 naming X-Chatmem-Scope", h, status, resp)
		}
	}
	if n := len(env.up.requests()); n != calls {
		t.Errorf("upstream got %d more requests, want none for refused turns", n-calls)
	}
}

package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/seed"
)

// TestRedact: POST .../messages/{seq}/redact replaces the message's
// content and answers the conversation (with its ETag) and the message; the
// search no longer finds the old text; a stale If-Match is 409, a seq past
// the end, a bad seq, a missing content or an empty result is 400, a
// missing conversation 404, and none of them changes anything. Run
// against every store.
func TestRedact(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ts := newTestServer(t, newMemory(t, b.open(t), nil), Options{})
			ctx := t.Context()
			c := ts.client(acmeKey)
			_, err := c.Append(ctx, "pii", seed.History(), client.AppendOptions{})
			must(t, "Append", err)
			before, err := c.Conversation(ctx, "pii")
			must(t, "Conversation", err)

			content := func(s string) client.RedactRequest { return client.RedactRequest{Content: &s} }
			_, err = c.Redact(ctx, "pii", 1, content("x"), new(int64(4)))
			wantAPIError(t, "Redact with a stale If-Match", err, http.StatusConflict, "conflict")
			_, err = c.Redact(ctx, "pii", 6, content("x"), nil)
			wantAPIError(t, "Redact past the end", err, http.StatusBadRequest, "invalid_request")
			_, err = c.Redact(ctx, "pii", 1, content(""), nil)
			wantAPIError(t, "Redact to empty content", err, http.StatusBadRequest, "invalid_request")
			_, err = c.Redact(ctx, "missing", 1, content("x"), nil)
			wantAPIError(t, "Redact of a missing conversation", err, http.StatusNotFound, "not_found")
			for _, r := range []struct{ path, body string }{
				{"/v1/conversations/pii/messages/1/redact", `{}`},
				{"/v1/conversations/pii/messages/0/redact", `{"content":"x"}`},
				{"/v1/conversations/pii/messages/one/redact", `{"content":"x"}`},
				{"/v1/conversations/pii/messages/1/redact", `{"content":"x","extra":1}`},
			} {
				if got := ts.raw(t, "POST", r.path, acmeKey, nil, r.body); got.status != http.StatusBadRequest {
					t.Errorf("POST %s %s = %d %s, want 400", r.path, r.body, got.status, got.body)
				}
			}
			conv, err := c.Conversation(ctx, "pii")
			must(t, "Conversation", err)
			if conv.LastSeq != 5 || conv.Tokens != before.Tokens || conv.Revision != 0 {
				t.Fatalf("after refused redactions = %+v, want it unchanged", conv)
			}

			r := ts.raw(t, "POST", "/v1/conversations/pii/messages/1/redact", acmeKey, map[string]string{"If-Match": `"5"`},
				`{"content":"Hi, I'm [name]. My order [id] hasn't arrived.","reason":"user request"}`)
			if r.status != http.StatusOK || r.header.Get("ETag") != `"5"` {
				t.Fatalf("redact 1 = %d, ETag %q: %s; want 200, \"5\"", r.status, r.header.Get("ETag"), r.body)
			}
			res, err := c.Redact(ctx, "pii", 2, client.RedactRequest{Content: new("Sorry! It is out for delivery and should arrive by 8 pm.")}, new(int64(5)))
			must(t, "Redact(2)", err)
			if res.Conversation.ID != "pii" || res.Conversation.Revision != 2 || res.Message.Seq != 2 || res.Message.Role != chatmem.RoleAssistant {
				t.Errorf("Redact(2) = %+v, want pii at revision 2 and the assistant message 2", res)
			}
			page, err := c.Messages(ctx, "pii", 0, 0)
			must(t, "Messages", err)
			var all []string
			tokens := int64(0)
			for _, m := range page.Messages {
				all = append(all, m.Content)
				tokens += int64(m.Tokens)
			}
			if text := strings.Join(all, "|"); strings.Contains(text, "Kavya") || strings.Contains(text, "SE-10423") {
				t.Errorf("Messages after the redactions still hold the old text: %q", text)
			}
			if res.Conversation.Tokens != tokens {
				t.Errorf("Tokens after the redactions = %d, the messages hold %d", res.Conversation.Tokens, tokens)
			}
			hits, err := c.Search(ctx, "pii", "Kavya", 10)
			must(t, "Search", err)
			if len(hits.Hits) != 0 {
				t.Errorf("Search(Kavya) after the redaction = %+v, want nothing", hits.Hits)
			}
		})
	}
}

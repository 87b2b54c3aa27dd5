package httpapi

import (
	"net/http"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/seed"
)

// TestRewind: POST .../rewind takes the conversation back and answers it
// with its ETag; the next append continues after the kept messages; a
// stale If-Match is 409, a to_seq past the end or missing is 400, and
// none of them changes anything. Run against every store.
func TestRewind(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ts := newTestServer(t, newMemory(t, b.open(t), nil), Options{})
			ctx := t.Context()
			c := ts.client(acmeKey)
			_, err := c.Append(ctx, "edit", seed.History(), client.AppendOptions{})
			must(t, "Append", err)

			_, err = c.Rewind(ctx, "edit", 2, new(int64(4)))
			wantAPIError(t, "Rewind with a stale If-Match", err, http.StatusConflict, "conflict")
			_, err = c.Rewind(ctx, "edit", 6, nil)
			wantAPIError(t, "Rewind past the end", err, http.StatusBadRequest, "invalid_request")
			if r := ts.raw(t, "POST", "/v1/conversations/edit/rewind", acmeKey, nil, `{}`); r.status != http.StatusBadRequest {
				t.Errorf("rewind without to_seq = %d %s, want 400", r.status, r.body)
			}
			if r := ts.raw(t, "POST", "/v1/conversations/edit/rewind", acmeKey, map[string]string{"If-Match": "-1"}, `{"to_seq":1}`); r.status != http.StatusBadRequest {
				t.Errorf("rewind with If-Match -1 = %d %s, want 400", r.status, r.body)
			}
			conv, err := c.Conversation(ctx, "edit")
			must(t, "Conversation", err)
			if conv.LastSeq != 5 {
				t.Fatalf("after refused rewinds LastSeq = %d, want 5", conv.LastSeq)
			}

			r := ts.raw(t, "POST", "/v1/conversations/edit/rewind", acmeKey, map[string]string{"If-Match": `"5"`}, `{"to_seq":2}`)
			if r.status != http.StatusOK || r.header.Get("ETag") != `"2"` {
				t.Fatalf("rewind to 2 = %d, ETag %q: %s; want 200, \"2\"", r.status, r.header.Get("ETag"), r.body)
			}
			conv, err = c.Rewind(ctx, "edit", 1, new(int64(2)))
			must(t, "Rewind(to 1)", err)
			if conv.ID != "edit" || conv.LastSeq != 1 || conv.Turns != 1 {
				t.Errorf("Rewind(to 1) = %+v, want edit at seq 1 with one turn", conv)
			}
			res, err := c.Append(ctx, "edit", []chatmem.Message{{Role: chatmem.RoleUser, Content: "edited question"}}, client.AppendOptions{})
			must(t, "Append after the rewind", err)
			if res.Messages[0].Seq != 2 || res.Conversation.LastSeq != 2 {
				t.Errorf("Append after the rewind = seq %d, LastSeq %d; want 2, 2", res.Messages[0].Seq, res.Conversation.LastSeq)
			}
			page, err := c.Messages(ctx, "edit", 0, 0)
			must(t, "Messages", err)
			if len(page.Messages) != 2 || page.Messages[1].Content != "edited question" {
				t.Errorf("Messages after the rewind = %+v, want the first and the edited one", page.Messages)
			}
			_, err = c.Rewind(ctx, "missing", 0, nil)
			wantAPIError(t, "Rewind of a missing conversation", err, http.StatusNotFound, "not_found")
		})
	}
}

package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestConversationItemDelete: DELETE .../items/{item} removes the last
// item (a rewind: the next item takes its place) and answers the
// conversation; an item in the middle, or the last one after a metadata
// update, is refused with OpenAI's error shape, saying why and pointing to
// redaction, and changes nothing.
func TestConversationItemDelete(t *testing.T) {
	env := newResponsesEnv(t)
	status, b := env.do(t, "POST", "/conversations", `{"items":[{"role":"user","content":"my card is 4111"},{"role":"assistant","content":"noted"},{"role":"user","content":"and my pin is 1234"}]}`)
	if status != http.StatusOK {
		t.Fatalf("create: %d %s", status, b)
	}
	var conv conversationObject
	_ = json.Unmarshal(b, &conv)
	ids := func() []string {
		t.Helper()
		status, b := env.do(t, "GET", "/conversations/"+conv.ID+"/items?order=asc", "")
		if status != http.StatusOK {
			t.Fatalf("list: %d %s", status, b)
		}
		var l struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(b, &l)
		var out []string
		for _, d := range l.Data {
			out = append(out, d.ID)
		}
		return out
	}
	all := ids()
	if len(all) != 3 {
		t.Fatalf("items = %v, want 3", all)
	}

	before := env.tenantSnapshot(t)
	status, b = env.do(t, "DELETE", "/conversations/"+conv.ID+"/items/"+all[1], "")
	if e := openAIErrorOf(t, b); status != http.StatusBadRequest || !strings.Contains(e.Message, "only the last item") || !strings.Contains(e.Message, "/redact") {
		t.Errorf("delete of a middle item = %d %s, want 400 saying only the last item goes and pointing to redaction", status, b)
	}
	if after := env.tenantSnapshot(t); after != before {
		t.Errorf("the refused deletion changed the store")
	}

	status, b = env.do(t, "DELETE", "/conversations/"+conv.ID+"/items/"+all[2], "")
	var got conversationObject
	if err := json.Unmarshal(b, &got); status != http.StatusOK || err != nil || got.ID != conv.ID || got.Object != "conversation" {
		t.Fatalf("delete of the last item = %d %s, want 200 with the conversation", status, b)
	}
	if now := ids(); !slices.Equal(now, all[:2]) {
		t.Errorf("items after deleting the last = %v, want %v", now, all[:2])
	}
	status, b = env.do(t, "GET", "/conversations/"+conv.ID+"/items/"+all[2], "")
	if status != http.StatusNotFound {
		t.Errorf("GET of the deleted item = %d %s, want 404", status, b)
	}
	status, b = env.do(t, "DELETE", "/conversations/"+conv.ID+"/items/"+all[2], "")
	if status != http.StatusNotFound {
		t.Errorf("second delete of the item = %d %s, want 404", status, b)
	}
	// Items after a deletion take the freed place.
	status, b = env.do(t, "POST", "/conversations/"+conv.ID+"/items", `{"items":[{"role":"user","content":"never mind"}]}`)
	if status != http.StatusOK {
		t.Fatalf("add: %d %s", status, b)
	}
	if now := ids(); len(now) != 3 || now[2] != all[2] {
		t.Errorf("items after adding one = %v, want the third at %s", now, all[2])
	}

	// After a metadata update, the last item stays: deleting it would
	// undo the update.
	status, b = env.do(t, "POST", "/conversations/"+conv.ID, `{"metadata":{"topic":"cards"}}`)
	if status != http.StatusOK {
		t.Fatalf("update: %d %s", status, b)
	}
	before = env.tenantSnapshot(t)
	status, b = env.do(t, "DELETE", "/conversations/"+conv.ID+"/items/"+all[2], "")
	if e := openAIErrorOf(t, b); status != http.StatusBadRequest || !strings.Contains(e.Message, "metadata") {
		t.Errorf("delete of the last item after a metadata update = %d %s, want 400 about the metadata", status, b)
	}
	if after := env.tenantSnapshot(t); after != before {
		t.Errorf("the refused deletion changed the store")
	}
}

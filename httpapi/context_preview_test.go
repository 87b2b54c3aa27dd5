package httpapi

import (
	"fmt"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
)

// TestContextPreview: reads of context?preview=true at small budgets (the
// inspector's slider dragged down) leave the summaries as they are without
// them, after traffic at 4,096 tokens and through the appends that follow;
// the same reads without preview change them.
func TestContextPreview(t *testing.T) {
	final := map[string]chatmem.Summary{}
	for _, drag := range []string{"none", "preview=true", "preview=false"} {
		ctx := t.Context()
		mem := newMemory(t, memstore.New(), func(o *chatmem.Options) {
			o.Sync = true
			o.Summarizer = offline.NewSummarizer(offline.Options{})
		})
		ts := newTestServer(t, mem, Options{})
		key := chatmem.Key{Tenant: "acme", ID: "dragged"}
		turn := func(i int) []chatmem.Message {
			return []chatmem.Message{
				{Role: chatmem.RoleUser, Content: fmt.Sprintf("Turn %d: where is my order SE-%05d for Rs %d? The courier has not called.", i, 10000+i, 100+i)},
				{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("Order SE-%05d left the Pune warehouse on %d May and arrives by 8 pm on Friday.", 10000+i, 1+i%28)},
			}
		}
		read := func(q string) {
			t.Helper()
			if r := ts.raw(t, "GET", "/v1/conversations/dragged/context?policy=summary_buffer&"+q, acmeKey, nil, ""); r.status != 200 {
				t.Fatalf("context?%s = %d %s", q, r.status, r.body)
			}
		}
		for i := range 150 {
			must(t, "Append", appendErr(mem.Append(ctx, key, turn(i), chatmem.AppendOptions{})))
		}
		read("budget=4096")
		if drag != "none" {
			for _, budget := range []int{2048, 1024, 512, 256} {
				read(fmt.Sprintf("budget=%d&%s", budget, drag))
			}
		}
		for i := 150; i < 160; i++ {
			must(t, "Append", appendErr(mem.Append(ctx, key, turn(i), chatmem.AppendOptions{})))
		}
		s, err := mem.Summary(ctx, key)
		must(t, "Summary", err)
		final[drag] = s
	}
	same := func(a, b chatmem.Summary) bool { return a.CoversSeq == b.CoversSeq && a.Text == b.Text }
	if none, p := final["none"], final["preview=true"]; !same(none, p) {
		t.Errorf("after previews at small budgets the summary covers 1-%d (%d tokens); without them 1-%d (%d tokens)", p.CoversSeq, p.Tokens, none.CoversSeq, none.Tokens)
	}
	if none, r := final["none"], final["preview=false"]; same(none, r) {
		t.Errorf("traffic reads at small budgets left the summary at 1-%d as without them; the test shows nothing", r.CoversSeq)
	}
}

func appendErr(_ chatmem.AppendResult, err error) error { return err }

// TestContextPreviewParameter: preview takes true or false only.
func TestContextPreviewParameter(t *testing.T) {
	ts := newTestServer(t, newMemory(t, memstore.New(), nil), Options{})
	must(t, "Append", appendErr(ts.api.mem.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: "p"},
		[]chatmem.Message{{Role: chatmem.RoleUser, Content: "hello"}}, chatmem.AppendOptions{})))
	r := ts.raw(t, "GET", "/v1/conversations/p/context?policy=token_budget&budget=100&preview=maybe", acmeKey, nil, "")
	if e := r.apiError(); r.status != 400 || e == nil || e.Code != "invalid_request" {
		t.Errorf("preview=maybe: %d %s, want 400 invalid_request", r.status, r.body)
	}
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestResponsesReceipts drives Responses turns on every store: a
// conversation whose metadata marker and unmodelled item never go
// upstream, instructions, a sliding window, streamed turns and a tool round
// trip, then a previous_response_id chain. Every response's reply is
// stored with a receipt (listed over REST, with the upstream's usage and
// request ID), and ReplayRequest rebuilds each upstream request byte for
// byte, the instructions taken from the stored response.
func TestResponsesReceipts(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			env := newResponsesEnvOn(t, b.open(t))
			reasoning := `{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"hm"}]}`
			status, body := env.do(t, "POST", "/conversations", `{"metadata":{"topic":"orders"},"items":[{"role":"user","content":"hello <there> & you"},`+reasoning+`]}`)
			var conv conversationObject
			if err := json.Unmarshal(body, &conv); status != http.StatusOK || err != nil {
				t.Fatalf("create: %d %s", status, body)
			}
			type sentTurn struct {
				conv string
				seq  int64
				raw  []byte
			}
			var turns []sentTurn
			respond := func(req string) responseObject {
				t.Helper()
				n := len(env.up.requests())
				status, body := env.do(t, "POST", "/responses", req)
				if status != http.StatusOK {
					t.Fatalf("POST /responses %s: %d %s", req, status, body)
				}
				var r responseObject
				if strings.Contains(req, `"stream":true`) {
					i := strings.LastIndex(string(body), "event: response.completed\ndata: ")
					if i < 0 {
						t.Fatalf("stream without response.completed: %s", body)
					}
					var ev struct {
						Response responseObject `json:"response"`
					}
					line, _, _ := strings.Cut(string(body[i+len("event: response.completed\ndata: "):]), "\n")
					if err := json.Unmarshal([]byte(line), &ev); err != nil {
						t.Fatal(err)
					}
					r = ev.Response
				} else if err := json.Unmarshal(body, &r); err != nil {
					t.Fatal(err)
				}
				reqs := env.up.requests()
				if len(reqs) != n+1 {
					t.Fatalf("the upstream got %d requests for one response", len(reqs)-n)
				}
				key, seq, ok := parseResponseID("acme", r.ID)
				if !ok {
					t.Fatalf("response ID %q", r.ID)
				}
				turns = append(turns, sentTurn{key.ID, seq, reqs[n].raw})
				return r
			}
			const instructions = `Answer in <b>one</b> line & cite "orders".`
			for n := 1; n <= 9; n++ {
				stream := ""
				if n%3 == 0 {
					stream = `,"stream":true`
				}
				respond(fmt.Sprintf(`{"model":"gpt-4o-mini","conversation":%q,"instructions":%q,"input":"question %d: order %d?","temperature":0.2,"metadata":{"chatmem_budget":"60"}%s}`,
					conv.ID, instructions, n, 1000+n, stream))
			}
			tools := `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
			r := respond(`{"model":"gpt-4o-mini","conversation":"` + conv.ID + `","input":"weather in Paris?",` + tools + `}`)
			var call struct {
				CallID string `json:"call_id"`
			}
			if len(r.Output) != 1 || json.Unmarshal(r.Output[0], &call) != nil || call.CallID != "call_weather" {
				t.Fatalf("the tool turn's output: %s", r.Output)
			}
			respond(`{"model":"gpt-4o-mini","conversation":"` + conv.ID + `","input":[{"type":"function_call_output","call_id":"call_weather","output":"{\"temp\":21}"}],` + tools + `,"stream":true}`)
			// A chain: a new conversation, continued by previous_response_id.
			prev := respond(`{"model":"gpt-4o-mini","input":"start a chain","instructions":"be brief"}`)
			for i := range 2 {
				prev = respond(fmt.Sprintf(`{"model":"gpt-4o-mini","previous_response_id":%q,"input":"link %d"}`, prev.ID, i))
			}

			ctx := t.Context()
			byConv := map[string][]sentTurn{}
			for _, tr := range turns {
				byConv[tr.conv] = append(byConv[tr.conv], tr)
			}
			if len(byConv) != 2 {
				t.Fatalf("%d conversations, want 2", len(byConv))
			}
			for id, want := range byConv {
				status, _, body := env.send(t, http.MethodGet, "/v1/conversations/"+id+"/receipts", proxyKey, nil, "")
				var page ReceiptsPage
				if err := json.Unmarshal(body, &page); status != http.StatusOK || err != nil {
					t.Fatalf("GET receipts: %d %s", status, body)
				}
				if len(page.Receipts) != len(want) {
					t.Fatalf("%s: %d receipts, want %d (one per response)", id, len(page.Receipts), len(want))
				}
				for i, rec := range page.Receipts {
					if rec.Seq != want[i].seq {
						t.Errorf("%s: receipt %d at seq %d, want %d (the response's reply)", id, i, rec.Seq, want[i].seq)
					}
					up := rec.Receipt.Upstream
					if up == nil || up.Model != "gpt-4o-mini" || up.InputTokens != 42 || up.CachedTokens != 32 || up.OutputTokens != 7 ||
						up.ReasoningTokens != 3 || !strings.HasPrefix(up.RequestID, "req_fake_") {
						t.Errorf("%s: receipt %d: upstream %+v", id, i, up)
					}
					if rec.Receipt.Request == nil {
						t.Fatalf("%s: receipt %d keeps no request", id, i)
					}
					got, err := ReplayRequest(ctx, env.mem, chatmem.Key{Tenant: "acme", ID: id}, rec.Seq, nil)
					if err != nil {
						t.Fatalf("%s: ReplayRequest(%d): %v", id, rec.Seq, err)
					}
					if !bytes.Equal(got, want[i].raw) {
						t.Fatalf("%s: replay of %d =\n%s\nsent upstream:\n%s", id, rec.Seq, got, want[i].raw)
					}
				}
			}
			// The window slid past the marker and the reasoning item, which
			// count as left out.
			rs, err := env.mem.Receipts(ctx, chatmem.Key{Tenant: "acme", ID: conv.ID}, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if first, last := rs[0].Receipt, rs[8].Receipt; first.LeftOut != 2 || last.LeftOut <= 2 || last.Policy.Budget < 60 {
				t.Errorf("left out %d then %d (policy %+v), want 2 then more", first.LeftOut, last.LeftOut, last.Policy)
			}
		})
	}
}

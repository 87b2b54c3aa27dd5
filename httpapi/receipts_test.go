package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
)

// receiptSystem is the system message of the receipt tests' requests:
// sent upstream, not stored.
const receiptSystem = `{"role":"system","content":"You are the shop's assistant. Be brief."}`

// receiptTurn is the body of turn n (1-based) of the receipt tests: the
// system message, the whole history the client shows (its user messages
// and the replies the fake upstream gave) and sampling parameters; every
// third turn streams with usage.
func receiptTurn(n int) string {
	var msgs []string
	msgs = append(msgs, receiptSystem)
	for i := 1; i <= n; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"question %d: what about order %d?"}`, i, 1000+i))
		if i < n {
			msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"answer %d"}`, i))
		}
	}
	stream := ""
	if n%3 == 0 {
		stream = `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return `{"model":"gpt-4o-mini","temperature":0.2,"messages":[` + strings.Join(msgs, ",") + `],"top_p":0.9` + stream + `}`
}

// TestProxyReceipts drives a 20-turn conversation through the proxy on
// every store: each reply is stored with a receipt holding what the fake
// upstream reported (usage with cached tokens, its request ID), the
// receipts list and read over REST, and each upstream request is rebuilt
// from its receipt and the store byte for byte. After a rewind, replay
// says which messages are gone, and a new branch's turn replays anew.
func TestProxyReceipts(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			env := newProxyEnv(t, proxyConfig{store: b.open(t), policy: chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 90}})
			const turns = 20
			for n := 1; n <= turns; n++ {
				status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "r1"}, receiptTurn(n))
				if status != http.StatusOK {
					t.Fatalf("turn %d: status %d: %s", n, status, body)
				}
			}
			reqs := env.up.requests()
			if len(reqs) != turns {
				t.Fatalf("the upstream got %d requests, want %d", len(reqs), turns)
			}
			ctx := t.Context()
			key := chatmem.Key{Tenant: "acme", ID: "r1"}

			// Every reply has its receipt, listed in pages.
			var all []chatmem.ReceiptRecord
			for after := int64(0); ; {
				status, _, body := env.send(t, http.MethodGet, fmt.Sprintf("/v1/conversations/r1/receipts?limit=7&after=%d", after), proxyKey, nil, "")
				if status != http.StatusOK {
					t.Fatalf("GET receipts: %d %s", status, body)
				}
				var page ReceiptsPage
				if err := json.Unmarshal(body, &page); err != nil {
					t.Fatal(err)
				}
				all = append(all, page.Receipts...)
				if page.NextAfter == nil {
					break
				}
				after = *page.NextAfter
			}
			if len(all) != turns {
				t.Fatalf("%d receipts, want %d", len(all), turns)
			}
			system := []json.RawMessage{json.RawMessage(receiptSystem)}
			for i, rec := range all {
				n := i + 1
				if want := int64(2 * n); rec.Seq != want {
					t.Fatalf("receipt %d is at seq %d, want %d (turn %d's reply)", i, rec.Seq, want, n)
				}
				r := rec.Receipt
				up := r.Upstream
				if up == nil || up.Model != "gpt-4o-mini" || up.InputTokens != 42 || up.CachedTokens != 32 || up.OutputTokens != 7 ||
					up.ReasoningTokens != 3 || up.RequestID != fmt.Sprintf("req_fake_%d", n) {
					t.Errorf("turn %d: upstream = %+v, want gpt-4o-mini 42 in (32 cached), 7 out (3 reasoning), req_fake_%d", n, up, n)
				}
				if r.Policy.Kind != chatmem.PolicyTokenBudget || r.Policy.Budget != 90 || r.Tokenizer == "" || r.Tokens.Reserved == 0 {
					t.Errorf("turn %d: policy %+v, tokenizer %q, tokens %+v", n, r.Policy, r.Tokenizer, r.Tokens)
				}
				got, err := ReplayRequest(ctx, env.mem, key, rec.Seq, system)
				if err != nil {
					t.Fatalf("turn %d: ReplayRequest: %v", n, err)
				}
				if !bytes.Equal(got, reqs[i].raw) {
					t.Fatalf("turn %d: replay =\n%s\nsent upstream:\n%s", n, got, reqs[i].raw)
				}
			}
			// The window slid: the last turn's receipt left messages out.
			if last := all[turns-1].Receipt; last.LeftOut == 0 || len(last.Sent) == 0 || last.Sent[0].From <= 1 {
				t.Errorf("the last receipt sent %+v, left out %d: want a window that slid", last.Sent, last.LeftOut)
			}

			// One receipt by its message; a user message has none.
			status, _, body := env.send(t, http.MethodGet, "/v1/conversations/r1/messages/10/receipt", proxyKey, nil, "")
			var one chatmem.Receipt
			if status != http.StatusOK || json.Unmarshal(body, &one) != nil || one.Upstream == nil || one.Upstream.RequestID != "req_fake_5" {
				t.Errorf("GET messages/10/receipt = %d %s", status, body)
			}
			if status, _, body := env.send(t, http.MethodGet, "/v1/conversations/r1/messages/9/receipt", proxyKey, nil, ""); status != http.StatusNotFound {
				t.Errorf("GET the receipt of a user message = %d %s, want 404", status, body)
			}

			// Without the request's system message, replay says what it
			// needs.
			if _, err := ReplayRequest(ctx, env.mem, key, 40, nil); !errors.Is(err, chatmem.ErrInvalid) || !strings.Contains(err.Error(), "1 system messages") {
				t.Errorf("ReplayRequest without the system message: %v, want ErrInvalid naming it", err)
			}

			// A rewind takes turns 16..20 back: their replays say the
			// messages are gone; the earlier ones still replay.
			if _, err := env.mem.Rewind(ctx, key, 30, chatmem.RewindOptions{}); err != nil {
				t.Fatal(err)
			}
			_, err := ReplayRequest(ctx, env.mem, key, 36, system)
			if !errors.Is(err, chatmem.ErrNotFound) || !strings.Contains(err.Error(), "ends at 30") {
				t.Errorf("replay of a rewound reply: %v, want ErrNotFound saying the conversation ends at 30", err)
			}
			if got, err := ReplayRequest(ctx, env.mem, key, 30, system); err != nil || !bytes.Equal(got, reqs[14].raw) {
				t.Errorf("replay of turn 15 after the rewind: %v", err)
			}
			// The new branch: turn 16 again, another reply at seq 32.
			env.up.answer = func(n int) string { return "another answer" }
			if status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "r1"}, receiptTurn(16)); status != http.StatusOK {
				t.Fatalf("turn 16 again: %d %s", status, body)
			}
			reqs = env.up.requests()
			if got, err := ReplayRequest(ctx, env.mem, key, 32, system); err != nil || !bytes.Equal(got, reqs[len(reqs)-1].raw) {
				t.Errorf("replay of the new branch's turn: %v\n%s\nwant\n%s", err, got, reqs[len(reqs)-1].raw)
			}
		})
	}
}

// TestProxyNoReceipts: with Options.NoReceipts the proxy stores none.
func TestProxyNoReceipts(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	env.api.receipts = false
	if status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "n1"}, receiptTurn(1)); status != http.StatusOK {
		t.Fatalf("turn: %d %s", status, body)
	}
	rs, err := env.mem.Receipts(t.Context(), chatmem.Key{Tenant: "acme", ID: "n1"}, 0, 0)
	if err != nil || len(rs) != 0 {
		t.Errorf("Receipts = %v, %v; want none", rs, err)
	}
}

// TestContextReceipt: a context read and a turn with receipt=true answer
// the window's receipt; without it, none.
func TestContextReceipt(t *testing.T) {
	ts := newTestServer(t, newMemory(t, memstore.New(), nil), Options{Keys: testKeys()})
	c := ts.client(acmeKey)
	ctx := t.Context()
	if _, err := c.Append(ctx, "c1", []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "be brief"},
		{Role: chatmem.RoleUser, Content: "hi"},
		{Role: chatmem.RoleAssistant, Content: "hello"},
		{Role: chatmem.RoleUser, Content: "my order is 1234"},
		{Role: chatmem.RoleAssistant, Content: "noted"},
		{Role: chatmem.RoleUser, Content: "where is it?"},
	}, ClientAppendOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Context(ctx, "c1", ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 10, Receipt: true})
	if err != nil {
		t.Fatal(err)
	}
	r := w.Receipt
	if r == nil {
		t.Fatal("no receipt")
	}
	want := []chatmem.SentSpan{{Part: chatmem.PartPinned, From: 1, To: 1}, {Part: chatmem.PartRecent, From: 4, To: 6}}
	if len(r.Sent) != len(want) {
		t.Fatalf("sent = %+v, want %+v", r.Sent, want)
	}
	for i := range want {
		if r.Sent[i].Part != want[i].Part || r.Sent[i].From != want[i].From || r.Sent[i].To != want[i].To || len(r.Sent[i].Hash) != 16 {
			t.Errorf("sent[%d] = %+v, want %+v", i, r.Sent[i], want[i])
		}
	}
	if r.LeftOut != 2 || r.Tokens.Pinned+r.Tokens.Recent+r.Tokens.Overhead != w.Tokens || r.Policy.Budget != 10 {
		t.Errorf("receipt = %+v for a window of %d tokens, want 2 left out and the parts summing to the tokens", r, w.Tokens)
	}
	w, err = c.Context(ctx, "c1", ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 10})
	if err != nil || w.Receipt != nil {
		t.Errorf("a read without receipt=true: receipt %+v, %v", w.Receipt, err)
	}
	if r := ts.raw(t, http.MethodGet, "/v1/conversations/c1/context?receipt=maybe", acmeKey, nil, ""); r.status != http.StatusBadRequest {
		t.Errorf("receipt=maybe: %d %s, want 400", r.status, r.body)
	}
}

// TestProxyPromptTokensOnce: a reply stored with its receipt does not
// repeat the prompt tokens in its metadata (the receipt holds them); a
// read of the messages shows them all the same, and without receipts
// they stay in the metadata.
func TestProxyPromptTokensOnce(t *testing.T) {
	for _, receipts := range []bool{true, false} {
		env := newProxyEnv(t, proxyConfig{})
		env.api.receipts = receipts
		if status, h, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "p1"}, receiptTurn(1)); status != http.StatusOK {
			t.Fatalf("turn: %d %s", status, body)
		} else {
			stored := env.stored(t, "p1")
			if len(stored) != 2 {
				t.Fatalf("stored %d messages, want 2", len(stored))
			}
			_, kept := stored[1].Metadata[MetaPromptTokensChatmem]
			if kept == receipts {
				t.Errorf("receipts %v: stored reply metadata %v", receipts, stored[1].Metadata)
			}
			listed := env.listed(t, "p1")
			if md := listed[1].Metadata; md[MetaPromptTokensUpstream] != "42" || md[MetaPromptTokensChatmem] != h.Get(headerWindowTokens) {
				t.Errorf("receipts %v: listed reply metadata %v, want upstream 42 and chatmem %s", receipts, md, h.Get(headerWindowTokens))
			}
			if listed[0].Metadata != nil {
				t.Errorf("listed user metadata %v, want none", listed[0].Metadata)
			}
		}
	}
}

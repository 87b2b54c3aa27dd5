package httpapi

import (
	"net/http"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestProxyRedacted: after a message is redacted, a client that resends
// the full history with the original text continues the conversation
// under every OnDiverge mode: the redacted message stands for the
// original, nothing is rewound, forked, refused or appended again, the
// stored conversation keeps the redacted text and gains only the new
// messages, and the upstream gets the redacted text. Run against every
// store.
func TestProxyRedacted(t *testing.T) {
	stored := []string{"u:hi, I'm Kavya", "a:hello Kavya", "u:my phone is 555 0100", "a:noted", "u:call me", "a:->c1:dial({\"number\":\"555 0100\"})", "t[c1]:ringing"}
	for _, b := range backends {
		for _, tc := range []struct {
			name string
			seq  int64  // the message redacted
			text string // its new content
			// clear also clears its tool calls' names and arguments
			clear bool
		}{
			{"middle", 3, "my phone is [phone]", false},
			{"first", 1, "hi, I'm [name]", false},
			{"tool call", 6, "", true},
		} {
			for _, mode := range DivergeModes {
				t.Run(b.name+"/"+tc.name+"/"+mode, func(t *testing.T) {
					env := newProxyEnv(t, proxyConfig{store: b.open(t), policy: chatmem.Policy{Kind: chatmem.PolicyAll}, onDiverge: mode})
					env.seed(t, "c", stored...)
					key := chatmem.Key{Tenant: "acme", ID: "c"}
					if _, _, err := env.mem.Redact(t.Context(), key, tc.seq, tc.text, chatmem.RedactOptions{ClearToolCalls: tc.clear}); err != nil {
						t.Fatalf("Redact(%d): %v", tc.seq, err)
					}
					redacted := env.stored(t, "c")
					// The client resends the original history, twice: the
					// second turn's history holds the first turn's reply.
					request := append(append([]string{"s:be brief"}, stored...), "a:done", "u:thanks")
					for turn := 1; turn <= 2; turn++ {
						status, h, body := env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, request...))
						if status != http.StatusOK {
							t.Fatalf("turn %d: status %d, want 200: %s", turn, status, body)
						}
						if got := h.Get(headerConversation); got != "c" {
							t.Errorf("turn %d: %s = %q, want c (no fork)", turn, headerConversation, got)
						}
						request = append(request, "a:answer "+string(rune('0'+turn)), "u:and then?")
					}
					want := append(brief(redacted), normBrief([]string{"a:done", "u:thanks", "a:answer 1", "u:and then?", "a:answer 2"})...)
					got := env.stored(t, "c")
					wantBrief(t, "stored", brief(got), want)
					if got[tc.seq-1].Metadata[chatmem.MetaRedacted] != "true" {
						t.Errorf("message %d metadata = %v, want it marked redacted", tc.seq, got[tc.seq-1].Metadata)
					}
					sent := env.up.last(t).messages(t)
					if len(sent) < int(tc.seq)+1 {
						t.Fatalf("the upstream got %d messages", len(sent))
					}
					// sent[0] is the system message.
					wantBrief(t, "redacted message sent upstream", brief(sent[tc.seq:tc.seq+1]), brief(redacted[tc.seq-1:tc.seq]))
				})
			}
		}
	}
}

// TestProxyRedactedRetry: retries with the same Idempotency-Key of a turn
// whose user message was redacted since, with the original text. One whose
// reply is stored is replayed (no upstream call); one whose first attempt
// stored the user message but no reply gets its reply, answered from the
// redacted message: neither is refused as the key reused with other
// messages (422), and nothing is stored twice.
func TestProxyRedactedRetry(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			env := newProxyEnv(t, proxyConfig{store: b.open(t), policy: chatmem.Policy{Kind: chatmem.PolicyAll}})
			redact := func(id string, seq int64, text string) {
				t.Helper()
				if _, _, err := env.mem.Redact(t.Context(), chatmem.Key{Tenant: "acme", ID: id}, seq, text, chatmem.RedactOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			body := reconcileBody(t, "u:hi", "a:hello", "u:my phone is 555 0100")

			// The reply stored: replayed.
			h := map[string]string{headerConversation: "done", "Idempotency-Key": "turn-1"}
			env.seed(t, "done", "u:hi", "a:hello")
			if status, _, resp := env.post(t, h, body); status != http.StatusOK {
				t.Fatalf("first request: %d %s", status, resp)
			}
			redact("done", 3, "my phone is [phone]")
			before := env.stored(t, "done")
			calls := len(env.up.requests())
			status, rh, resp := env.post(t, h, body)
			if status != http.StatusOK || rh.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("retry: %d, Idempotent-Replayed %q: %s; want 200, true", status, rh.Get("Idempotent-Replayed"), resp)
			}
			if n := len(env.up.requests()) - calls; n != 0 {
				t.Errorf("the retry called the upstream %d times, want 0", n)
			}
			wantBrief(t, "stored after the retry", brief(env.stored(t, "done")), brief(before))

			// The first attempt stored the user message under the key, and
			// no reply.
			env.seed(t, "cut", "u:hi", "a:hello")
			if _, err := env.mem.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: "cut"}, chatMsgs("u:my phone is 555 0100"), chatmem.AppendOptions{IdempotencyKey: "turn-1"}); err != nil {
				t.Fatal(err)
			}
			redact("cut", 3, "my phone is [phone]")
			h[headerConversation] = "cut"
			if status, _, resp := env.post(t, h, body); status != http.StatusOK {
				t.Fatalf("retry after a cut: %d %s, want 200", status, resp)
			}
			wantBrief(t, "stored after the retry", brief(env.stored(t, "cut")), normBrief([]string{"u:hi", "a:hello", "u:my phone is [phone]", "a:answer 2"}))

			// The same with a client that sends only the new message.
			if _, err := env.mem.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: "one"}, chatMsgs("u:my phone is 555 0100"), chatmem.AppendOptions{IdempotencyKey: "turn-1"}); err != nil {
				t.Fatal(err)
			}
			redact("one", 1, "my phone is [phone]")
			h[headerConversation] = "one"
			if status, _, resp := env.post(t, h, reconcileBody(t, "u:my phone is 555 0100")); status != http.StatusOK {
				t.Fatalf("single-message retry after a cut: %d %s, want 200", status, resp)
			}
			wantBrief(t, "stored after the single-message retry", brief(env.stored(t, "one")), normBrief([]string{"u:my phone is [phone]", "a:answer 3"}))
		})
	}
}

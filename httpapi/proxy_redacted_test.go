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

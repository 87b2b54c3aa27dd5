package httpapi

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"
)

// TestProxyAuthErrorShape: an OpenAI client with a wrong key gets an error
// it can parse, in OpenAI's shape, not chatmem's.
func TestProxyAuthErrorShape(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	c := env.client("conv-auth", option.WithAPIKey("not-the-key"))
	_, err := c.Chat.Completions.New(t.Context(), userTurn("hello"))
	if e := wantOpenAIError(t, "wrong key", err, 401, "unauthorized", "authentication_error"); e != nil {
		t.Logf("error: %s", e.Message)
	}
	if n := len(env.up.requests()); n != 0 {
		t.Errorf("the upstream got %d requests from an unauthenticated client", n)
	}
}

// TestProxyMasksEchoedUpstreamKey: an upstream (a gateway, say) that echoes
// the Authorization header it got in an error body does not hand the
// server's upstream key to the client or to the log.
func TestProxyMasksEchoedUpstreamKey(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	env.up.push(
		fakeReply{status: 500, contentType: "text/plain", body: "proxy auth failed: Authorization: Bearer " + upstreamKey},
		fakeReply{status: 401, contentType: "application/json", body: `{"error":{"message":"Invalid API key: ` + upstreamKey + `","type":"invalid_request_error"}}`},
	)
	for i := range 2 {
		status, _, body := env.post(t, map[string]string{"X-Chatmem-Conversation": "echo"}, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if status < 400 {
			t.Fatalf("reply %d: status %d, want the upstream's error", i, status)
		}
		if strings.Contains(string(body), upstreamKey) {
			t.Errorf("reply %d: the client got the upstream key: %s", i, body)
		}
		if !strings.Contains(string(body), "[upstream key]") {
			t.Errorf("reply %d: the body does not say a key was masked: %s", i, body)
		}
	}
	if strings.Contains(env.log.String(), upstreamKey) {
		t.Errorf("the log holds the upstream key:\n%s", env.log.String())
	}
}

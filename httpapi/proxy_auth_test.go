package httpapi

import (
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

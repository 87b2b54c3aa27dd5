package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
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

// TestProxyAuthPassthrough: under passthrough auth the upstream gets the
// client's own Authorization (chat and models, the model cache kept per
// credential), the chatmem key comes in X-Chatmem-Key, and the REST API
// still takes it in Authorization.
func TestProxyAuthPassthrough(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{passthrough: true})
	ctx := t.Context()
	for _, clientKey := range []string{"sk-client-1", "sk-client-2"} {
		c := env.client("byok", option.WithAPIKey(clientKey), option.WithHeader(headerKey, proxyKey))
		_, err := c.Chat.Completions.New(ctx, userTurn("hello from "+clientKey))
		pmust(t, clientKey, err)
		if got := env.up.last(t).header.Get("Authorization"); got != "Bearer "+clientKey {
			t.Errorf("the upstream got Authorization %q, want the client's", got)
		}
		for range 2 {
			_, err = c.Models.List(ctx)
			pmust(t, clientKey+" models", err)
		}
	}
	want := "/v1/models Bearer sk-client-1|/v1/models Bearer sk-client-2"
	if got := strings.Join(env.up.modelRequests(), "|"); got != want {
		t.Errorf("model requests %q, want %q", got, want)
	}
	if n := len(env.stored(t, "byok")); n != 4 {
		t.Errorf("stored %d messages, want 4", n)
	}

	// Without X-Chatmem-Key, or with a wrong one: 401, nothing sent.
	sent := len(env.up.requests())
	for _, key := range []string{"", "wrong"} {
		opts := []option.RequestOption{option.WithAPIKey("sk-client-1")}
		if key != "" {
			opts = append(opts, option.WithHeader(headerKey, key))
		}
		_, err := env.client("byok", opts...).Chat.Completions.New(ctx, userTurn("hi"))
		if e := wantOpenAIError(t, "key "+key, err, 401, "unauthorized", "authentication_error"); e != nil && key == "" && !strings.Contains(e.Message, headerKey) {
			t.Errorf("key %q: message %q, want it to name %s", key, e.Message, headerKey)
		}
	}
	if n := len(env.up.requests()); n != sent {
		t.Errorf("the upstream got %d more requests from unauthenticated clients", n-sent)
	}
	// The REST API: Authorization, as ever.
	status, _, body := env.getWithKey(t, "/v1/conversations/byok", proxyKey)
	if status != 200 {
		t.Errorf("REST with the chatmem key in Authorization: %d %s", status, body)
	}

	if _, err := newUpstream(Upstream{BaseURL: "http://127.0.0.1:9/v1", APIKey: "sk-x", Auth: UpstreamAuthPassthrough}); err == nil {
		t.Error("a server key with passthrough auth: no error")
	}
	if _, err := newUpstream(Upstream{BaseURL: "http://127.0.0.1:9/v1", Auth: "client"}); err == nil {
		t.Error("an unknown auth mode: no error")
	}
}

// TestProxyTenantUpstreams: a tenant with an upstream of its own has its
// requests (chat and models) sent there with its key; the others go to
// the server's upstream with the server's key.
func TestProxyTenantUpstreams(t *testing.T) {
	def, own := newFakeUpstream(t), newFakeUpstream(t)
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(mem, Options{
		Keys:            []Key{{Tenant: "acme", Key: proxyKey}, {Tenant: "globex", Key: "globex-key-1"}},
		Upstream:        &Upstream{BaseURL: def.URL + "/v1", APIKey: upstreamKey},
		TenantUpstreams: map[string]Upstream{"globex": {BaseURL: own.URL + "/v1", APIKey: "sk-globex-own"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		key  string
		up   *fakeUpstream
		auth string
	}{{proxyKey, def, "Bearer " + upstreamKey}, {"globex-key-1", own, "Bearer sk-globex-own"}} {
		c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey(tc.key), option.WithMaxRetries(0),
			option.WithHeader(headerConversation, "c"))
		_, err := c.Chat.Completions.New(t.Context(), userTurn("hello"))
		pmust(t, tc.key, err)
		_, err = c.Models.List(t.Context())
		pmust(t, tc.key+" models", err)
		if n := len(tc.up.requests()); n != 1 {
			t.Errorf("%s: its upstream got %d requests, want 1", tc.key, n)
		} else if got := tc.up.last(t).header.Get("Authorization"); got != tc.auth {
			t.Errorf("%s: its upstream got Authorization %q, want %q", tc.key, got, tc.auth)
		}
		if got := tc.up.modelRequests(); len(got) != 1 || got[0] != "/v1/models "+tc.auth {
			t.Errorf("%s: model requests %q", tc.key, got)
		}
	}

	for _, bad := range []map[string]Upstream{
		{"no spaces": {BaseURL: own.URL + "/v1"}},
		{"globex": {BaseURL: "not a url"}},
		{"globex": {BaseURL: own.URL + "/v1", Auth: UpstreamAuthPassthrough}},
	} {
		if _, err := New(mem, Options{TenantUpstreams: bad}); err == nil {
			t.Errorf("TenantUpstreams %v: no error", bad)
		}
	}
}

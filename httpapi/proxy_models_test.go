package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestProxyModels: GET /v1/models and /v1/models/{model} come from the
// upstream, with the upstream's key, and from a cache after; the
// upstream's 404 is relayed; another /v1 path no route serves answers 404
// in OpenAI's shape; and the official client lists and reads models.
func TestProxyModels(t *testing.T) {
	env := newProxyEnv(t, proxyConfig{})
	ctx := t.Context()
	client := env.client("")
	page, err := client.Models.List(ctx)
	pmust(t, "list", err)
	if len(page.Data) != 2 || page.Data[0].ID != "gpt-4o-mini" {
		t.Errorf("models = %+v, want the upstream's two", page.Data)
	}
	m, err := client.Models.Get(ctx, "gpt-4o")
	pmust(t, "get", err)
	if m.ID != "gpt-4o" {
		t.Errorf("model = %+v, want gpt-4o", m)
	}
	// Again: from the cache.
	for range 3 {
		_, err = client.Models.List(ctx)
		pmust(t, "list again", err)
		_, err = client.Models.Get(ctx, "gpt-4o")
		pmust(t, "get again", err)
	}
	got := env.up.modelRequests()
	want := []string{"/v1/models Bearer " + upstreamKey, "/v1/models/gpt-4o Bearer " + upstreamKey}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the upstream got %q, want %q (once each, with its key)", got, want)
	}

	status, _, body := env.get(t, "/v1/models/gpt-9")
	if status != http.StatusNotFound || !strings.Contains(string(body), `"code":"model_not_found"`) {
		t.Errorf("unknown model: %d %s, want the upstream's 404", status, body)
	}
	for _, path := range []string{"/v1/embeddings", "/v1/responses", "/v1/chat/completions/x"} {
		status, _, body = env.get(t, path)
		if status != http.StatusNotFound || !strings.Contains(string(body), `"type":"not_found_error"`) || !strings.Contains(string(body), `"code":"not_found"`) {
			t.Errorf("GET %s: %d %s, want 404 in OpenAI's shape", path, status, body)
		}
	}
	status, _, body = env.getWithKey(t, "/v1/models", "wrong")
	if status != http.StatusUnauthorized || !strings.Contains(string(body), `"type":"authentication_error"`) {
		t.Errorf("wrong key: %d %s, want 401 in OpenAI's shape", status, body)
	}

	noUp := newProxyEnv(t, proxyConfig{noUp: true})
	status, _, body = noUp.get(t, "/v1/models")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "no upstream configured") {
		t.Errorf("no upstream: %d %s, want 503", status, body)
	}
}

func (e *proxyEnv) get(t *testing.T, path string) (int, http.Header, []byte) {
	return e.getWithKey(t, path, proxyKey)
}

func (e *proxyEnv) getWithKey(t *testing.T, path, key string) (int, http.Header, []byte) {
	t.Helper()
	return e.send(t, http.MethodGet, path, key, nil, "")
}

package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/chatmem/chatmem"
)

// modelsTTL is how long an upstream's answer to GET /models (or
// /models/{model}) is served from the cache: apps call it at start and
// on every settings page, the list rarely changes.
const modelsTTL = time.Minute

// maxModelsBody bounds an upstream's model list.
const maxModelsBody = 4 << 20

// maxModelsCached bounds the cache's entries (a model ID per entry, a
// key per entry under passthrough auth); past it the cache starts over.
const maxModelsCached = 1024

// modelsCache holds the upstream's successful answers to the model
// routes, by path and the credential they were asked with.
type modelsCache struct {
	mu      sync.Mutex
	entries map[string]modelsEntry
}

type modelsEntry struct {
	body        []byte
	contentType string
	expires     time.Time
}

func (m *modelsCache) get(key string, now time.Time) (modelsEntry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok || now.After(e.expires) {
		return modelsEntry{}, false
	}
	return e, true
}

func (m *modelsCache) put(key string, e modelsEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil || len(m.entries) >= maxModelsCached {
		m.entries = make(map[string]modelsEntry)
	}
	m.entries[key] = e
}

// listModels is GET /v1/models: the upstream's model list, which
// OpenAI-compatible apps read at start.
func (s *Server) listModels(c *call) error { return s.models(c, "/models") }

// getModel is GET /v1/models/{model}.
func (s *Server) getModel(c *call) error {
	return s.models(c, "/models/"+url.PathEscape(c.r.PathValue("model")))
}

// models relays GET path to the upstream with the upstream's credential,
// and its successful answers from a cache for modelsTTL. Errors are in
// the OpenAI shape, the upstream's own relayed as they are.
func (s *Server) models(c *call, path string) error {
	if c.up == nil {
		return errNoUpstream
	}
	auth := c.up.authorization(c.r)
	key := path + "\x00" + auth
	h := c.w.Header()
	if e, ok := c.up.models.get(key, time.Now()); ok {
		h.Set("Content-Type", e.contentType)
		h.Set("Content-Length", strconv.Itoa(len(e.body)))
		c.w.WriteHeader(http.StatusOK)
		_, _ = c.w.Write(e.body)
		return nil
	}
	resp, err := s.callUpstream(c, http.MethodGet, c.up.base+path, nil, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody+1))
	if err != nil {
		return transportError(c.r.Context(), err)
	}
	if len(b) > maxModelsBody {
		return &upstreamError{status: http.StatusBadGateway, msg: fmt.Sprintf("upstream model list over %d bytes", maxModelsBody)}
	}
	b = redactKey(b, c.up.key)
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	c.up.models.put(key, modelsEntry{body: b, contentType: ct, expires: time.Now().Add(modelsTTL)})
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	c.w.WriteHeader(resp.StatusCode)
	_, _ = c.w.Write(b)
	return nil
}

// openAINotFound answers a /v1/ path no route serves in the OpenAI shape,
// which OpenAI-compatible apps probing for endpoints understand.
func (s *Server) openAINotFound(w http.ResponseWriter, r *http.Request) {
	s.writeOpenAIError(w, r, fmt.Errorf("%w: no route for %s %s", chatmem.ErrNotFound, r.Method, r.URL.Path))
}

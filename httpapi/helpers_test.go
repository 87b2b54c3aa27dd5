package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/redis"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// backend opens a fresh, empty store for one test, closed (and its data
// removed) when the test ends.
type backend struct {
	name string
	open func(t *testing.T) chatmem.Store
}

// backends are the stores the end-to-end tests run against. Redis and
// PostgreSQL are skipped when unreachable, except on CI (CI=true), where
// that fails the test.
var backends = []backend{
	{"memory", func(t *testing.T) chatmem.Store { return memstore.New() }},
	{"sqlite", openSQLite},
	{"redis", openRedis},
	{"postgres", openPostgres},
}

func openSQLite(t *testing.T) chatmem.Store {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "chatmem.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openRedis opens a store under a random key prefix, and deletes the
// prefix's keys when the test ends.
func openRedis(t *testing.T) chatmem.Store {
	client := goredis.NewClient(testenv.RedisOptions(t))
	t.Cleanup(func() { client.Close() })
	prefix := "httpapitest-" + strings.ToLower(rand.Text()[:12])
	s, err := redis.New(client, redis.Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("redis.New: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			client.Unlink(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("delete keys of prefix %s: %v", prefix, err)
		}
	})
	return s
}

// openPostgres opens a store over a random schema, dropped when the test
// ends.
func openPostgres(t *testing.T) chatmem.Store {
	schema := testenv.PostgresSchema(t, "httpapi_test_")
	s, err := postgres.Open(t.Context(), testenv.PostgresURL(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// newMemory returns a Memory over store counting with the seed's estimate
// and resolving the other tokenizers by name.
func newMemory(t *testing.T, store chatmem.Store, mod func(*chatmem.Options)) *chatmem.Memory {
	t.Helper()
	opts := chatmem.Options{
		Counter: tokenizer.Estimate{},
		Counters: func(name string) (chatmem.Counter, error) {
			return tokenizer.Get(name, tokenizer.Options{})
		},
	}
	if mod != nil {
		mod(&opts)
	}
	mem, err := chatmem.New(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

// Keys of the two tenants the tests use; globex's is configured by its
// hash.
const (
	acmeKey   = "acme-secret-key-1"
	globexKey = "globex-secret-key-2"
)

func testKeys() []Key {
	return []Key{{Tenant: "acme", Key: acmeKey}, {Tenant: "globex", Hash: HashKey(globexKey)}}
}

// testServer is a Server behind a real loopback HTTP server.
type testServer struct {
	*httptest.Server
	api *Server
	log *syncBuffer
}

// newTestServer serves a Server over mem with opts (the test's keys if
// opts.Keys is nil, and a JSON logger into a buffer).
func newTestServer(t *testing.T, mem *chatmem.Memory, opts Options) *testServer {
	t.Helper()
	if opts.Keys == nil {
		opts.Keys = testKeys()
	}
	buf := &syncBuffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(buf, nil))
	api, err := New(mem, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return &testServer{Server: ts, api: api, log: buf}
}

func (ts *testServer) client(key string) *client.Client { return client.New(ts.URL, key, ts.Client()) }

// rawResponse is a response read in full.
type rawResponse struct {
	status int
	header http.Header
	body   []byte
}

// raw sends one request as given, for what the typed client cannot send.
// A body is sent as application/json unless header sets Content-Type; a
// "Host" in header is the request's Host.
func (ts *testServer) raw(t *testing.T, method, path, key string, header map[string]string, body string) rawResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+path, rd)
	if err != nil {
		t.Fatalf("NewRequest(%s %s): %v", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		switch {
		case strings.EqualFold(k, "Host"):
			req.Host = v
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: b}
}

// apiError decodes r as an error response, as the Go client reads one.
func (r rawResponse) apiError() *client.Error {
	e := &client.Error{Status: r.status, RequestID: r.header.Get("X-Request-Id")}
	var body client.ErrorBody
	if err := json.Unmarshal(r.body, &body); err == nil {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	}
	return e
}

// convPath and userPath return the path of a conversation or a user, or
// of its sub-resource, as the Go client builds them.
func convPath(id, sub string) string   { return resourcePath("/v1/conversations/", id, sub) }
func userPath(user, sub string) string { return resourcePath("/v1/users/", user, sub) }

func resourcePath(prefix, id, sub string) string {
	return strings.TrimSuffix(prefix+url.PathEscape(id)+"/"+sub, "/")
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent log writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func ptr[T any](v T) *T { return &v }

// must fails the test on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantAPIError checks that err is an *client.Error with the status and code, and
// that it unwraps to sentinel (if not nil).
func wantAPIError(t *testing.T, what string, err error, status int, code string) *client.Error {
	t.Helper()
	e, ok := err.(*client.Error)
	if !ok {
		t.Fatalf("%s: error = %v (%T), want *client.Error %d %s", what, err, err, status, code)
	}
	if e.Status != status || e.Code != code {
		t.Errorf("%s: error = %d %s (%s), want %d %s", what, e.Status, e.Code, e.Message, status, code)
	}
	return e
}

func describe(c Conversation) string {
	return fmt.Sprintf("last_seq=%d tokens=%d system_tokens=%d turns=%d updated_at=%s expires_at=%s tokenizer=%s",
		c.LastSeq, c.Tokens, c.SystemTokens, c.Turns, c.UpdatedAt.UTC().Format(time.RFC3339Nano), c.ExpiresAt.UTC().Format(time.RFC3339Nano), c.Tokenizer)
}

// containsAll reports whether s holds every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

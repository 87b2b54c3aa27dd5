package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/redis"
)

// benchStore opens a Redis store under a fresh key prefix or a PostgreSQL
// store in a fresh schema, removed when b ends.
func benchStore(b *testing.B, name string) chatmem.Store {
	if name == "postgres" {
		s, err := postgres.Open(b.Context(), testenv.PostgresURL(), postgres.Options{Schema: testenv.PostgresSchema(b, "chatmem_bench_")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	o := testenv.RedisOptions(b)
	prefix := "cmbench-" + rand.Text()[:12]
	s, err := redis.Open(b.Context(), testenv.RedisURL(), redis.Options{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		s.Close()
		c := goredis.NewClient(o)
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Unlink(ctx, iter.Val())
		}
	})
	return s
}

// completionTransport is an upstream in the process: it answers every
// chat completion request with a canned completion in OpenAI's wire
// format, so that a benchmark counts the proxy's allocations and not a
// socket's or a second HTTP server's.
type completionTransport struct{ body []byte }

func (t completionTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(t.body)),
		ContentLength: int64(len(t.body)), Request: r,
	}, nil
}

// BenchmarkProxyTurn runs steady proxied turns through the real handler
// (Server.ServeHTTP, no socket on the client's side) to an upstream in
// the process (completionTransport), on the memory store, SQLite, Redis
// and PostgreSQL (the last two skipped when their servers are not
// there, see internal/testenv): the client sends the new user message only, the reply is
// benchReply, and the conversation holds a full window (a 200-turn
// history, token_budget 4000, about 80 messages sent per turn). allocs/op
// is one turn's allocations: the request's decoding, the turn, the
// upstream request's body, the reply's decoding and commit, the
// response, and what the store's client does (SQLite's commit goroutine
// included); ns/op is one turn's time, the store's round trips included.
func BenchmarkProxyTurn(b *testing.B) {
	for _, name := range []string{"memory", "sqlite", "redis", "postgres"} {
		b.Run(name, func(b *testing.B) {
			var env *proxyEnv
			cfg := proxyConfig{upClient: &http.Client{Transport: completionTransport{body: []byte(
				`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` +
					benchReply + `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4000,"completion_tokens":75,"total_tokens":4075}}`)}}}
			switch name {
			case "sqlite":
				env, _ = benchEnvConfig(b, cfg)
			case "redis", "postgres":
				cfg.store = benchStore(b, name)
				env = newProxyEnv(b, cfg)
			default:
				env = newProxyEnv(b, cfg)
			}
			key := chatmem.Key{Tenant: "acme", ID: "bench"}
			msgs := make([]chatmem.Message, 0, 400)
			for i := range 200 {
				msgs = append(msgs,
					chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("%s (%d)", benchUser, i)},
					chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("%s (%d)", benchReply, i)})
			}
			if _, err := env.mem.Append(b.Context(), key, msgs, chatmem.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
			turn := func(i int) {
				body := `{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"user","content":"` + benchUser + ` (` + strconv.Itoa(i) + `)"}]}`
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				r.Header.Set("Authorization", "Bearer "+proxyKey)
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(headerConversation, "bench")
				w := httptest.NewRecorder()
				env.api.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
			turn(-1) // the process's first turn fills the tail cache
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				turn(i)
				i++
			}
		})
	}
}

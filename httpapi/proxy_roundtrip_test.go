package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/redis"
	"github.com/chatmem/chatmem/tokenizer"
)

// roundTrips counts the round trips a store client makes: as a go-redis
// hook, each command sent alone and each pipeline is one; as a pgx
// tracer, each query, each batch and each statement a connection
// prepares. Those made on a context marked with countRoundTrips count in
// marked, all of them in all (the Memory's worker, which indexes the
// conversation off the request path, makes the difference).
type roundTrips struct{ marked, all atomic.Int64 }

type countedKey struct{}

// countRoundTrips marks ctx: the round trips made on it count.
func countRoundTrips(ctx context.Context) context.Context {
	return context.WithValue(ctx, countedKey{}, true)
}

func (c *roundTrips) count(ctx context.Context) {
	c.all.Add(1)
	if ctx.Value(countedKey{}) != nil {
		c.marked.Add(1)
	}
}

func (c *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.count(ctx)
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.count(ctx)
		return next(ctx, cmds)
	}
}

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.count(ctx)
	return ctx
}

func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.count(ctx)
	return ctx
}

func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (c *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

func (c *roundTrips) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	if !d.AlreadyPrepared {
		c.count(ctx)
	}
}

// TestProxyRoundTrips counts the store round trips of steady proxied
// turns on Redis and PostgreSQL, with the Memory's worker running: two
// per turn, the turn's append with its window (Memory.Turn) and the
// reply's append, whether the client sends its whole history or only
// the new message. A turn whose conversation another process appended
// to meanwhile costs more (the cache is behind: lined up again from the
// store), and the turn after it two again. A steady Responses turn in a
// conversation is two as well: the window's read with the input
// pending, and the append of the input with the reply.
func TestProxyRoundTrips(t *testing.T) {
	for _, name := range []string{"redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var rt roundTrips
			var store chatmem.Store
			switch name {
			case "redis":
				o := testenv.RedisOptions(t)
				prefix := "cmtest-" + rand.Text()[:12]
				s, err := redis.Open(t.Context(), testenv.RedisURL(), redis.Options{Prefix: prefix, Hooks: []goredis.Hook{&rt}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					s.Close()
					c := goredis.NewClient(o)
					defer c.Close()
					ctx := context.Background()
					iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
					for iter.Next(ctx) {
						c.Unlink(ctx, iter.Val())
					}
				})
				store = s
			case "postgres":
				schema := testenv.PostgresSchema(t, "chatmem_rt_")
				s, err := postgres.Open(t.Context(), testenv.PostgresURL(), postgres.Options{Schema: schema, Tracer: &rt})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				store = s
			}
			env := newProxyEnv(t, proxyConfig{store: store})
			if err := env.mem.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { env.mem.Close() })

			var history []map[string]string // the client's, as it sends it
			turn := func(full bool, content string) (marked, all int64) {
				t.Helper()
				history = append(history, map[string]string{"role": "user", "content": content})
				msgs := history[len(history)-1:]
				if full {
					msgs = history
				}
				body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": append([]map[string]string{{"role": "system", "content": "Be brief."}}, msgs...)})
				r := httptest.NewRequestWithContext(countRoundTrips(t.Context()), http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body)))
				r.Header.Set("Authorization", "Bearer "+proxyKey)
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(headerConversation, "rt")
				w := httptest.NewRecorder()
				m0, a0 := rt.marked.Load(), rt.all.Load()
				env.api.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Fatalf("turn %q: %d %s", content, w.Code, w.Body)
				}
				var cc chatCompletion
				if err := json.Unmarshal(w.Body.Bytes(), &cc); err != nil || len(cc.Choices) == 0 || cc.Choices[0].Message.Content == nil {
					t.Fatalf("reply %s: %v", w.Body, err)
				}
				history = append(history, map[string]string{"role": "assistant", "content": *cc.Choices[0].Message.Content})
				return rt.marked.Load() - m0, rt.all.Load() - a0
			}
			// The first turns create the conversation and fill the tail
			// cache; what they cost is not the steady state's.
			turn(true, "Hello, I am Ada.")
			turn(true, "Where is my order SE-10423?")
			for i, full := range []bool{true, true, false, false, true} {
				marked, all := turn(full, fmt.Sprintf("And question %d?", i))
				t.Logf("steady turn %d (full history %v): %d round trips on the request's path, %d in all", i, full, marked, all)
				if marked != 2 {
					t.Errorf("steady turn %d (full history %v) made %d round trips, want 2 (the turn, the reply)", i, full, marked)
				}
			}
			// Another process appends: this process's cache is behind,
			// which the turn's conditional append finds out.
			other, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
			if err != nil {
				t.Fatal(err)
			}
			key := chatmem.Key{Tenant: "acme", ID: "rt"}
			added := []chatmem.Message{{Role: chatmem.RoleUser, Content: "Also, my address changed."}, {Role: chatmem.RoleAssistant, Content: "Noted."}}
			if _, err := other.Append(t.Context(), key, added, chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, m := range added {
				history = append(history, map[string]string{"role": string(m.Role), "content": m.Content})
			}
			marked, _ := turn(true, "When will it arrive?")
			t.Logf("a turn after another process appended: %d round trips", marked)
			if marked <= 2 {
				t.Errorf("a turn after another process appended made %d round trips: it cannot have seen the other's messages", marked)
			}
			if marked, _ := turn(true, "Thanks."); marked != 2 {
				t.Errorf("the turn after it made %d round trips, want 2", marked)
			}
			// A Responses turn in a conversation: the window read with the
			// input pending, then the input and the reply appended in one.
			respond := func(path, body string) (int64, []byte) {
				t.Helper()
				r := httptest.NewRequestWithContext(countRoundTrips(t.Context()), http.MethodPost, openAIPrefix+path, strings.NewReader(body))
				r.Header.Set("Authorization", "Bearer "+proxyKey)
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				m0 := rt.marked.Load()
				env.api.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					t.Fatalf("POST %s: %d %s", path, w.Code, w.Body)
				}
				return rt.marked.Load() - m0, w.Body.Bytes()
			}
			_, b := respond("/conversations", `{"items":[{"role":"user","content":"Hello, I am Ada."}]}`)
			var conv struct{ ID string }
			if err := json.Unmarshal(b, &conv); err != nil {
				t.Fatal(err)
			}
			respond("/responses", `{"model":"gpt-4o-mini","conversation":"`+conv.ID+`","input":"Where is my order?"}`)
			for i := range 3 {
				marked, _ := respond("/responses", fmt.Sprintf(`{"model":"gpt-4o-mini","conversation":%q,"input":"And question %d?"}`, conv.ID, i))
				t.Logf("steady Responses turn %d: %d round trips", i, marked)
				if marked != 2 {
					t.Errorf("steady Responses turn %d made %d round trips, want 2 (the window, the input and reply)", i, marked)
				}
			}
			// Another process appends: the cache is behind, which the
			// window's read finds out; the response is made from the
			// conversation as the store holds it, and stored after it.
			ckey := chatmem.Key{Tenant: "acme", ID: conv.ID}
			if _, err := other.Append(t.Context(), ckey, []chatmem.Message{{Role: chatmem.RoleUser, Content: "From elsewhere."}}, chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			if marked, _ := respond("/responses", fmt.Sprintf(`{"model":"gpt-4o-mini","conversation":%q,"input":"After that?"}`, conv.ID)); marked <= 2 {
				t.Errorf("a Responses turn after another process appended made %d round trips: it cannot have seen the other's message", marked)
			}
			cmsgs := env.stored(t, conv.ID)
			if n := len(cmsgs); n < 3 || cmsgs[n-3].Content != "From elsewhere." || cmsgs[n-2].Content != "After that?" || cmsgs[n-1].Role != chatmem.RoleAssistant {
				t.Errorf("after another process's append, the conversation ends %+v", cmsgs[max(0, n-3):])
			}
			if marked, _ := respond("/responses", fmt.Sprintf(`{"model":"gpt-4o-mini","conversation":%q,"input":"Thanks."}`, conv.ID)); marked != 2 {
				t.Errorf("the Responses turn after it made %d round trips, want 2", marked)
			}

			got := env.stored(t, "rt")
			if len(got) != len(history) {
				t.Fatalf("stored %d messages, the client holds %d", len(got), len(history))
			}
			for i, m := range got {
				if m.Content != history[i]["content"] {
					t.Fatalf("stored message %d is %q, the client's %q", i, m.Content, history[i]["content"])
				}
			}
		})
	}
}

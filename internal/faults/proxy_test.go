package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/internal/llm/llmtest"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

const (
	proxyKills         = 6
	proxyClients       = 4
	proxyConversations = 3
	upstreamEnv        = "CHATMEM_FAULTS_UPSTREAM" // the fake model's base URL
	pgSchemaEnv        = "CHATMEM_FAULTS_PG_SCHEMA"
)

// TestProxyKillSQLite and TestProxyKillPostgres run the chat proxy in a
// server process of its own, over a SQLite file or a PostgreSQL schema, in
// front of a fake model, while four clients send turns to three
// conversations, streamed and not; the server is killed with SIGKILL right
// after a client got a reply, at a random point, six times, and started
// again over the same data. A turn
// counts as acknowledged once its client has the whole reply (a 200 with
// the reply, or a stream read to data: [DONE]). At the end every
// acknowledged turn is stored: its user message, and its reply after it
// (at once, except for a conversation's first turn, whose message is
// appended before the model is called).
func TestProxyKillSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chatmem.db")
	testProxyKill(t, "proxy-sqlite-kill", []string{dbEnv + "=" + path}, func(ctx context.Context) (chatmem.Store, error) {
		return sqlite.Open(ctx, path, sqlite.Options{})
	})
}

func TestProxyKillPostgres(t *testing.T) {
	_ = testenv.PostgresAdmin(t) // skips (or fails on CI) without PostgreSQL
	schema := testenv.PostgresSchema(t, "chatmem_faults_proxy_")
	testProxyKill(t, "proxy-postgres-kill", []string{pgSchemaEnv + "=" + schema}, func(ctx context.Context) (chatmem.Store, error) {
		return postgres.Open(ctx, testenv.PostgresURL(), postgres.Options{Schema: schema})
	})
}

func testProxyKill(t *testing.T, kind string, env []string, open func(context.Context) (chatmem.Store, error)) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	seed := seedFromClock(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	up := httptest.NewServer(llmtest.ChatCompletions(func(req llmtest.ChatRequest) string { return replyFor(req.Last()) }))
	defer up.Close()
	env = append(env, upstreamEnv+"="+up.URL+"/v1")

	var mu sync.Mutex
	var acked []proxyTurn
	sent := 0
	for round := range proxyKills {
		h := startHelper(t, ctx, "proxy-server", env...)
		var addr string
		if !h.consume(ctx, func(string) {}, func(line string) bool {
			addr, _ = strings.CutPrefix(line, "listening ")
			return addr != ""
		}) {
			h.killAndDrain(func(string) {})
			t.Fatalf("round %d: the server did not start: %s", round+1, h.stderr.String())
		}
		cctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		first := make(chan struct{})
		var once sync.Once
		ackc := make(chan struct{}, 1)
		for c := range proxyClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				crng := rand.New(rand.NewPCG(seed+uint64(round), uint64(c)))
				client := &http.Client{Transport: &http.Transport{}}
				for n := 0; cctx.Err() == nil; n++ {
					tu := proxyTurn{conv: fmt.Sprintf("conv-%d", crng.IntN(proxyConversations)),
						marker: fmt.Sprintf("r%d-c%d-%04d", round, c, n), stream: crng.IntN(2) == 0}
					mu.Lock()
					sent++
					mu.Unlock()
					if err := tu.send(cctx, client, addr); err != nil {
						if cctx.Err() == nil && !isDown(err) {
							t.Errorf("turn %s: %v", tu.marker, err)
						}
						return
					}
					mu.Lock()
					acked = append(acked, tu)
					mu.Unlock()
					once.Do(func() { close(first) })
					select {
					case ackc <- struct{}{}:
					default:
					}
				}
			}()
		}
		select {
		case <-first:
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: no turn acknowledged within 15s: %s", round+1, h.stderr.String())
		}
		sleep(ctx, time.Duration(rng.Int64N(int64(300*time.Millisecond))))
		// Kill right after a client got a reply: where a server that
		// answered before committing would lose the turn.
		select {
		case <-ackc:
		default:
		}
		select {
		case <-ackc:
		case <-ctx.Done():
		}
		if err := h.killAndDrain(func(string) {}); err != nil {
			t.Fatalf("kill %d: %v", round+1, err)
		}
		stop()
		wg.Wait()
		if t.Failed() || ctx.Err() != nil {
			t.FailNow()
		}
	}

	store, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	found := 0
	convs := map[string][]chatmem.Message{}
	for _, tu := range acked {
		msgs, ok := convs[tu.conv]
		if !ok {
			if msgs, err = store.Range(ctx, chatmem.Key{Tenant: chatmem.DefaultTenant, ID: tu.conv}, 0, 0); err != nil {
				t.Fatalf("Range(%s): %v", tu.conv, err)
			}
			convs[tu.conv] = msgs
		}
		i := slicesIndex(msgs, tu.marker)
		switch {
		case i < 0:
			t.Errorf("acknowledged turn %s (stream=%v) is not stored", tu.marker, tu.stream)
		case !slices.ContainsFunc(msgs[i+1:], func(m chatmem.Message) bool {
			return m.Role == chatmem.RoleAssistant && m.Content == replyFor(tu.marker)
		}):
			t.Errorf("acknowledged turn %s (stream=%v): its reply is not stored after it", tu.marker, tu.stream)
		default:
			found++
		}
	}
	t.Logf("%d turns sent, %d acknowledged, %d found", sent, len(acked), found)
	report(t, kind, proxyKills, len(acked), found, len(convs))
}

// slicesIndex returns the index of the user message whose content is
// marker, or -1.
func slicesIndex(msgs []chatmem.Message, marker string) int {
	for i, m := range msgs {
		if m.Role == chatmem.RoleUser && m.Content == marker {
			return i
		}
	}
	return -1
}

// isDown reports an error of a server that was killed: a refused or reset
// connection, or a response cut short.
func isDown(err error) bool {
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.As(err, &ne) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "connection refused") || errors.Is(err, errCut)
}

// errCut is a stream that ended without data: [DONE].
var errCut = errors.New("the stream ended before data: [DONE]")

// proxyTurn is one turn a client sends: its user message is marker, and
// the fake model answers replyFor(marker).
type proxyTurn struct {
	conv, marker string
	stream       bool
}

func replyFor(marker string) string { return "Noted: " + marker + "." }

// send sends the turn and returns nil once the client has the whole reply.
func (tu proxyTurn) send(ctx context.Context, client *http.Client, addr string) error {
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": tu.stream,
		"messages": []any{map[string]any{"role": "user", "content": tu.marker}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Chatmem-Conversation", tu.conv)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var content strings.Builder
	if !tu.stream {
		var cc struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil {
			return err
		}
		if len(cc.Choices) > 0 {
			content.WriteString(cc.Choices[0].Message.Content)
		}
	} else {
		done := false
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() && !done {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			switch {
			case !ok:
			case data == "[DONE]":
				done = true
			default:
				var ch struct {
					Choices []struct {
						Delta struct {
							Content string `json:"content"`
						} `json:"delta"`
					} `json:"choices"`
					Error json.RawMessage `json:"error"`
				}
				if err := json.Unmarshal([]byte(data), &ch); err != nil {
					return err
				}
				if ch.Error != nil {
					return fmt.Errorf("error event: %s", ch.Error)
				}
				for _, c := range ch.Choices {
					content.WriteString(c.Delta.Content)
				}
			}
		}
		if !done {
			if err := sc.Err(); err != nil {
				return err
			}
			return errCut
		}
	}
	if content.String() != replyFor(tu.marker) {
		return fmt.Errorf("reply %q, want %q", content.String(), replyFor(tu.marker))
	}
	return nil
}

// proxyServer is the helper the proxy tests kill: the chat proxy over the
// SQLite file $CHATMEM_FAULTS_DB or the PostgreSQL schema
// $CHATMEM_FAULTS_PG_SCHEMA, in front of $CHATMEM_FAULTS_UPSTREAM, on a
// loopback port it prints as "listening ADDR".
func proxyServer() error {
	ctx := context.Background()
	var store chatmem.Store
	var err error
	if schema := os.Getenv(pgSchemaEnv); schema != "" {
		store, err = postgres.Open(ctx, testenv.PostgresURL(), postgres.Options{Schema: schema})
	} else {
		store, err = sqlite.Open(ctx, os.Getenv(dbEnv), sqlite.Options{})
	}
	if err != nil {
		return err
	}
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		return err
	}
	api, err := httpapi.New(mem, httpapi.Options{
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Upstream: &httpapi.Upstream{BaseURL: os.Getenv(upstreamEnv)},
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var out stdoutLines
	out.print("listening " + ln.Addr().String() + "\n")
	return http.Serve(ln, api)
}

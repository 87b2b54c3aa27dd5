package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/loadtest"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// restTurnPath is the REST turn both BenchmarkRESTTurn's servers answer:
// token_budget 4,000, as a chatbot asks for it.
const restTurnPath = "/turn?policy=token_budget&budget=4000"

// BenchmarkRESTTurn times POST /v1/conversations/{id}/turn through the
// server against the HTTP floor: a bare net/http handler that decodes the
// same request body with encoding/json, makes the same Memory.Turn on the
// same in-process Memory (memstore, its worker running) and encodes the
// appended messages and the window with encoding/json. What the ratio
// leaves is what the server adds to a turn: authentication, validation,
// limits, metrics, the log line, the ETag.
//
// Each of conns clients owns a conversation on each server, filled with
// 1,000 messages of 20 to 400 characters (loadtest.ChatContent); a turn
// sends one such user message, and the assistant's reply is appended
// (in process, untimed, the same for both) before the client's next turn,
// so the tail cache sees the pattern of a real chat. An iteration is a
// block of 10 turns per client on each server, in alternating order. It
// reports each side's p50 latency (rest-p50-ns, floor-p50-ns), their
// ratio (rest/floor), and the ratio of the blocks' wall times
// (rest/floor-wall: the inverse ratio of the throughputs):
//
//	go test -run '^$' -bench BenchmarkRESTTurn -benchtime 100x -count 5 ./httpapi
func BenchmarkRESTTurn(b *testing.B) {
	for _, conns := range []int{1, 64} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) { benchmarkRESTTurn(b, conns) })
	}
}

func benchmarkRESTTurn(b *testing.B, conns int) {
	ctx := context.Background()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		b.Fatal(err)
	}
	if err := mem.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mem.Close() })
	api, err := New(mem, Options{Keys: testKeys(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	rest := httptest.NewServer(api)
	b.Cleanup(rest.Close)
	floor := httptest.NewServer(restTurnFloor(mem))
	b.Cleanup(floor.Close)

	const fill = 1000
	type side struct {
		name, url, prefix string
		client            *http.Client
		lat               []time.Duration
		wall              time.Duration
	}
	sides := []*side{{name: "rest", url: rest.URL, prefix: "rest-"}, {name: "floor", url: floor.URL, prefix: "floor-"}}
	for _, s := range sides {
		s.client = &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns}}
		b.Cleanup(s.client.CloseIdleConnections)
		for c := range conns {
			msgs := make([]chatmem.Message, fill)
			for i := range msgs {
				msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: loadtest.ChatContent(i)}
				if i%2 == 1 {
					msgs[i].Role = chatmem.RoleAssistant
				}
			}
			if _, err := mem.Append(ctx, chatmem.Key{Tenant: "acme", ID: fmt.Sprintf("%s%d", s.prefix, c)}, msgs, chatmem.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	bodies := make([][]byte, 256)
	for i := range bodies {
		body, err := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": loadtest.ChatContent(fill + 2*i)}}})
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = body
	}
	// turns makes n turns on s from each client, the reply appended
	// after each, and returns their latencies.
	turns := func(s *side, n, from int) ([]time.Duration, error) {
		var (
			mu   sync.Mutex
			lat  = make([]time.Duration, 0, n*conns)
			errs = make(chan error, conns)
		)
		var wg sync.WaitGroup
		for c := range conns {
			wg.Go(func() {
				id := fmt.Sprintf("%s%d", s.prefix, c)
				url := s.url + "/v1/conversations/" + id + restTurnPath
				key := chatmem.Key{Tenant: "acme", ID: id}
				mine := make([]time.Duration, 0, n)
				for i := range n {
					k := from + i
					req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(bodies[k%len(bodies)]))
					req.Header.Set("Authorization", "Bearer "+acmeKey)
					req.Header.Set("Content-Type", "application/json")
					t0 := time.Now()
					resp, err := s.client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					d := time.Since(t0)
					if err != nil || resp.StatusCode != http.StatusCreated {
						errs <- fmt.Errorf("%s turn: status %d, %v", s.name, resp.StatusCode, err)
						return
					}
					mine = append(mine, d)
					reply := []chatmem.Message{{Role: chatmem.RoleAssistant, Content: loadtest.ChatContent(fill + 2*k + 1)}}
					if _, err := mem.Append(ctx, key, reply, chatmem.AppendOptions{}); err != nil {
						errs <- err
						return
					}
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		return lat, <-errs
	}
	// Warm-up: connections open, the tail caches filled.
	for _, s := range sides {
		if _, err := turns(s, 3, 0); err != nil {
			b.Fatal(err)
		}
	}
	const block = 10
	round := 0
	for b.Loop() {
		for j := range sides {
			s := sides[(round+j)%len(sides)]
			t0 := time.Now()
			lat, err := turns(s, block, 3+round*block)
			if err != nil {
				b.Fatal(err)
			}
			s.wall += time.Since(t0)
			s.lat = append(s.lat, lat...)
		}
		round++
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2])
	}
	r, f := p50(sides[0].lat), p50(sides[1].lat)
	b.ReportMetric(r, "rest-p50-ns")
	b.ReportMetric(f, "floor-p50-ns")
	b.ReportMetric(r/f, "rest/floor")
	b.ReportMetric(float64(sides[0].wall)/float64(sides[1].wall), "rest/floor-wall")
	b.ReportMetric(float64(conns*block*round)/sides[0].wall.Seconds(), "rest-turns/s")
}

// restTurnFloor is BenchmarkRESTTurn's HTTP floor: the REST turn's job on
// mem with nothing of the server around it.
func restTurnFloor(mem *chatmem.Memory) http.Handler {
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 4000}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/conversations/{id}/turn", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []chatmem.Message `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		key := chatmem.Key{Tenant: "acme", ID: r.PathValue("id")}
		res, win, err := mem.Turn(r.Context(), key, req.Messages, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var out struct {
			Appended struct {
				Messages []chatmem.Message `json:"messages"`
			} `json:"appended"`
			Window chatmem.Window `json:"window"`
		}
		out.Appended.Messages, out.Window = res.Messages, win
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(out)
	})
	return mux
}

// BenchmarkServerAppendConcurrent drives POST /v1/conversations/{id}/messages
// through the server on SQLite (a file in a temp dir, Memory's worker
// running) from 1 client and from 32, over 1,000 conversations (client c
// appends to conversations c, c+clients, ...), one user message of 20 to
// 400 characters per request. An iteration is a block of 1 s of each, in
// alternating order. It reports the appends per second of each
// (appends/s-1, appends/s-32), their ratio (32/1: what group commit
// buys) and the p50 and p99 of an append at 32 clients:
//
//	go test -run '^$' -bench BenchmarkServerAppendConcurrent -benchtime 5x -count 3 ./httpapi
func BenchmarkServerAppendConcurrent(b *testing.B) {
	store, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "chatmem.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		b.Fatal(err)
	}
	if err := mem.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mem.Close() })
	api, err := New(mem, Options{Keys: testKeys(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(api)
	b.Cleanup(srv.Close)
	const conversations = 1000
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)
	bodies := make([][]byte, 256)
	for i := range bodies {
		body, err := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": loadtest.ChatContent(i)}}})
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = body
	}
	// run appends from clients clients for d and returns how many and
	// their latencies.
	run := func(clients int, d time.Duration) ([]time.Duration, time.Duration, error) {
		var (
			mu   sync.Mutex
			lat  []time.Duration
			errs = make(chan error, clients)
			wg   sync.WaitGroup
		)
		start := time.Now()
		deadline := start.Add(d)
		for c := range clients {
			wg.Go(func() {
				var mine []time.Duration
				for i := 0; time.Now().Before(deadline); i++ {
					conv := (c + i*clients) % conversations
					req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/conversations/c-%d/messages", srv.URL, conv),
						bytes.NewReader(bodies[(c+i)%len(bodies)]))
					req.Header.Set("Authorization", "Bearer "+acmeKey)
					req.Header.Set("Content-Type", "application/json")
					t0 := time.Now()
					resp, err := client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
						errs <- fmt.Errorf("append: status %d", resp.StatusCode)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		return lat, time.Since(start), <-errs
	}
	if _, _, err := run(32, 500*time.Millisecond); err != nil { // warm-up: connections, the file's pages
		b.Fatal(err)
	}
	sizes := []int{1, 32}
	var (
		count [2]int
		wall  [2]time.Duration
		lat32 []time.Duration
	)
	round := 0
	for b.Loop() {
		for j := range sizes {
			k := (round + j) % len(sizes)
			lat, d, err := run(sizes[k], time.Second)
			if err != nil {
				b.Fatal(err)
			}
			count[k] += len(lat)
			wall[k] += d
			if sizes[k] == 32 {
				lat32 = append(lat32, lat...)
			}
		}
		round++
	}
	one, many := float64(count[0])/wall[0].Seconds(), float64(count[1])/wall[1].Seconds()
	slices.Sort(lat32)
	b.ReportMetric(one, "appends/s-1")
	b.ReportMetric(many, "appends/s-32")
	b.ReportMetric(many/one, "32/1")
	b.ReportMetric(float64(lat32[len(lat32)/2])/1e6, "p50-ms-32")
	b.ReportMetric(float64(lat32[len(lat32)*99/100])/1e6, "p99-ms-32")
}

// TestRESTTurnFloor checks that BenchmarkRESTTurn compares like with
// like: on conversations filled alike, the server's turn and the floor's
// answer the same window (the same messages) for the same request, in
// bodies of about the same size.
func TestRESTTurnFloor(t *testing.T) {
	mem := newMemory(t, memstore.New(), nil)
	ts := newTestServer(t, mem, Options{})
	floor := httptest.NewServer(restTurnFloor(mem))
	t.Cleanup(floor.Close)
	fill := make([]chatmem.Message, 200)
	for i := range fill {
		fill[i] = chatmem.Message{Role: chatmem.RoleUser, Content: loadtest.ChatContent(i)}
		if i%2 == 1 {
			fill[i].Role = chatmem.RoleAssistant
		}
	}
	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": loadtest.ChatContent(200)}}})
	type answer struct {
		Window struct {
			Messages []chatmem.Message `json:"messages"`
		} `json:"window"`
	}
	turn := func(url, id string) (answer, int) {
		t.Helper()
		if _, err := mem.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: id}, fill, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/conversations/"+id+restTurnPath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+acmeKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: status %d: %s", url, resp.StatusCode, raw)
		}
		var a answer
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		return a, len(raw)
	}
	got, gotSize := turn(ts.URL, "rest-0")
	want, wantSize := turn(floor.URL, "floor-0")
	if len(got.Window.Messages) == 0 || len(got.Window.Messages) != len(want.Window.Messages) {
		t.Fatalf("server's window %d messages, floor's %d: want the same, not none", len(got.Window.Messages), len(want.Window.Messages))
	}
	for i := range got.Window.Messages {
		g, w := got.Window.Messages[i], want.Window.Messages[i]
		if g.Seq != w.Seq || g.Content != w.Content {
			t.Fatalf("window message %d: server's %d %q, floor's %d %q", i, g.Seq, g.Content, w.Seq, w.Content)
		}
	}
	if gotSize < wantSize*9/10 || gotSize > wantSize*11/10 {
		t.Errorf("server's answer %d bytes, floor's %d: want within 10%%", gotSize, wantSize)
	}
}

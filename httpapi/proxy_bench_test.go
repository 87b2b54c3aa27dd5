package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/sqlite"
)

// BenchmarkProxyOverhead times the same non-streaming request sent to the
// fake upstream directly and through the proxy (sqlite store in a temp
// dir, the default token_budget 4000), one after the other in each
// iteration so that both see the same noise, and reports the percentiles
// of each and the difference of the medians: the proxy's overhead per
// turn. ns/op is the time of both requests.
//
// The proxy commits the turn (one fsynced SQLite transaction) before it
// writes the response, so proxy-p50, the time until the client has the
// whole response, includes the commit. The direct request follows at once;
// the iteration then waits for the proxy's handler to return, and
// settled-p50 is the time from the proxied request until then (with the
// commit before the response, little more than proxy-p50 plus the direct
// request).
//
// Every turn sends a user message of about 100 characters and gets a
// reply of about 300 (estimate tokenizer: 25 and 75 tokens). short
// rotates conversations every 10 turns (at most 20 messages in the
// window, the first turn of each creating its conversation); full-window
// first stores a 200-turn history, so that every turn's window holds a
// full budget (about 80 messages, 16 KB of JSON); the benchmark fails if
// the proxy reports a window that is not full.
//
// The direct request is the client's own: it does not carry the history
// the proxy adds, so the overhead includes sending that to the upstream.
//
// short-ledger is short with a usage ledger over the store (the default
// flush interval) and a proxy spend limit that every turn checks: its
// proxy-p50 against short's is the ledger's cost per turn.
func BenchmarkProxyOverhead(b *testing.B) {
	for _, bc := range []struct {
		name    string
		turns   int // per conversation; 0: one conversation
		history int // turns stored before the timing starts
		ledger  bool
	}{{"short", 10, 0, false}, {"short-ledger", 10, 0, true}, {"full-window", 0, 200, false}} {
		b.Run(bc.name, func(b *testing.B) { benchmarkProxyOverhead(b, bc.turns, bc.history, bc.ledger) })
	}
}

// The benchmark's messages: a user message of 100 characters and a reply
// of 300.
const (
	benchUser  = `Where is my order SE-10423? It has not arrived yet and the tracking page has said in transit since Monday.`
	benchReply = `I am sorry about the wait. Order SE-10423 left our warehouse in Malmo on Monday and is with the carrier; ` +
		`their last scan was at the Hamburg hub this morning, so it should reach you within two working days. ` +
		`If it has not arrived by Thursday, tell me and I will open a claim with the carrier right away.`
)

// benchEnv is a proxy on a SQLite store in a temporary directory, whose
// fake upstream keeps no requests and answers benchReply and the
// request's number.
func benchEnv(b *testing.B, ledger ...bool) (*proxyEnv, *sqlite.Store) {
	return benchEnvConfig(b, proxyConfig{}, ledger...)
}

// benchEnvConfig is benchEnv with cfg's settings but its store (and, if
// ledger is true, a ledger with a proxy limit checked every turn).
func benchEnvConfig(b *testing.B, cfg proxyConfig, ledger ...bool) (*proxyEnv, *sqlite.Store) {
	store, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "chatmem.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	cfg.store = store
	if len(ledger) > 0 && ledger[0] {
		l := chatmem.NewLedger(chatmem.LedgerOptions{Store: chatmem.UsageStoreOf(store), Limits: func(string) chatmem.TenantLimits {
			return chatmem.TenantLimits{Proxy: chatmem.Limit{Tokens: 1 << 50, Period: chatmem.PeriodMonth}}
		}})
		l.Start()
		b.Cleanup(func() { _ = l.Close(context.Background()) })
		cfg.memory = func(o *chatmem.Options) { o.Ledger = l }
	}
	env := newProxyEnv(b, cfg)
	env.up.forget = true
	env.up.answer = func(n int) string { return fmt.Sprintf("%s (%d)", benchReply, n) }
	return env, store
}

func benchmarkProxyOverhead(b *testing.B, turns, history int, ledger bool) {
	env, _ := benchEnv(b, ledger)
	handled := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		env.api.ServeHTTP(w, r)
		handled <- struct{}{}
	}))
	b.Cleanup(srv.Close)
	if history > 0 {
		msgs := make([]chatmem.Message, 0, 2*history)
		for i := range history {
			msgs = append(msgs,
				chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("%s (%d)", benchUser, i)},
				chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("%s (%d)", benchReply, i)})
		}
		if _, err := env.mem.Append(b.Context(), chatmem.Key{Tenant: "acme", ID: "bench"}, msgs, chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	body := []byte(`{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"user","content":"` + benchUser + `"}]}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func(url string, header map[string]string) (time.Duration, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
		return d, resp.Header
	}
	proxied := map[string]string{"Authorization": "Bearer " + proxyKey}
	var direct, proxy, settled []time.Duration
	minWindow := 0
	i := 0
	for b.Loop() {
		conv := "bench"
		if turns > 0 {
			conv = fmt.Sprintf("bench-%d", i/turns)
		}
		i++
		proxied["X-Chatmem-Conversation"] = conv
		start := time.Now()
		p, h := send(srv.URL+"/v1/chat/completions", proxied)
		d, _ := send(env.up.URL+"/v1/chat/completions", nil)
		<-handled
		direct, proxy, settled = append(direct, d), append(proxy, p), append(settled, time.Since(start))
		n, _ := strconv.Atoi(h.Get(headerWindowTokens))
		if minWindow == 0 || n < minWindow {
			minWindow = n
		}
	}
	if full := DefaultProxyPolicy.Budget - 2*len(benchReply)/4; history > 0 && minWindow < full {
		b.Fatalf("the smallest window sent was %d tokens, want a full one (over %d of %d)", minWindow, full, DefaultProxyPolicy.Budget)
	}
	slices.Sort(direct)
	slices.Sort(proxy)
	slices.Sort(settled)
	d, p := percentile(direct, 50), percentile(proxy, 50)
	b.ReportMetric(µs(d), "direct-p50-µs")
	b.ReportMetric(µs(p), "proxy-p50-µs")
	b.ReportMetric(µs(percentile(proxy, 90)), "proxy-p90-µs")
	b.ReportMetric(µs(p-d), "overhead-p50-µs")
	b.ReportMetric(µs(percentile(settled, 50)), "settled-p50-µs")
	b.ReportMetric(float64(minWindow), "window-tokens")
}

// percentile returns the pth percentile of sorted ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, (len(ds)*p+99)/100-1)]
}

func µs(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkProxyStream sends streamed turns through the proxy (memory
// store), with a conversation and without (the plain pass-through): each
// reply is benchReply in the fake upstream's 4-byte deltas, about 80
// events. ns/op and allocs/op are one whole turn's, the fake upstream's
// and the client's included; the relay's own share is what changes
// between two runs of the same code otherwise.
func BenchmarkProxyStream(b *testing.B) {
	for _, conv := range []string{"memory", ""} {
		name := conv
		if name == "" {
			name = "pass-through"
		}
		b.Run(name, func(b *testing.B) {
			env := newProxyEnv(b, proxyConfig{})
			env.up.forget = true
			env.up.answer = func(int) string { return benchReply }
			body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"` + benchUser + `"}]}`
			header := map[string]string{}
			i := 0
			for b.Loop() {
				if conv != "" {
					header["X-Chatmem-Conversation"] = fmt.Sprintf("bench-%d", i/10)
				}
				i++
				if status, _, resp := env.post(b, header, body); status != 200 || !bytes.HasSuffix(resp, []byte("data: [DONE]\n\n")) {
					b.Fatalf("%d %s", status, resp)
				}
			}
		})
	}
}

// BenchmarkProxyHistory times a proxy turn whose request carries the
// history, as chat apps send it: the newest 59 stored messages and the new
// user message (60 in all), on a conversation of 1,000 and of 100,000
// stored messages, on SQLite and on the memory store. Reconciling the request reads O(request)
// stored messages, so the two cost the same. ns/op is one whole turn (the
// client, the fake upstream and the commit included) and the same body
// sent to the fake upstream directly; overhead-p50-µs is the difference
// of the two medians, as in BenchmarkProxyOverhead.
func BenchmarkProxyHistory(b *testing.B) {
	for _, stored := range []int{1_000, 100_000} {
		for _, name := range []string{"sqlite", "memory"} {
			b.Run(strconv.Itoa(stored)+"/"+name, func(b *testing.B) { benchmarkProxyHistory(b, stored, 60, name == "memory") })
		}
	}
}

func benchmarkProxyHistory(b *testing.B, stored, request int, memory bool) {
	var env *proxyEnv
	var store chatmem.Store
	if memory {
		store = memstore.New()
		env = newProxyEnv(b, proxyConfig{store: store})
		env.up.forget = true
		env.up.answer = func(n int) string { return fmt.Sprintf("%s (%d)", benchReply, n) }
	} else {
		env, store = benchEnv(b)
	}
	key := chatmem.Key{Tenant: "acme", ID: "bench"}
	const batch = 500
	for i := 0; i < stored; i += batch {
		msgs := make([]chatmem.Message, 0, batch)
		for j := i; j < i+batch && j < stored; j += 2 {
			msgs = append(msgs,
				chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("%s (%d)", benchUser, j)},
				chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("%s (%d)", benchReply, j)})
		}
		if _, err := env.mem.Append(b.Context(), key, msgs, chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	conv, err := env.mem.Conversation(b.Context(), key)
	if err != nil {
		b.Fatal(err)
	}
	history, err := store.Range(b.Context(), key, conv.LastSeq-int64(request-1), request-1)
	if err != nil {
		b.Fatal(err)
	}
	header := map[string]string{headerConversation: "bench"}
	var direct, proxy []time.Duration
	i := 0
	for b.Loop() {
		i++
		msgs := append(slices.Clip(history), chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("%s (new %d)", benchUser, i)})
		list := make([]json.RawMessage, len(msgs))
		for k, m := range msgs {
			list[k], _ = MarshalOpenAIMessage(m)
		}
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": list})
		start := time.Now()
		status, _, resp := env.post(b, header, string(body))
		if status != http.StatusOK {
			b.Fatalf("%d %s", status, resp)
		}
		proxy = append(proxy, time.Since(start))
		start = time.Now()
		if r, err := http.Post(env.up.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		} else {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		direct = append(direct, time.Since(start))
		var cc chatCompletion
		if err := json.Unmarshal(resp, &cc); err != nil || len(cc.Choices) == 0 || cc.Choices[0].Message.Content == nil {
			b.Fatalf("reply %s: %v", resp, err)
		}
		// The client's history: the newest request-1 messages, the
		// reply included.
		history = append(msgs, chatmem.Message{Role: chatmem.RoleAssistant, Content: *cc.Choices[0].Message.Content})[2:]
	}
	b.StopTimer()
	slices.Sort(direct)
	slices.Sort(proxy)
	b.ReportMetric(µs(percentile(proxy, 50)), "proxy-p50-µs")
	b.ReportMetric(µs(percentile(proxy, 50)-percentile(direct, 50)), "overhead-p50-µs")
	after, err := env.mem.Conversation(b.Context(), key)
	if err != nil {
		b.Fatal(err)
	}
	if grew := after.LastSeq - conv.LastSeq; grew != int64(2*i) {
		b.Fatalf("the conversation grew by %d messages in %d turns, want %d", grew, i, 2*i)
	}
}

// BenchmarkProxyReceipts measures what receipts cost the chat proxy: two
// proxies over two SQLite stores, one keeping a receipt with each reply
// and one not (Options.NoReceipts), take the same turn one after the
// other in each iteration (so both see the same noise), on conversations
// of 10 turns (as BenchmarkProxyOverhead's short case). It reports each
// proxy's p50 and their ratio, the mean size of the receipts stored, and
// the bytes per turn the receipts add to the database (both files'
// sizes, WAL checkpointed, after the run). The fake upstream's IDs are as
// long and as random as OpenAI's.
func BenchmarkProxyReceipts(b *testing.B) {
	type side struct {
		env   *proxyEnv
		store *sqlite.Store
		path  string
		srv   *httptest.Server
		times []time.Duration
	}
	open := func(receipts bool) *side {
		dir := b.TempDir()
		path := filepath.Join(dir, "chatmem.db")
		store, err := sqlite.Open(b.Context(), path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		env := newProxyEnv(b, proxyConfig{store: store})
		env.api.receipts = receipts
		env.up.forget, env.up.longIDs = true, true
		env.up.answer = func(n int) string { return fmt.Sprintf("%s (%d)", benchReply, n) }
		srv := httptest.NewServer(env.api)
		b.Cleanup(srv.Close)
		return &side{env: env, store: store, path: path, srv: srv}
	}
	on, off := open(true), open(false)
	body := []byte(`{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"user","content":"` + benchUser + `"}]}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func(s *side, conv string) {
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+proxyKey)
		req.Header.Set("X-Chatmem-Conversation", conv)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		s.times = append(s.times, time.Since(start))
		if resp.StatusCode != 200 {
			b.Fatalf("%d", resp.StatusCode)
		}
	}
	i := 0
	for b.Loop() {
		conv := fmt.Sprintf("bench-%d", i/10)
		if i%2 == 0 {
			send(on, conv)
			send(off, conv)
		} else {
			send(off, conv)
			send(on, conv)
		}
		i++
	}
	b.StopTimer()
	receiptBytes, receipts := 0, 0
	for c := 0; c <= (i-1)/10; c++ {
		rs, err := on.store.Receipts(b.Context(), chatmem.Key{Tenant: "acme", ID: fmt.Sprintf("bench-%d", c)}, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			receiptBytes += len(r.Data)
			receipts++
		}
	}
	if receipts != i {
		b.Fatalf("%d receipts stored for %d turns", receipts, i)
	}
	size := func(s *side) int64 {
		if err := s.store.Close(); err != nil {
			b.Fatal(err)
		}
		var n int64
		for _, suffix := range []string{"", "-wal"} { // Close checkpoints the WAL
			if fi, err := os.Stat(s.path + suffix); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	grown := size(on) - size(off)
	slices.Sort(on.times)
	slices.Sort(off.times)
	pOn, pOff := percentile(on.times, 50), percentile(off.times, 50)
	b.ReportMetric(µs(pOn), "receipts-p50-µs")
	b.ReportMetric(µs(pOff), "none-p50-µs")
	b.ReportMetric(float64(pOn)/float64(pOff), "p50-ratio")
	b.ReportMetric(float64(receiptBytes)/float64(receipts), "receipt-bytes")
	b.ReportMetric(float64(grown)/float64(i), "db-bytes/turn")
}

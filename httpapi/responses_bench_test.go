package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/sqlite"
)

// BenchmarkResponsesTurn times a Responses turn in a conversation of 1,000
// and of 100,000 items (a sqlite store in a temp dir and the memory store,
// the default token_budget 4000) against the same request sent to the fake upstream
// directly, one after the other in each iteration, and reports the
// medians and their difference (overhead-p50: what chatmem adds to a turn,
// the commit included). The turn's cost depends on the window, not on the
// conversation's length, so the two sizes should cost the same.
func BenchmarkResponsesTurn(b *testing.B) {
	for _, items := range []int{1000, 100_000} {
		for _, name := range []string{"sqlite", "memory"} {
			b.Run(fmt.Sprintf("items=%d/%s", items, name), func(b *testing.B) { benchmarkResponsesTurn(b, items, name == "memory") })
		}
	}
}

func benchmarkResponsesTurn(b *testing.B, items int, memory bool) {
	var store chatmem.Store = memstore.New()
	if !memory {
		s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "chatmem.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		store = s
	}
	env := newProxyEnv(b, proxyConfig{store: store})
	env.up.forget = true
	env.up.answer = func(n int) string { return fmt.Sprintf("%s (%d)", benchReply, n) }
	key := chatmem.Key{Tenant: "acme", ID: "conv_bench"}
	for done := 0; done < items; {
		msgs := make([]chatmem.Message, 0, 1000)
		for i := 0; i < 500 && done < items; i++ {
			msgs = append(msgs,
				chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("%s (%d)", benchUser, done)},
				chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("%s (%d)", benchReply, done)})
			done += 2
		}
		if _, err := env.mem.Append(b.Context(), key, msgs, chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func(url string, body []byte, auth bool) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth {
			req.Header.Set("Authorization", "Bearer "+proxyKey)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d", url, resp.StatusCode)
		}
		return time.Since(start)
	}
	directBody := []byte(`{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"user","content":"` + benchUser + `"}]}`)
	respBody := []byte(`{"model":"gpt-4o-mini","temperature":0.2,"conversation":"` + key.ID + `","input":"` + benchUser + `"}`)
	var direct, turn []time.Duration
	for b.Loop() {
		turn = append(turn, send(env.url+openAIPrefix+"/responses", respBody, true))
		direct = append(direct, send(env.up.URL+"/v1/chat/completions", directBody, false))
	}
	p50 := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(direct), "direct-p50-ms")
	b.ReportMetric(p50(turn), "turn-p50-ms")
	b.ReportMetric(p50(turn)-p50(direct), "overhead-p50-ms")
}

package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem/internal/llm/llmtest"
)

// TestResponsesKillSQLite runs the server (proxyServer: the Responses API
// is served beside the chat proxy) over a SQLite file, has a client create
// responses in one conversation, streamed and not, and kills the server
// with SIGKILL right after the client got a reply, four times. Started
// again over the same file, the server has every acknowledged response:
// GET /openai/v1/responses/{id} gives its text, and the conversation's
// items hold each acknowledged turn's input and output.
func TestResponsesKillSQLite(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "chatmem.db")
	up := httptest.NewServer(llmtest.ChatCompletions(func(req llmtest.ChatRequest) string { return replyFor(req.Last()) }))
	defer up.Close()
	env := []string{dbEnv + "=" + path, upstreamEnv + "=" + up.URL + "/v1"}
	start := func() (*helper, string) {
		h := startHelper(t, ctx, "proxy-server", env...)
		var addr string
		if !h.consume(ctx, func(string) {}, func(line string) bool {
			addr, _ = strings.CutPrefix(line, "listening ")
			return addr != ""
		}) {
			h.killAndDrain(func(string) {})
			t.Fatalf("the server did not start: %s", h.stderr.String())
		}
		return h, "http://" + addr + "/openai/v1"
	}
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(url, body string) []byte {
		resp, err := client.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
		}
		return b
	}

	h, base := start()
	var conv struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(post(base+"/conversations", `{}`), &conv); err != nil {
		t.Fatal(err)
	}
	type ack struct{ id, marker string }
	var acked []ack
	for round := range 4 {
		for n := range round + 1 {
			marker := fmt.Sprintf("k%d-%d", round, n)
			stream := n%2 == 1
			b := post(base+"/responses", fmt.Sprintf(`{"model":"m","conversation":%q,"input":%q,"stream":%v}`, conv.ID, marker, stream))
			if stream {
				// The stream is acknowledged with response.completed, its
				// last event.
				i := bytes.LastIndex(b, []byte("event: response.completed\ndata: "))
				if i < 0 {
					t.Fatalf("%s: no response.completed: %s", marker, b)
				}
				var ev struct {
					Response json.RawMessage `json:"response"`
				}
				if err := json.Unmarshal(bytes.TrimSpace(b[i+len("event: response.completed\ndata: "):]), &ev); err != nil {
					t.Fatalf("%s: %v", marker, err)
				}
				b = ev.Response
			}
			var r struct {
				ID     string `json:"id"`
				Output []struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"output"`
			}
			if err := json.Unmarshal(b, &r); err != nil || len(r.Output) != 1 || r.Output[0].Content[0].Text != replyFor(marker) {
				t.Fatalf("%s: %s", marker, b)
			}
			acked = append(acked, ack{r.ID, marker})
		}
		// Killed right after the reply: a server that answered before it
		// committed would lose the turn.
		if err := h.killAndDrain(func(string) {}); err != nil {
			t.Fatal(err)
		}
		h, base = start()
	}
	defer h.kill()
	for _, a := range acked {
		resp, err := client.Get(base + "/responses/" + a.id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), replyFor(a.marker)) {
			t.Errorf("acknowledged response %s (%s) after the kills: %d %s", a.id, a.marker, resp.StatusCode, b)
		}
	}
	resp, err := client.Get(base + "/conversations/" + conv.ID + "/items?order=asc&limit=100")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 2*len(acked) {
		t.Errorf("the conversation has %d items (%v), want %d", len(list.Data), err, 2*len(acked))
	}
	t.Logf("%d responses acknowledged, all found after 4 kills", len(acked))
}

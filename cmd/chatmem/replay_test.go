package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestReplay: two turns through the chat proxy over a SQLite file, to an
// upstream speaking OpenAI's wire format; chatmem replay prints each
// request as the upstream got it, given the request's system message,
// and says what it needs without it or after a rewind.
func TestReplay(t *testing.T) {
	var mu sync.Mutex
	var got [][]byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, b)
		n := len(got)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"answer %d"},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":16}}}`, n, n)
	}))
	defer up.Close()

	path := filepath.Join(t.TempDir(), "chatmem.db")
	store, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(mem, httpapi.Options{Upstream: &httpapi.Upstream{BaseURL: up.URL + "/v1", APIKey: "sk-test"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()
	const system = `{"role":"system","content":"Be brief."}`
	bodies := []string{
		`{"model":"gpt-4o-mini","messages":[` + system + `,{"role":"user","content":"hi"}],"temperature":0}`,
		`{"model":"gpt-4o-mini","messages":[` + system + `,{"role":"user","content":"hi"},{"role":"assistant","content":"answer 1"},{"role":"user","content":"and now?"}],"temperature":0}`,
	}
	for _, b := range bodies {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Chatmem-Conversation", "c1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("proxy answered %d", resp.StatusCode)
		}
	}
	sysFile := filepath.Join(t.TempDir(), "system.json")
	if err := os.WriteFile(sysFile, []byte("["+system+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, seq := range []string{"2", "4"} {
		stdout, stderr, code := runSub(t, runReplay, "--store", "sqlite:"+path, "--conversation", "c1", "--seq", seq, "--system", sysFile)
		if code != 0 || !bytes.Equal([]byte(stdout), append(got[i], '\n')) {
			t.Errorf("replay --seq %s = %d %q %s, want the upstream's body %s", seq, code, stdout, stderr, got[i])
		}
	}
	if _, stderr, code := runSub(t, runReplay, "--store", "sqlite:"+path, "--conversation", "c1", "--seq", "4"); code != 1 || !strings.Contains(stderr, "1 system messages") {
		t.Errorf("replay without --system = %d %s, want exit 1 naming the system message", code, stderr)
	}
	if _, err := mem.Rewind(t.Context(), chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "c1"}, 2, chatmem.RewindOptions{}); err != nil {
		t.Fatal(err)
	}
	store.Close()
	if _, stderr, code := runSub(t, runReplay, "--store", "sqlite:"+path, "--conversation", "c1", "--seq", "4", "--system", sysFile); code != 1 || !strings.Contains(stderr, "ends at 2") {
		t.Errorf("replay after a rewind = %d %s, want exit 1 saying the conversation ends at 2", code, stderr)
	}
	if _, _, code := runSub(t, runReplay, "--store", "sqlite:"+path, "--conversation", "c1"); code != 2 {
		t.Errorf("replay without --seq = exit %d, want 2", code)
	}
}

package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/internal/seed"
)

func TestServeSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "chatmem.json")
	if err := os.WriteFile(cfg, []byte(`{"addr":"127.0.0.1:1111","tokenizer":"cl100k_base","summary-trigger":500,"log-format":"json"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHATMEM_TOKENIZER", "estimate") // env beats the file
	t.Setenv("CHATMEM_LOG_FORMAT", "text")
	var c serveConfig
	ss := c.settings()
	fs := newFlagSet("serve", "", "", io.Discard)
	flags := ss.flagSet(fs)
	if err := fs.Parse([]string{"--log-format", "json"}); err != nil { // flag beats env
		t.Fatal(err)
	}
	file, err := ss.readConfigFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.resolve(fs, flags, file); err != nil {
		t.Fatal(err)
	}
	if c.addr != "127.0.0.1:1111" || c.tokenizer != "estimate" || c.logFormat != "json" || c.summaryTrigger != 500 || c.maxMessages != 1000 {
		t.Errorf("resolved addr=%s tokenizer=%s log-format=%s trigger=%d max-messages=%d; want file, env, flag, file, default",
			c.addr, c.tokenizer, c.logFormat, c.summaryTrigger, c.maxMessages)
	}

	if err := os.WriteFile(cfg, []byte(`{"adr":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.readConfigFile(cfg); err == nil || !strings.Contains(err.Error(), `unknown key "adr"`) {
		t.Errorf("a typo in the config file: error = %v", err)
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, "without API keys"},
		{[]string{"--max-messages", "many"}, "max-messages"},
		{[]string{"--read-timeout", "soon"}, "read-timeout"},
		{[]string{"--rate-limit", "fast"}, "rate-limit"},
		{[]string{"--upstream", "http://127.0.0.1:1/v1", "--upstream-kind", "gemini"}, "unknown upstream-kind"},
		{[]string{"--upstream", "http://127.0.0.1:1/v1", "--proxy-policy", "everything"}, "proxy-policy"},
		{[]string{"--rate-burst", "-1"}, "rate limit"},
		{[]string{"--tokenizer", "gpt2"}, "unknown tokenizer"},
		{[]string{"--summarizer", "magic"}, "unknown summarizer"},
		{[]string{"--summarizer", "openai"}, "summarizer: "}, // no model named
		{[]string{"--extractors", "rules,magic"}, "unknown extractor"},
		{[]string{"--api-keys", "nocolon"}, "api"},
	}
	for _, tt := range tests {
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, tt.args...)
		_, errOut, code := runCLI(t, "", args...)
		if code != 2 || !strings.Contains(strings.ToLower(errOut), strings.ToLower(tt.msg)) {
			t.Errorf("serve %v: exit %d, %q; want exit 2 mentioning %q", tt.args, code, errOut, tt.msg)
		}
	}
}

// TestServe runs `chatmem serve` on a loopback port with API keys, talks to
// it through the Go client, and stops it as SIGTERM would.
func TestServe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t.Setenv("CHATMEM_API_KEYS", "acme:k1,globex:k2")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--tokenizer", "estimate", "--log-level", "warn"}, nil, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen line: %v", err)
	}
	go io.Copy(io.Discard, pr)
	base := strings.TrimSpace(strings.TrimPrefix(line, "chatmem listening on "))

	acme := httpapi.NewClient(base, "k1", nil)
	if _, err := acme.Append(ctx, "kavya", seed.History(), httpapi.ClientAppendOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := acme.Context(ctx, "kavya", httpapi.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40})
	if err != nil || len(w.Messages) != 3 || w.Tokens != 36 {
		t.Fatalf("context at 40 = %d messages, %d tokens, %v; want 3, 36", len(w.Messages), w.Tokens, err)
	}
	globex := httpapi.NewClient(base, "k2", nil)
	if _, err := globex.Context(ctx, "kavya", httpapi.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40}); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("another tenant reads the conversation: %v, want ErrNotFound", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down")
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/internal/testenv"
)

// TestServeSettingsPrecedence: each setting comes from its flag, else its
// environment variable, else the config file, else its default, parsed by
// its type from every source.
func TestServeSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "chatmem.json")
	file := `{"addr":"127.0.0.1:1111","tokenizer":"cl100k_base","summary-trigger":500,"log-format":"json",` +
		`"read-timeout":"1d","max-body-bytes":"1MiB","insecure":true,"extractors":["rules","openai"],"older-than":"30d"}`
	if err := os.WriteFile(cfg, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHATMEM_CONFIG", cfg)
	t.Setenv("CHATMEM_TOKENIZER", "estimate") // env beats the file
	t.Setenv("CHATMEM_LOG_FORMAT", "text")
	t.Setenv("CHATMEM_MAX_BODY_BYTES", "2MiB")
	t.Setenv("CHATMEM_UPSTREAM_URL", "http://127.0.0.1:9/v1")
	var c serveConfig
	cmd := c.command()
	if err := parseSettings(cmd, []string{"--log-format", "json", "--tail-cache-bytes", "4MiB", "--shutdown-timeout=1m"}, io.Discard); err != nil { // flag beats env
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
		from      string
	}{
		{"addr", c.addr, "127.0.0.1:1111", "config file"},
		{"tokenizer", c.tokenizer, "estimate", "CHATMEM_TOKENIZER"},
		{"log-format", c.logFormat, "json", "flag"},
		{"summary-trigger", c.summaryTrigger, 500, "config file"},
		{"read-timeout", c.readTimeout, 24 * time.Hour, "config file"},
		{"max-body-bytes", c.maxBodyBytes, int64(2 << 20), "CHATMEM_MAX_BODY_BYTES"},
		{"insecure", c.insecure, true, "config file"},
		{"extractors", strings.Join(c.extractors, ","), "rules,openai", "config file"},
		{"tail-cache-bytes", c.tailCacheBytes, int64(4 << 20), "flag"},
		{"shutdown-timeout", c.shutdownTimeout, time.Minute, "flag"},
		{"upstream", c.upstream, "http://127.0.0.1:9/v1", "CHATMEM_UPSTREAM_URL"},
		{"max-messages", c.maxMessages, 1000, "default"},
		{"idle-timeout", c.idleTimeout, 2 * time.Minute, "default"},
	}
	for _, tt := range tests {
		if tt.got != tt.want || cmd.From(tt.name) != tt.from {
			t.Errorf("%s = %v from %s, want %v from %s", tt.name, tt.got, cmd.From(tt.name), tt.want, tt.from)
		}
	}

	// A key no command knows is a typo; purge's older-than above is not.
	if err := os.WriteFile(cfg, []byte(`{"adr":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var d serveConfig
	if err := parseSettings(d.command(), nil, io.Discard); err == nil || !strings.Contains(err.Error(), `unknown key "adr"`) {
		t.Errorf("a typo in the config file: error = %v", err)
	}
}

// TestServeProxySettings: the chat proxy's settings reach its Upstream.
func TestServeProxySettings(t *testing.T) {
	t.Setenv("CHATMEM_UPSTREAM_URL", "http://127.0.0.1:9/v1")
	for _, tt := range []struct {
		env  map[string]string
		want httpapi.Upstream
	}{
		{nil, httpapi.Upstream{OnDiverge: httpapi.DivergeRewind, Unnamed: httpapi.UnnamedForward, Auth: httpapi.UpstreamAuthServer}},
		{map[string]string{"CHATMEM_PROXY_ON_DIVERGE": "fork", "CHATMEM_PROXY_UNNAMED": "refuse", "CHATMEM_PROXY_DERIVE_CONVERSATION": "true", "CHATMEM_UPSTREAM_AUTH": "passthrough"},
			httpapi.Upstream{OnDiverge: httpapi.DivergeFork, Unnamed: httpapi.UnnamedRefuse, DeriveConversation: true, Auth: httpapi.UpstreamAuthPassthrough}},
	} {
		for k, v := range tt.env {
			t.Setenv(k, v)
		}
		var c serveConfig
		if err := parseSettings(c.command(), nil, io.Discard); err != nil {
			t.Fatal(err)
		}
		up, err := c.upstreamConfig()
		if err != nil {
			t.Fatal(err)
		}
		if up.OnDiverge != tt.want.OnDiverge || up.Unnamed != tt.want.Unnamed || up.DeriveConversation != tt.want.DeriveConversation || up.Auth != tt.want.Auth {
			t.Errorf("%v: OnDiverge %q, Unnamed %q, DeriveConversation %v, Auth %q; want %q, %q, %v, %q", tt.env,
				up.OnDiverge, up.Unnamed, up.DeriveConversation, up.Auth, tt.want.OnDiverge, tt.want.Unnamed, tt.want.DeriveConversation, tt.want.Auth)
		}
		for k := range tt.env {
			os.Unsetenv(k)
		}
	}
}

// TestServeTenantUpstreams: --tenant-upstreams names tenants' own
// upstreams, their keys read from the environment or a file, and refuses
// a file it cannot use, naming what is wrong.
func TestServeTenantUpstreams(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "initech.key")
	if err := os.WriteFile(keyFile, []byte("sk-initech\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GLOBEX_UPSTREAM_KEY", "sk-globex")
	write := func(body string) string {
		p := filepath.Join(dir, "upstreams.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := serveConfig{proxyPolicy: "token_budget", proxyBudget: 4000}
	c.tenantUpstreamsFile = write(`{"globex": {"url": "https://llm.globex.example/v1", "key_env": "GLOBEX_UPSTREAM_KEY"},
		"initech": {"url": "https://api.anthropic.com", "kind": "anthropic", "key_file": "` + keyFile + `", "model": "claude-sonnet-4-5"},
		"umbrella": {"url": "https://api.openai.com/v1", "kind": "openai-responses", "key_env": "GLOBEX_UPSTREAM_KEY"}}`)
	ups, err := c.tenantUpstreams()
	if err != nil {
		t.Fatal(err)
	}
	if g := ups["globex"]; g.BaseURL != "https://llm.globex.example/v1" || g.APIKey != "sk-globex" || g.HTTPClient != nil {
		t.Errorf("globex = %+v", g)
	}
	if i := ups["initech"]; i.APIKey != "sk-initech" || i.HTTPClient == nil {
		t.Errorf("initech = %+v, want its key from the file and the Anthropic transport", i)
	}
	if u := ups["umbrella"]; u.APIKey != "sk-globex" || u.HTTPClient == nil {
		t.Errorf("umbrella = %+v, want its key and the Responses transport", u)
	}
	for body, want := range map[string]string{
		`{"globex": {"url": "https://x/v1", "key": "sk-inline"}}`:               `unknown field "key"`,
		`{"globex": {"url": "https://x/v1", "key_env": "NOT_SET_ANYWHERE"}}`:    "NOT_SET_ANYWHERE is not set",
		`{"globex": {"url": "https://x/v1", "key_env": "A", "key_file": "/b"}}`: "exclude each other",
		`{"globex": {"kind": "openai"}}`:                                        "no url",
		`{"globex": {"url": "https://x/v1", "kind": "gemini"}}`:                 `unknown upstream-kind "gemini"`,
		`["globex"]`: "want {",
	} {
		c.tenantUpstreamsFile = write(body)
		if _, err := c.tenantUpstreams(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to say %q", body, err, want)
		}
	}
}

// TestServeRefusesBadConfig: a bad setting exits 2 with one line naming it
// and what it accepts, and the help to read; the server does not start.
func TestServeRefusesBadConfig(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		msg  string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, nil, "without API keys"},
		{[]string{"--max-messages", "many"}, nil, `--max-messages: "many" is not a whole number: want a whole number from 1 to 1000000; run chatmem serve --help`},
		{[]string{"--read-timeout", "soon"}, nil, `--read-timeout: "soon" is not a duration: want a duration such as 0, 90s, 15m, 2h or 30d; run chatmem serve --help`},
		{[]string{"--shutdown-timeout", "0"}, nil, "--shutdown-timeout: 0 is out of range: want a positive duration"},
		{[]string{"--max-body-bytes", "4MB!"}, nil, `--max-body-bytes: "4MB!" is not a size: want a size from 1 to 1GiB such as 4MiB`},
		{[]string{"--tail-cache-bytes", "-1"}, nil, "--tail-cache-bytes: -1 is out of range"},
		{[]string{"--rate-limit", "fast"}, nil, `--rate-limit: "fast" is not a number`},
		{[]string{"--rate-burst", "-1"}, nil, "--rate-burst: -1 is out of range"},
		{[]string{"--insecure=maybe"}, nil, `--insecure: "maybe" is not a boolean: want true or false`},
		{[]string{"--upstream-kind", "gemini"}, nil, `--upstream-kind: "gemini" is unknown: want one of openai, openai-responses, anthropic`},
		{[]string{"--proxy-policy", "everything"}, nil, `--proxy-policy: "everything" is unknown`},
		{[]string{"--upstream", "http://127.0.0.1:9/v1", "--upstream-key", "sk-x", "--upstream-auth", "passthrough"}, nil, "passthrough auth exclude each other"},
		{[]string{"--proxy-on-diverge", "merge"}, nil, `--proxy-on-diverge: "merge" is unknown: want one of rewind, refuse, fork`},
		{[]string{"--tokenizer", "gpt2"}, nil, `--tokenizer: unknown tokenizer "gpt2"`},
		{[]string{"--summarizer", "magic"}, nil, `--summarizer: "magic" is unknown: want one of offline, openai, anthropic, none`},
		{[]string{"--extractors", "rules,magic"}, nil, `--extractors: "magic" is unknown`},
		{[]string{"--log-level", "loud"}, nil, `--log-level: "loud" is unknown: want one of debug, info, warn, error`},
		{[]string{"--bogus"}, nil, "serve: unknown flag --bogus; run chatmem serve --help"},
		{[]string{"--addr"}, nil, "--addr needs a value"},
		{[]string{"extra"}, nil, "serve takes no arguments"},
		{nil, map[string]string{"CHATMEM_WORKERS": "0"}, "CHATMEM_WORKERS: 0 is out of range: want a whole number from 1 to 1024"},
		{nil, map[string]string{"CHATMEM_INSECURE": "yes please"}, `CHATMEM_INSECURE: "yes please" is not a boolean`},
		{[]string{"--summarizer", "openai"}, nil, "summarizer: "}, // no model named
		{[]string{"--api-keys", "nocolon"}, nil, "API key 1"},
		{[]string{"--cors-origins", "*"}, nil, `CORS origin "*": a wildcard`},
		{nil, map[string]string{"CHATMEM_CORS_ORIGINS": "app.example.com"}, `CORS origin "app.example.com"`},
		{[]string{"--allowed-hosts", "http://chatmem.internal"}, nil, `allowed host "http://chatmem.internal"`},
		{nil, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `OTLP protocol "http/json": want http/protobuf or grpc`},
		{nil, map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin"`},
		{nil, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_PROPAGATORS": "tracecontext,b3"}, `OTEL_PROPAGATORS: propagator "b3"`},
	}
	for _, tt := range tests {
		for k, v := range tt.env {
			t.Setenv(k, v)
		}
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()}, tt.args...)
		out, errOut, code := runCLI(t, "", args...)
		if code != 2 || !strings.Contains(errOut, tt.msg) || out != "" {
			t.Errorf("serve %v %v: exit %d, stdout %q, stderr %q; want exit 2 mentioning %q", tt.args, tt.env, code, out, errOut, tt.msg)
		}
		if strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("serve %v %v: stderr has more than one line: %q", tt.args, tt.env, errOut)
		}
		for k := range tt.env {
			os.Unsetenv(k)
		}
	}
}

// serveWithLog runs `chatmem serve` with args until the test ends and
// returns its base URL and its log so far (read it after the server
// listens).
func serveWithLog(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var log syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve"}, args...), nil, pw, &log)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen line: %v; log:\n%s", err, log.String())
	}
	go io.Copy(io.Discard, pr)
	return strings.TrimSpace(strings.TrimPrefix(line, "chatmem listening on ")), &log
}

// syncBuffer is a bytes.Buffer safe for a server's log and a test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeInsecure: --insecure is a plain boolean flag, the flag after it
// still a flag; beyond loopback without keys the server starts and warns,
// naming the address it listens on.
func TestServeInsecure(t *testing.T) {
	t.Setenv("CHATMEM_API_KEYS", "")
	base, log := serveWithLog(t, "--insecure", "--addr", "127.0.0.1:0", "--store", "memory:")
	if !strings.HasPrefix(base, "http://127.0.0.1:") || strings.Contains(log.String(), "beyond loopback") {
		t.Errorf("serve --insecure on loopback: %s, log %q; want no warning about loopback", base, log.String())
	}

	base, log = serveWithLog(t, "--insecure", "--addr", "0.0.0.0:0", "--store", "memory:", "--log-format", "json")
	addr := strings.TrimPrefix(base, "http://")
	var warned bool
	for _, l := range strings.Split(log.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && rec["level"] == "WARN" && rec["addr"] == addr &&
			strings.Contains(rec["msg"].(string), "listening on "+addr+" beyond loopback without API keys") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("serve --insecure --addr 0.0.0.0:0: no warning naming %s in the log:\n%s", addr, log.String())
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestServeBrowserSettings: a `chatmem serve` without API keys refuses a
// Host that is not its own, on the REST API and on /mcp alike, and serves
// CHATMEM_ALLOWED_HOSTS' names on both (the MCP SDK's own check knew only
// loopback names); CHATMEM_CORS_ORIGINS' origin gets its preflight.
func TestServeBrowserSettings(t *testing.T) {
	t.Setenv("CHATMEM_API_KEYS", "")
	t.Setenv("CHATMEM_ALLOWED_HOSTS", "chatmem.internal")
	t.Setenv("CHATMEM_CORS_ORIGINS", "https://app.example.com")
	base, _ := serveWithLog(t, "--addr", "127.0.0.1:0", "--store", "memory:")
	send := func(method, path, host string, header map[string]string, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	mcpHeader := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tc := range []struct {
		method, path, host string
		header             map[string]string
		body               string
		want               int
	}{
		{"GET", "/v1/conversations", "evil.example", nil, "", http.StatusForbidden},
		{"POST", "/mcp", "evil.example", mcpHeader, list, http.StatusForbidden},
		{"GET", "/v1/conversations", "chatmem.internal:8080", nil, "", http.StatusOK},
		{"POST", "/mcp", "chatmem.internal:8080", mcpHeader, list, http.StatusOK},
		{"POST", "/v1/conversations/c/messages", "localhost", map[string]string{"Content-Type": "text/plain"}, `{"messages":[{"role":"user","content":"hi"}]}`, http.StatusUnsupportedMediaType},
		{"POST", "/v1/conversations/c/messages", "localhost", map[string]string{"Origin": "https://evil.example", "Content-Type": "application/json"}, `{"messages":[{"role":"user","content":"hi"}]}`, http.StatusForbidden},
		{"OPTIONS", "/v1/conversations/c/messages", "localhost", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"}, "", http.StatusNoContent},
	} {
		resp := send(tc.method, tc.path, tc.host, tc.header, tc.body)
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s, Host %s, %v: status %d, want %d", tc.method, tc.path, tc.host, tc.header, resp.StatusCode, tc.want)
		}
		if tc.method == "OPTIONS" && resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
			t.Errorf("preflight: Access-Control-Allow-Origin %q", resp.Header.Get("Access-Control-Allow-Origin"))
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

	acme := client.New(base, "k1", nil)
	if _, err := acme.Append(ctx, "kavya", seed.History(), client.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := acme.Context(ctx, "kavya", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40})
	if err != nil || len(w.Messages) != 3 || w.Tokens != 36 {
		t.Fatalf("context at 40 = %d messages, %d tokens, %v; want 3, 36", len(w.Messages), w.Tokens, err)
	}
	globex := client.New(base, "k2", nil)
	if _, err := globex.Context(ctx, "kavya", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 40}); !errors.Is(err, chatmem.ErrNotFound) {
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

// TestServeStartupLog: the log says which store is open (the SQLite file's
// path; PostgreSQL's host, port and database, never the password) and
// whether the proxy, MCP, the inspector and OpenTelemetry tracing are on.
func TestServeStartupLog(t *testing.T) {
	dir := t.TempDir()
	_, log := serveWithLog(t, "--addr", "127.0.0.1:0", "--data-dir", dir)
	line := logLine(t, log.String(), "chatmem serving")
	abs, _ := filepath.Abs(filepath.Join(dir, "chatmem.db"))
	for _, want := range []string{"store=sqlite:" + abs + " ", `proxy="off (no --upstream)"`, "mcp=http://127.0.0.1:", "/mcp ", "inspector=http://127.0.0.1:",
		`otel="off (no OTEL_TRACES_EXPORTER or OTLP endpoint set)"`} {
		if !strings.Contains(line, want) {
			t.Errorf("startup log %q lacks %q", line, want)
		}
	}

	pg, err := url.Parse(testenv.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	pg.User = url.UserPassword(pg.User.Username(), "hunter2")
	q := pg.Query()
	q.Set("schema", testenv.PostgresSchema(t, "chatmem_cli_log_"))
	pg.RawQuery = q.Encode()
	_, log = serveWithLog(t, "--addr", "127.0.0.1:0", "--store", pg.String(), "--upstream", "http://user:s3cret@127.0.0.1:9/v1")
	line = logLine(t, log.String(), "chatmem serving")
	for _, want := range []string{"store=postgres://" + pg.Host + pg.Path + " ", `proxy="openai http://127.0.0.1:9/v1"`} {
		if !strings.Contains(line, want) {
			t.Errorf("startup log %q lacks %q", line, want)
		}
	}
	if strings.Contains(log.String(), "hunter2") || strings.Contains(log.String(), "s3cret") {
		t.Errorf("the log shows a password:\n%s", log.String())
	}
}

// logLine returns the log's line holding msg.
func logLine(t *testing.T, log, msg string) string {
	t.Helper()
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, msg) {
			return l
		}
	}
	t.Fatalf("no %q in the log:\n%s", msg, log)
	return ""
}

// TestServeUnreachableRedis: a Redis store that cannot be reached is one
// line, not go-redis's dial retries ahead of it: those go to the server's
// log at debug level.
func TestServeUnreachableRedis(t *testing.T) {
	out, errOut, code := runCLIFor(t, time.Minute, "serve", "--addr", "127.0.0.1:0", "--store", "redis://127.0.0.1:1")
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "chatmem: redis: ping: ") {
		t.Errorf("serve --store redis://127.0.0.1:1: exit %d, stdout %q, stderr %q; want one line", code, out, errOut)
	}
	_, errOut, _ = runCLIFor(t, time.Minute, "serve", "--addr", "127.0.0.1:0", "--store", "redis://127.0.0.1:1", "--log-level", "debug")
	if !strings.Contains(errOut, `level=DEBUG msg="redis: connection pool: failed to dial`) {
		t.Errorf("serve --log-level debug: go-redis's dial errors are not in the log:\n%s", errOut)
	}
}

// TestMissingPostgresDatabase: PostgreSQL's "database does not exist"
// says how to create it.
func TestMissingPostgresDatabase(t *testing.T) {
	pg, err := url.Parse(testenv.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	pg.Path = "/chatmem_cli_no_such_db"
	_, errOut, code := runCLIFor(t, time.Minute, "serve", "--addr", "127.0.0.1:0", "--store", pg.String())
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, `database "chatmem_cli_no_such_db" does not exist`) ||
		!strings.Contains(errOut, "createdb chatmem_cli_no_such_db, or CREATE DATABASE chatmem_cli_no_such_db;") {
		t.Errorf("serve --store %s: exit %d, stderr %q; want one line saying to create the database", pg, code, errOut)
	}
}

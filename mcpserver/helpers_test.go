package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/mcpserver"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// The HTTP tests' two tenants and their keys.
const (
	acmeKey   = "acme-key-1"
	globexKey = "globex-key-2"
)

func newMemory(t testing.TB) *chatmem.Memory {
	t.Helper()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "chatmem-test", Version: "v0"}, nil)
}

// connectInMemory connects the SDK's client to a tenant's server over
// in-memory pipes, the server on the package's IOTransport (what `chatmem
// mcp` serves stdio with), so every message is screened as on stdio.
func connectInMemory(t testing.TB, mem *chatmem.Memory, tenant string) *mcp.ClientSession {
	t.Helper()
	srv, err := mcpserver.New(mem, tenant, mcpserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	ctx := context.Background()
	ss, err := srv.Connect(ctx, &mcpserver.IOTransport{Reader: toServer, Writer: fromServer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := newClient().Connect(ctx, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// httpEnv is a REST API server with /mcp wired in as `chatmem serve` wires
// it, with two tenants' keys.
type httpEnv struct {
	url string
	mem *chatmem.Memory
}

func newHTTPEnv(t testing.TB, opts httpapi.Options) *httpEnv {
	t.Helper()
	mem := newMemory(t)
	keys, err := httpapi.ParseKeys("acme:" + acmeKey + ",globex:" + globexKey)
	if err != nil {
		t.Fatal(err)
	}
	opts.Keys = keys
	opts.MCP = mcpserver.NewHTTP(mem, mcpserver.HTTPOptions{MaxBodyBytes: opts.Limits.MaxBodyBytes, AnyHost: true}).Handler
	api, err := httpapi.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	return &httpEnv{url: ts.URL, mem: mem}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connect connects the SDK's client to /mcp over Streamable HTTP with key.
func (e *httpEnv) connect(t testing.TB, key string) *mcp.ClientSession {
	t.Helper()
	cs, err := newClient().Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   e.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool, failing the test on a protocol error, and decodes its
// structured content into out (when the call succeeded and out is not nil).
func call(t testing.TB, cs *mcp.ClientSession, name string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	if !res.IsError && out != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
	return res
}

// text is a result's text content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mustOK calls a tool that must succeed.
func mustOK(t testing.TB, cs *mcp.ClientSession, name string, args any, out any) *mcp.CallToolResult {
	t.Helper()
	res := call(t, cs, name, args, out)
	if res.IsError {
		t.Fatalf("%s(%v) is an error: %s", name, args, text(res))
	}
	if res.StructuredContent == nil {
		t.Fatalf("%s: no structured content", name)
	}
	if text(res) == "" {
		t.Fatalf("%s: no text", name)
	}
	return res
}

// mustFail calls a tool that must answer a tool error whose text holds
// want.
func mustFail(t testing.TB, cs *mcp.ClientSession, name string, args any, want string) {
	t.Helper()
	res := call(t, cs, name, args, nil)
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded, want an error holding %q", name, args, want)
	}
	if got := text(res); !strings.Contains(got, want) {
		t.Errorf("%s(%v) error = %q, want it to hold %q", name, args, got, want)
	}
}

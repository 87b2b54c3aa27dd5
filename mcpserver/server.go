// Package mcpserver serves chatmem's memory to agents over the Model Context
// Protocol (MCP), with the official Go SDK: tools to append messages, get
// the context window, search, read and write facts, list and delete
// conversations, and each conversation as a resource. One server serves one
// tenant: the tenant comes from the caller's credential (the API key of the
// HTTP request, or the operator's --tenant for stdio), never from a tool's
// arguments.
package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
)

// Options configure a server. The zero value means the defaults.
type Options struct {
	// Logger receives the details of internal errors (the tool result
	// says only what class of failure it was). Nil: discarded.
	Logger *slog.Logger
	// Version is reported to clients as the server's version. Empty:
	// "dev".
	Version string
	// MaxResourceMessages bounds the messages a conversation's resource
	// holds: the newest ones. Zero means DefaultMaxResourceMessages.
	MaxResourceMessages int
	// Tracer, if set, traces each request the server receives as a server
	// span ("tools/call get_context", see traceRequests), continuing the
	// trace context the client put in the request's _meta. chatmem mcp
	// sets it for stdio; over HTTP the request's own server span covers
	// the call, and HTTPOptions leave it unset.
	Tracer chatmem.Tracer
}

// DefaultMaxResourceMessages is the default of Options.MaxResourceMessages.
const DefaultMaxResourceMessages = 10000

// instructions tell the client's model what the server is for.
const instructions = `chatmem is conversation memory. Store every message of a conversation with append_messages,
and before each model call take what to send from get_context: it keeps the newest messages that fit a token
budget (and, with facts=true, the known facts about the user), so cost stays bounded however long the
conversation gets. Use search_memory to find something said long ago, and set_fact/get_facts for durable
details (name, order numbers, preferences). Conversations are also resources: chatmem://conversations/{id}.`

// New returns an MCP server over mem for one tenant. It wraps
// chatmem.ErrInvalid for a bad tenant or options.
func New(mem *chatmem.Memory, tenant string, opts Options) (*mcp.Server, error) {
	if mem == nil {
		return nil, fmt.Errorf("%w: mcpserver.New needs a Memory", chatmem.ErrInvalid)
	}
	if err := chatmem.ValidateID(tenant); err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	if opts.MaxResourceMessages < 0 {
		return nil, fmt.Errorf("%w: MaxResourceMessages must not be negative", chatmem.ErrInvalid)
	}
	if opts.MaxResourceMessages == 0 {
		opts.MaxResourceMessages = DefaultMaxResourceMessages
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	t := &tools{mem: mem, tenant: tenant, log: opts.Logger, maxResource: opts.MaxResourceMessages}
	s := mcp.NewServer(&mcp.Implementation{Name: "chatmem", Title: "chatmem conversation memory", Version: opts.Version},
		&mcp.ServerOptions{
			Instructions: instructions, Logger: opts.Logger, Capabilities: &mcp.ServerCapabilities{},
			// A tenant's conversations are its own: no shared cache may keep
			// them, and a list or a read is stale at once (TTL 0).
			SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope, c.TTLMs = "private", 0 },
		})
	t.register(s)
	if opts.Tracer != nil {
		s.AddReceivingMiddleware(traceRequests(opts.Tracer, tenant))
	}
	return s, nil
}

// traceRequests traces each request received as a server span named for
// its method and, for a tool call, the tool: the attributes of the
// OpenTelemetry conventions for MCP (mcp.method.name, gen_ai.tool.name,
// network.transport "pipe") and chatmem.tenant. A tool that answered
// with an error result marks its span with error.type "tool_error". The
// span continues the W3C trace context (traceparent, tracestate) the
// client put in the request's _meta, as the MCP specification suggests.
func traceRequests(tr chatmem.Tracer, tenant string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			name := method
			attrs := []chatmem.Attr{{Key: "mcp.method.name", Value: method}, {Key: "network.transport", Value: "pipe"}, {Key: "chatmem.tenant", Value: tenant}}
			var meta map[string]any
			// A request without params (ping, notifications/initialized)
			// carries a typed nil: GetMeta would dereference it.
			if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
				meta = p.GetMeta()
				if call, ok := p.(*mcp.CallToolParamsRaw); ok && call != nil {
					name += " " + call.Name
					attrs = append(attrs, chatmem.Attr{Key: "gen_ai.tool.name", Value: call.Name}, chatmem.Attr{Key: "gen_ai.operation.name", Value: "execute_tool"})
				}
			}
			if len(meta) > 0 {
				ctx = tr.Extract(ctx, func(k string) string { v, _ := meta[k].(string); return v })
			}
			ctx, sp := tr.Start(ctx, name, chatmem.SpanServer, attrs...)
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.CallToolResult); ok && r != nil && r.IsError {
				sp.SetAttributes(chatmem.Attr{Key: "error.type", Value: "tool_error"})
			}
			sp.End(err)
			return res, err
		}
	}
}

// HTTPOptions configure an HTTP. The zero value means the defaults.
type HTTPOptions struct {
	Options
	// MaxBodyBytes bounds a request body (413 over it). Zero means the
	// SDK's default (mcp.DefaultMaxRequestBodyBytes).
	MaxBodyBytes int64
	// AnyHost turns off the SDK's DNS-rebinding protection, which refuses
	// (403) a request that reached a loopback address with a Host header
	// that is not a loopback name, as a request through a reverse proxy on
	// the same machine does. Turn it off only where every request must
	// carry an API key anyway (a page that rebinds a name to 127.0.0.1
	// does not have the key), or where the caller checks the Host itself:
	// chatmem serve does, in httpapi, against the operator's names too.
	AnyHost bool
}

// HTTP serves MCP over Streamable HTTP, one server per tenant, each built
// on first use and kept (tenants are as many as the configured API keys).
// It is stateless: every request stands alone, with no session to find,
// so any number of replicas can serve one client, and a session ID can
// never carry one tenant's requests into another's server. It is safe for
// concurrent use.
type HTTP struct {
	mem  *chatmem.Memory
	opts HTTPOptions
	mu   sync.Mutex
	by   map[string]http.Handler
}

// NewHTTP returns an HTTP over mem.
func NewHTTP(mem *chatmem.Memory, opts HTTPOptions) *HTTP {
	return &HTTP{mem: mem, opts: opts, by: make(map[string]http.Handler)}
}

// Handler returns the handler of tenant's MCP endpoint. The caller has
// authenticated the request as the tenant's: Handler does no
// authentication of its own.
func (h *HTTP) Handler(tenant string) http.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hh, ok := h.by[tenant]; ok {
		return hh
	}
	srv, err := New(h.mem, tenant, h.opts.Options)
	if err != nil {
		// A tenant the caller authenticated is a valid ID; this is a bug
		// of the caller's, answered without keeping anything.
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "mcp: "+err.Error(), http.StatusInternalServerError)
		})
	}
	var hh http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:                  true,
		Logger:                     h.opts.Logger,
		MaxRequestBodyBytes:        h.opts.MaxBodyBytes,
		DisableLocalhostProtection: h.opts.AnyHost,
	})
	limit := h.opts.MaxBodyBytes
	if limit == 0 {
		limit = mcp.DefaultMaxRequestBodyBytes
	}
	log := h.opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hh = screenHTTP(hh, limit, log)
	h.by[tenant] = hh
	return hh
}

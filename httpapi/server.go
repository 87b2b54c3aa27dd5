package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/buildinfo"
)

// Limits bound what one request may carry. The zero value of each field
// means its default; a request over a limit gets 413 too_large.
type Limits struct {
	// MaxBodyBytes bounds a request body. Default 4 MiB.
	MaxBodyBytes int64
	// MaxMessages bounds the messages of one append. Default 1000.
	MaxMessages int
	// MaxContentBytes bounds one message's content. Default 256 KiB. It
	// applies before the Memory's own limits, which may be tighter. The
	// other parts of a message (name, metadata, tool calls) are bounded
	// by chatmem.DefaultLimits here and by the Memory's limits.
	MaxContentBytes int
	// MaxHeaderBytes bounds the request line and headers: over it, 431
	// header_too_large. Default 64 KiB. It takes effect below the
	// http.Server's own MaxHeaderBytes (Go's default 1 MiB), over which
	// net/http answers a plain-text 431 itself, before any handler runs.
	MaxHeaderBytes int
	// MaxImportBytes bounds the body of POST /v1/import, which streams.
	// Default 1 GiB.
	MaxImportBytes int64
}

// The limits a zero Limits stands for.
const (
	DefaultMaxBodyBytes    = 4 << 20
	DefaultMaxMessages     = 1000
	DefaultMaxContentBytes = 256 << 10
	DefaultMaxHeaderBytes  = 64 << 10
	DefaultMaxImportBytes  = 1 << 30
)

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxMessages == 0 {
		l.MaxMessages = DefaultMaxMessages
	}
	if l.MaxContentBytes == 0 {
		l.MaxContentBytes = DefaultMaxContentBytes
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxImportBytes == 0 {
		l.MaxImportBytes = DefaultMaxImportBytes
	}
	return l
}

// Options configure a Server. The zero value serves without authentication
// and with the default limits.
type Options struct {
	// Keys are the API keys. Empty: no authentication, and every request is
	// tenant chatmem.DefaultTenant.
	Keys []Key
	// Limits bound request sizes.
	Limits Limits
	// Logger receives one line per request and the details of internal
	// errors. Nil: discarded.
	Logger *slog.Logger
	// Registerer receives the server's metrics. Nil: a private registry,
	// which also gets the Go and process collectors.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves. Nil: the Registerer if it is a
	// Gatherer (a *prometheus.Registry is), else the private registry.
	Gatherer prometheus.Gatherer
	// RateLimit bounds each tenant's requests to the API. The zero value
	// means no limit.
	RateLimit RateLimit
	// Upstream is the model server POST /v1/chat/completions forwards to.
	// Nil: that route answers 503 unavailable.
	Upstream *Upstream
	// TenantUpstreams are the upstreams of tenants that have their own
	// (their own model server, or their own key for it); the others use
	// Upstream. Upstream.Auth is the server's, since the chatmem key is
	// read before the tenant is known: an entry may not set it.
	TenantUpstreams map[string]Upstream
	// MCP, if set, serves the Model Context Protocol at /mcp: each request
	// is authenticated as the API's are (its tenant is the key's), counted
	// against the tenant's rate limit and its body bounded by
	// Limits.MaxBodyBytes, then handed to the handler MCP returns for the
	// tenant. Nil: /mcp is not served. (The MCP server is a package of its
	// own, wired in by cmd, so this one does not depend on it.)
	MCP func(tenant string) http.Handler
	// AllowedHosts are host names, besides localhost and IP addresses,
	// that requests may give as their Host (any port): without Keys, a
	// request under another name is refused (403), since a web page can
	// make a name of its own resolve to the server's address (DNS
	// rebinding). A page's Origin under one of them (or localhost, a
	// loopback address or the address the connection reached) is not
	// another site's either.
	AllowedHosts []string
	// CORSOrigins are the origins (scheme://host[:port]) of the browser
	// apps that may call the API from their pages: their CORS preflights
	// are answered, and their requests' answers carry
	// Access-Control-Allow-Origin. A request with any other Origin of
	// another site is refused (403), with keys or without.
	CORSOrigins []string
	// Tracer, if set, traces each request (a server span continuing the
	// client's W3C trace context) and each call to the upstream (a client
	// span with the GenAI conventions' attributes, whose trace context the
	// upstream gets). Give the Memory the same Tracer for its spans
	// (context assembly, store calls) to join the request's. Nil traces
	// nothing.
	Tracer chatmem.Tracer
	// NoReceipts keeps the chat proxy from storing a receipt with each
	// reply (chatmem.Receipt: what the window held, what the upstream
	// reported, what a replay needs). Receipts are kept by default.
	NoReceipts bool
}

// Server is the REST API over one Memory. It is an http.Handler, safe for
// concurrent use; it starts no goroutines, so it needs no Close (the
// Memory's worker is its owner's to start and stop).
type Server struct {
	mem     *chatmem.Memory
	keys    []keyDigest
	limits  Limits
	log     *slog.Logger
	metrics *metrics
	rate    *rateLimiter // nil: no limit
	mux     *http.ServeMux
	up      *upstream            // nil: no chat proxy
	ups     map[string]*upstream // tenants with upstreams of their own
	build   buildinfo.Info
	browser *browserRules
	tracer  chatmem.Tracer // nil: no tracing
	// receipts: the chat proxy stores a receipt with each reply.
	receipts bool
}

// New returns a Server over mem. It wraps chatmem.ErrInvalid for bad keys
// or limits, and fails if the metrics cannot be registered (a Registerer
// that already holds another Server's).
func New(mem *chatmem.Memory, opts Options) (*Server, error) {
	if mem == nil {
		return nil, fmt.Errorf("%w: httpapi.New needs a Memory", chatmem.ErrInvalid)
	}
	keys, err := digestKeys(opts.Keys)
	if err != nil {
		return nil, err
	}
	l := opts.Limits
	if l.MaxBodyBytes < 0 || l.MaxMessages < 0 || l.MaxContentBytes < 0 || l.MaxHeaderBytes < 0 {
		return nil, fmt.Errorf("%w: httpapi limits must not be negative", chatmem.ErrInvalid)
	}
	if opts.RateLimit.PerSecond < 0 || opts.RateLimit.Burst < 0 {
		return nil, fmt.Errorf("%w: httpapi rate limit must not be negative", chatmem.ErrInvalid)
	}
	browser, err := newBrowserRules(len(keys) == 0, opts.AllowedHosts, opts.CORSOrigins)
	if err != nil {
		return nil, err
	}
	s := &Server{mem: mem, keys: keys, limits: l.withDefaults(), log: opts.Logger, mux: http.NewServeMux(), rate: newRateLimiter(opts.RateLimit, time.Now), build: buildinfo.Read(), browser: browser, tracer: opts.Tracer, receipts: !opts.NoReceipts}
	if opts.Upstream != nil {
		if s.up, err = newUpstream(*opts.Upstream); err != nil {
			return nil, err
		}
	}
	if s.ups, err = tenantUpstreams(opts.TenantUpstreams, s.up); err != nil {
		return nil, err
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.metrics, err = newMetrics(mem, s.build, opts.Registerer, opts.Gatherer); err != nil {
		return nil, err
	}

	allowed := make(map[string][]string) // path -> methods
	for _, rt := range routes {
		s.mux.Handle(rt.Method+" "+rt.Pattern, s.handler(rt))
		allowed[rt.Pattern] = append(allowed[rt.Pattern], rt.Method)
	}
	// A known path asked with another method: the method-less pattern is
	// less specific than the routes, so it only gets what they leave.
	for p, methods := range allowed {
		if slices.Contains(methods, http.MethodGet) {
			methods = append(methods, http.MethodHead)
		}
		allow := strings.Join(methods, ", ")
		s.mux.Handle(p, s.handler(route{Pattern: p, handle: func(_ *Server, c *call) error {
			c.w.Header().Set("Allow", allow)
			return fmt.Errorf("%w: %s %s; allowed: %s", ErrMethodNotAllowed, c.r.Method, p, allow)
		}}))
	}
	if opts.MCP != nil {
		s.mux.Handle(mcpPattern, s.handler(route{Pattern: mcpPattern, Auth: true, handle: func(s *Server, c *call) error {
			c.r.Body = http.MaxBytesReader(c.w, c.r.Body, s.limits.MaxBodyBytes)
			opts.MCP(c.tenant).ServeHTTP(c.w, c.r)
			return nil
		}}))
	}
	s.mux.HandleFunc("/v1/", s.openAINotFound)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, fmt.Errorf("%w: no route for %s %s", chatmem.ErrNotFound, r.Method, r.URL.Path))
	})
	return s, nil
}

// mcpPattern is where Options.MCP is served, every method (the protocol's
// POST, and GET and DELETE, which a stateless server answers with 405).
const mcpPattern = "/mcp"

// reqInfo is what the request's log line and metrics need from the
// handlers; ServeHTTP puts it in the request's context.
type reqInfo struct {
	id     string
	route  string
	tenant string
	code   string // the error code, if the request failed
	err    error  // the error, logged for 5xx only
}

type infoKey struct{}

func infoOf(ctx context.Context) *reqInfo {
	if i, ok := ctx.Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// ServeHTTP serves one request: it assigns the request ID, refuses paths
// that are not canonical, dispatches on the routes, and then writes the
// request's log line and metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &reqInfo{id: requestID(r.Header.Get("X-Request-Id")), route: routeUnmatched}
	w.Header().Set("X-Request-Id", info.id)
	sw := &statusWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, info))
	r, span := s.startRequest(r)

	s.dispatch(sw, r)

	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	if span != nil {
		endRequest(span, r, info, status)
	}
	d := time.Since(start)
	s.metrics.observeRequest(info.route, r.Method, status, d)
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", info.route),
		slog.Int("status", status),
		slog.Duration("duration", d),
		slog.String("tenant", info.tenant),
		slog.String("request_id", info.id),
	}
	level := slog.LevelInfo
	if info.code != "" {
		attrs = append(attrs, slog.String("code", info.code))
	}
	if status >= 500 {
		level = slog.LevelError
		if info.err != nil {
			attrs = append(attrs, slog.String("error", info.err.Error()))
		}
	}
	s.log.LogAttrs(r.Context(), level, "http request", attrs...)
}

// dispatch refuses headers over the limit, paths that are not canonical
// and (without API keys) a Host that is not the server's, and hands the
// others to the mux. A panicking handler is answered with a 500 (if nothing was written
// yet) and its value logged, so the request still gets its log line and
// metrics; http.ErrAbortHandler goes on up, as net/http expects.
func (s *Server) dispatch(w *statusWriter, r *http.Request) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler {
			panic(p)
		}
		err := fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		if w.status == 0 {
			s.writeError(w, r, err)
		} else {
			infoOf(r.Context()).err = err
			w.status = http.StatusInternalServerError // for the log line and metrics
		}
	}()
	if n := headerBytes(r); n > s.limits.MaxHeaderBytes {
		s.writeError(w, r, fmt.Errorf("%w: request line and headers are %d bytes, over the limit of %d", ErrHeaderTooLarge, n, s.limits.MaxHeaderBytes))
		return
	}
	if !canonical(r.URL.Path) {
		// The mux would redirect to the cleaned path; refusing instead keeps
		// ".." and doubled slashes from ever naming another conversation.
		s.writeError(w, r, fmt.Errorf("%w: path %q is not in canonical form", chatmem.ErrInvalid, r.URL.Path))
		return
	}
	if err := s.browser.checkHost(r); err != nil {
		// Before the mux: under a rebound name, not even a 404 is served.
		if openAIRoute(r.URL.Path) {
			s.writeOpenAIError(w, r, err)
		} else {
			s.writeError(w, r, err)
		}
		return
	}
	s.mux.ServeHTTP(w, r)
}

// headerBytes approximates the size of r's request line and headers as
// they came on the wire.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + len("Host: \r\n") + len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4 // ": " and CRLF
		}
	}
	return n
}

// canonical reports whether p is a clean absolute path: no "." or ".."
// segments, no doubled slashes (a trailing slash is left to the mux).
func canonical(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// requestID returns the client's X-Request-Id if it is sane (1 to 128
// characters from [A-Za-z0-9._:-]), else a new random one.
func requestID(given string) string {
	if len(given) > 0 && len(given) <= 128 {
		ok := true
		for i := 0; i < len(given) && ok; i++ {
			c := given[i]
			ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:-", c) >= 0
		}
		if ok {
			return given
		}
	}
	return rand.Text()
}

// statusWriter records the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// call is one request being handled by a route.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	tenant string
	// up is the tenant's upstream (Options.TenantUpstreams, else
	// Options.Upstream), nil without one.
	up *upstream
}

// key returns the conversation the request's path names, for the caller's
// tenant.
func (c *call) key() (chatmem.Key, error) {
	id := c.r.PathValue("id")
	if err := chatmem.ValidateID(id); err != nil {
		return chatmem.Key{}, fmt.Errorf("conversation id: %w", err)
	}
	return chatmem.Key{Tenant: c.tenant, ID: id}, nil
}

// handler wraps a route: it records the route, answers a configured
// origin's CORS preflight, refuses another site's Origin, authenticates
// (on /v1 routes, when keys are configured), refuses a body that is not
// JSON, and writes the handler's error.
func (s *Server) handler(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		info.route = rt.Pattern
		c := &call{w: w, r: r}
		writeError := s.writeError
		if openAIRoute(rt.Pattern) {
			writeError = s.writeOpenAIError
		}
		s.browser.corsHeaders(w, r)
		if s.browser.preflight(w, r) {
			return
		}
		if err := s.browser.checkOrigin(r); err != nil {
			writeError(w, r, err)
			return
		}
		if rt.Auth {
			w.Header().Set("Cache-Control", "no-store")
			c.tenant = chatmem.DefaultTenant
			if len(s.keys) > 0 {
				tenant, err := s.authenticate(r, rt.Pattern)
				if err != nil {
					writeError(w, r, err)
					return
				}
				c.tenant = tenant
			}
			if wait, ok := s.rate.allow(c.tenant); !ok {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
				writeError(w, r, fmt.Errorf("%w: tenant %s is over %g requests per second; retry after %s", ErrRateLimited, c.tenant, s.rate.perSecond, wait.Round(time.Millisecond)))
				return
			}
			info.tenant = c.tenant
		}
		c.up = s.upstreamFor(c.tenant)
		if err := checkContentType(r, bodyTypes(rt, r)); err != nil {
			writeError(w, r, err)
			return
		}
		if err := rt.handle(s, c); err != nil {
			writeError(w, r, err)
		}
	})
}

// statusClientClosed is logged for requests whose client disconnected
// before the answer (nginx's convention; not a status clients see).
const statusClientClosed = 499

// writeError answers with err's status and code. The message of a 4xx
// tells the client what was wrong with its request; a 5xx says only what
// class of failure it was, and the details go to the log line.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classify(err)
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		// The client went away; nothing failed on this side. 499 is the
		// status proxies log for it; no one reads the body.
		status, code = statusClientClosed, "client_closed_request"
	}
	info := infoOf(r.Context())
	info.code, info.err = code, err
	msg := err.Error()
	switch {
	case status == http.StatusServiceUnavailable:
		msg = "a backend is unavailable; retry later"
	case status >= 500:
		msg = "internal error; the server's log has the details under request " + info.id
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="chatmem"`)
	}
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

// writeJSON writes v as the JSON response body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every type written here marshals; this is a bug, not input.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"response encoding failed"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

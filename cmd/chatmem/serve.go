package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/internal/buildinfo"
	"github.com/chatmem/chatmem/internal/settings"
	"github.com/chatmem/chatmem/mcpserver"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/openai"
	"github.com/chatmem/chatmem/tokenizer"
)

// serveConfig is everything `chatmem serve` can be told.
type serveConfig struct {
	addr, store, dataDir, apiKeys                      string
	insecure                                           bool
	allowedHosts, corsOrigins                          []string
	tokenizer, summarizer                              string
	extractors                                         []string
	summaryTrigger, summaryTarget                      int
	workers                                            int
	tailCacheBytes                                     int64
	logFormat, logLevel                                string
	maxBodyBytes, maxContentBytes                      int64
	maxMessages                                        int
	readHeaderTimeout, readTimeout, writeTimeout       time.Duration
	idleTimeout, shutdownTimeout, sweepInterval        time.Duration
	anthropicKey, anthropicModel, anthropicBase        string
	llmBaseURL, llmModel, llmKey                       string
	rateLimit                                          float64
	rateBurst                                          int
	upstream, upstreamKind, upstreamKey, upstreamModel string
	proxyPolicy, proxyOnDiverge, proxyUnnamed          string
	proxyCache                                         string
	upstreamAuth, tenantUpstreamsFile                  string
	proxyDerive                                        bool
	embedder, embeddingModel                           string
	embeddingDims                                      int
	proxyBudget                                        int
	usageConfig
}

// command is serve's list of settings.
func (c *serveConfig) command() *settings.Command {
	const maxInt32 = 1<<31 - 1
	s := []settings.Setting{
		{Name: "addr", Group: groupServer, Value: settings.String(&c.addr, "127.0.0.1:8080"), Example: "0.0.0.0:8080",
			Help: "address to listen on (host:port)"},
		{Name: "api-keys", Group: groupServer, Value: settings.String(&c.apiKeys, ""), Secret: true, Example: "acme:k1,globex:sha256:HEX",
			Help: "API keys as comma-separated tenant:key pairs (acme:k1,globex:k2); a key written sha256:HEX is stored hashed.\nWithout keys the server serves one tenant, only on loopback"},
		{Name: "insecure", Group: groupServer, Value: settings.Bool(&c.insecure, false), Example: "true",
			Help: "allow an address beyond loopback without API keys (logged as a warning naming the address)"},
		{Name: "allowed-hosts", Group: groupServer, Value: settings.List(&c.allowedHosts, nil), Example: "chatmem.internal,chat.lan",
			Help: "host names, besides localhost, IP addresses and --addr's host, that requests may name in Host (any port):\nwithout API keys another Host is refused (403: DNS rebinding); a page under one of them is not another site"},
		{Name: "cors-origins", Group: groupServer, Value: settings.List(&c.corsOrigins, nil), Example: "https://app.example.com,http://localhost:5173",
			Help: "origins of browser apps that may call the API (scheme://host[:port]): their CORS preflights are answered;\nany other site's Origin is refused (403), with API keys or without"},
		{Name: "read-header-timeout", Group: groupServer, Value: settings.Duration(&c.readHeaderTimeout, 5*time.Second, false), Help: "time to read request headers (0: the read timeout)"},
		{Name: "read-timeout", Group: groupServer, Value: settings.Duration(&c.readTimeout, 30*time.Second, false), Help: "time to read a request (0: none)"},
		{Name: "write-timeout", Group: groupServer, Value: settings.Duration(&c.writeTimeout, 60*time.Second, false), Help: "time to write a response (0: none)"},
		{Name: "idle-timeout", Group: groupServer, Value: settings.Duration(&c.idleTimeout, 120*time.Second, false), Help: "keep-alive idle time (0: the read timeout)"},
		{Name: "shutdown-timeout", Group: groupServer, Value: settings.Duration(&c.shutdownTimeout, 30*time.Second, true), Help: "time to finish in-flight requests and drain the worker on SIGTERM"},
	}
	s = append(s, storeSettings(&c.store, &c.dataDir, "", true)...)
	s = append(s, []settings.Setting{
		{Name: "tokenizer", Group: groupStore, Value: tokenizerSetting(&c.tokenizer, tokenizer.O200kBase, false),
			Help: "tokenizer of new conversations (anthropic counts with the Anthropic API: see anthropic-*)"},
		{Name: "tail-cache-bytes", Group: groupStore, Value: settings.Size(&c.tailCacheBytes, chatmem.DefaultTailCacheBytes, 0, 1<<40), Example: "256MiB",
			Help: "memory for each conversation's newest messages between turns, so that a turn reads only what\nwas appended since (0: off, every turn reads its window from the store)"},
		{Name: "sweep-interval", Group: groupStore, Value: settings.Duration(&c.sweepInterval, time.Minute, false), Help: "how often SQL stores delete expired conversations (0: never)"},
		{Name: "anthropic-api-key", Group: groupStore, Value: settings.String(&c.anthropicKey, ""), Secret: true, Example: "sk-ant-...", Help: "API key for the anthropic tokenizer"},
		{Name: "anthropic-model", Group: groupStore, Value: settings.String(&c.anthropicModel, ""), Example: "claude-sonnet-4-5", Help: "model whose tokenizer the anthropic tokenizer counts with"},
		{Name: "anthropic-base-url", Group: groupStore, Value: settings.String(&c.anthropicBase, ""), Example: "https://api.anthropic.com", Help: "base URL of the Anthropic API (empty: https://api.anthropic.com)"},

		{Name: "upstream", Group: groupProxy, Env: "CHATMEM_UPSTREAM_URL", Value: settings.String(&c.upstream, ""), Example: "https://api.openai.com/v1",
			Help: "base URL of the model API that POST /v1/chat/completions forwards to, OpenAI-compatible\n(https://api.openai.com/v1, a vLLM, Ollama or llama.cpp server's /v1); empty: no proxy"},
		{Name: "upstream-kind", Group: groupProxy, Value: settings.Choice(&c.upstreamKind, "openai", "openai", "openai-responses", "anthropic"),
			Help: "what the upstream speaks: openai (Chat Completions), openai-responses (OpenAI's Responses API, sent with\nstore false, translated both ways) or anthropic (Messages API, translated both ways)"},
		{Name: "upstream-key", Group: groupProxy, Value: settings.String(&c.upstreamKey, ""), Secret: true, Example: "sk-...",
			Help: "API key for the upstream (prefer the environment variable to the flag)"},
		{Name: "upstream-auth", Group: groupProxy, Value: settings.Choice(&c.upstreamAuth, httpapi.UpstreamAuthServer, httpapi.UpstreamAuthModes...),
			Help: "whose credential the upstream gets: server (--upstream-key) or passthrough (each client's own Authorization;\nclients then send their chatmem key in X-Chatmem-Key; summaries, facts and embeddings still use --llm-api-key)"},
		{Name: "tenant-upstreams", Group: groupProxy, Value: settings.String(&c.tenantUpstreamsFile, ""), Example: "/etc/chatmem/upstreams.json",
			Help: "JSON file naming tenants' own upstreams: {\"TENANT\": {\"url\": URL, \"kind\": \"openai\"|\"openai-responses\"|\"anthropic\",\n\"key_env\": VARIABLE or \"key_file\": PATH, \"model\": M}}; the other tenants use --upstream"},
		{Name: "upstream-model", Group: groupProxy, Value: settings.String(&c.upstreamModel, ""), Example: "claude-sonnet-4-5", Help: "model for requests that name none (anthropic and openai-responses upstreams)"},
		{Name: "proxy-policy", Group: groupProxy, Value: settings.Choice(&c.proxyPolicy, string(chatmem.DefaultPolicy), policyNames()...),
			Help: "the proxy's default policy (X-Chatmem-Policy overrides it per request)"},
		{Name: "proxy-budget", Group: groupProxy, Value: settings.Int(&c.proxyBudget, chatmem.DefaultBudget, 1, maxInt32), Help: "the proxy's default token budget (X-Chatmem-Budget overrides it)"},
		{Name: "proxy-cache", Group: groupProxy, Value: settings.Choice(&c.proxyCache, "off", "off", chatmem.CacheStable),
			Help: "the proxy's default window cache mode: off (the window slides every turn) or stable (its front stays the same\nfrom turn to turn so the provider's prompt cache serves it; the proxy then sends a prompt_cache_key, and marks\nAnthropic cache breakpoints); token_budget, summary_buffer and recall; X-Chatmem-Cache overrides it"},
		{Name: "proxy-on-diverge", Group: groupProxy, Value: settings.Choice(&c.proxyOnDiverge, httpapi.DivergeRewind, httpapi.DivergeModes...),
			Help: "what a request whose history differs from the stored conversation gets (an edited message, a regenerated reply):\nrewind (the stored conversation goes back to the last message they share and takes the client's branch), refuse\n(409 history_diverged) or fork (the client's branch becomes a conversation of its own, named in X-Chatmem-Conversation)"},
		{Name: "proxy-unnamed", Group: groupProxy, Value: settings.Choice(&c.proxyUnnamed, httpapi.UnnamedForward, httpapi.UnnamedModes...),
			Help: "what a request that names no conversation (X-Chatmem-Conversation, metadata.conversation_id, ?conversation=) gets:\nforward (sent without memory, answered with X-Chatmem-Memory: off) or refuse (400)"},
		{Name: "proxy-derive-conversation", Group: groupProxy, Value: settings.Bool(&c.proxyDerive, false), Example: "true",
			Help: "name an unnamed request's conversation from a hash of the tenant, its user (X-Chatmem-User, user or\nsafety_identifier) and its first user message; requests without a user stay unnamed"},

		{Name: "summarizer", Group: groupDerived, Value: settings.Choice(&c.summarizer, "offline", "offline", "openai", "anthropic", "none"),
			Help: "summarizer for summary_buffer: offline (no model), openai (any Chat Completions endpoint), anthropic, or none"},
		{Name: "extractors", Group: groupDerived, Value: settings.List(&c.extractors, []string{"rules"}, "rules", "openai", "anthropic", "none"), Example: "rules,openai",
			Help: "fact extractors: rules (no model), openai, anthropic, or none"},
		{Name: "summary-trigger", Group: groupDerived, Value: settings.Int(&c.summaryTrigger, 0, 0, maxInt32), Example: "2000",
			Help: "summarize once the messages after the summary hold more tokens than this\n(0: 40% of the budget each conversation's summary_buffer reads leave after the system messages, 2000 before its first)"},
		{Name: "summary-target", Group: groupDerived, Value: settings.Int(&c.summaryTarget, 0, 0, maxInt32), Example: "1000",
			Help: "tokens left unsummarized after a summary (0: 20% of that budget, or half the trigger)"},
		{Name: "workers", Group: groupDerived, Value: settings.Int(&c.workers, chatmem.DefaultWorkers, 1, 1024),
			Help: "goroutines that summarize, extract facts and embed after appends, each conversation in one at a time\n(a model call mostly waits: more workers than cores pay off)"},
		{Name: "llm-base-url", Group: groupDerived, Value: settings.String(&c.llmBaseURL, ""), Example: "http://localhost:11434/v1",
			Help: "base URL of the model API the openai or anthropic summarizer, extractor and embedder call\n(e.g. http://localhost:11434/v1 for Ollama; empty: the provider's own)"},
		{Name: "llm-model", Group: groupDerived, Value: settings.String(&c.llmModel, ""), Example: "gpt-4o-mini", Help: "model the openai or anthropic summarizer and extractor use"},
		{Name: "llm-api-key", Group: groupDerived, Value: settings.String(&c.llmKey, ""), Secret: true, Example: "sk-...", Help: "API key of the model API (prefer the environment variable to the flag)"},
		{Name: "embedder", Group: groupDerived, Value: settings.Choice(&c.embedder, "none", "none", "openai"),
			Help: "embedding retriever for the recall policy: none (lexical recall only, no model) or openai\n(any OpenAI-compatible /embeddings endpoint, at --llm-base-url with --llm-api-key)"},
		{Name: "embedding-model", Group: groupDerived, Value: settings.String(&c.embeddingModel, "text-embedding-3-small"), Help: "embedding model (with --embedder openai)"},
		{Name: "embedding-dimensions", Group: groupDerived, Value: settings.Int(&c.embeddingDims, 0, 0, 65536), Example: "256",
			Help: "vector length asked of the embedding model (0: its own; text-embedding-3 models accept e.g. 256)"},

		{Name: "max-body-bytes", Group: groupLimits, Value: settings.Size(&c.maxBodyBytes, 4<<20, 1, 1<<30), Help: "largest request body"},
		{Name: "max-messages", Group: groupLimits, Value: settings.Int(&c.maxMessages, 1000, 1, 1_000_000), Help: "most messages in one append"},
		{Name: "max-content-bytes", Group: groupLimits, Value: settings.Size(&c.maxContentBytes, 256<<10, 1, 1<<30), Help: "largest message content"},
		{Name: "rate-limit", Group: groupLimits, Value: settings.Float(&c.rateLimit, 0, 0), Example: "50",
			Help: "API requests per second per tenant (0: no limit); over it, 429 with Retry-After"},
		{Name: "rate-burst", Group: groupLimits, Value: settings.Int(&c.rateBurst, 0, 0, maxInt32), Example: "100",
			Help: "requests a tenant may make at once above the rate (0: the rate, at least 1)"},

		{Name: "prices", Group: groupLimits, Value: settings.String(&c.pricesFile, ""), Example: "/etc/chatmem/prices.json",
			Help: "JSON or YAML file of per-million-token prices by model and token kind, for the cost ledger\n({\"gpt-4o-mini\": {\"input\": 0.15, \"cached_input\": 0.075, \"output\": 0.6}}; none built in; see docs/usage.md)"},
		{Name: "memory-limit", Group: groupLimits, Value: settings.String(&c.memoryLimit, ""), Example: "2000000 tokens per day",
			Help: "each tenant's limit on the summarizer's, extractors' and embedder's spend (\"N tokens\", \"C cost\" or both, \"per day|month\");\nover it, their calls wait until the limit allows"},
		{Name: "proxy-limit", Group: groupLimits, Value: settings.String(&c.proxyLimit, ""), Example: "50 cost per month",
			Help: "each tenant's limit on the chat proxy's and Responses endpoint's spend; over it, 429 budget_exhausted"},
		{Name: "tenant-limits", Group: groupLimits, Value: settings.String(&c.tenantLimitsFile, ""), Example: "/etc/chatmem/limits.json",
			Help: "JSON file of tenants' own limits: {\"TENANT\": {\"memory\": LIMIT, \"proxy\": LIMIT}}; the others have --memory-limit and --proxy-limit"},
		{Name: "usage-flush-interval", Group: groupLimits, Value: settings.Duration(&c.usageFlush, chatmem.DefaultUsageFlush, true), Example: "5s",
			Help: "how often the usage counted is written to the store, in one batch; a crash loses at most this much of it"},

		{Name: "log-format", Group: groupLogging, Value: settings.Choice(&c.logFormat, "text", "text", "json"), Help: "log format"},
		{Name: "log-level", Group: groupLogging, Value: settings.Choice(&c.logLevel, "info", "debug", "info", "warn", "error"), Help: "log level"},
	}...)
	return &settings.Command{
		Name:      "serve",
		Usage:     "serve [--addr 127.0.0.1:8080] [--store URL] [--config FILE] [flags]",
		About:     "Serves the REST API, the chat proxy (with --upstream) and the inspector.",
		Example:   "CHATMEM_API_KEYS=acme:k1 chatmem serve --addr 127.0.0.1:8080 --store sqlite:chatmem.db",
		EnvPrefix: "CHATMEM_", ConfigEnv: envConfig,
		Settings: s,
	}
}

func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c serveConfig
	cmd := c.command()
	if err := parseSettings(cmd, args, stderr); err != nil {
		return err
	}
	if len(cmd.Args()) > 0 {
		return usageErr("serve takes no arguments (got %q); run chatmem serve --help", cmd.Args())
	}
	log, err := newLogger(stderr, c.logFormat, c.logLevel)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	keys, err := httpapi.ParseKeys(c.apiKeys)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if len(keys) == 0 && !c.insecure && !isLoopback(c.addr) {
		return usageErr("refusing to listen on %s without API keys: set CHATMEM_API_KEYS (or --api-keys), listen on loopback, or pass --insecure", c.addr)
	}

	defer redisLog.route(log)()
	tracer, stopTracing, otelCfg, err := startTracing(ctx, c.store, log, c.shutdownTimeout)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: the spans of the requests and of the
	// worker's draining are flushed.
	defer stopTracing()
	srv, err := newServer(ctx, c, keys, log, tracer)
	if errors.Is(err, chatmem.ErrInvalid) {
		return &exitError{code: 2, err: err} // a setting the store or API refused
	}
	if err != nil {
		return err
	}
	defer srv.close()
	// The build, once the settings are accepted (a refused setting is one
	// line on stderr) and before the listener, so that a server that
	// fails to listen says which build it is.
	build := buildinfo.Read()
	log.Info("chatmem starting", "version", build.Version, "revision", build.Revision, "time", build.Time, "modified", build.Modified, "go_version", build.GoVersion)
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	log.Info("chatmem serving", "addr", ln.Addr().String(), "store", describeStore(c.store, c.dataDir), "tenants", len(keys),
		"proxy", c.proxyDescription(), "mcp", base+"/mcp", "inspector", base+"/", "otel", otelCfg.String())
	if len(keys) == 0 {
		if isLoopback(c.addr) {
			log.Warn("no API keys configured: every request is tenant \"" + chatmem.DefaultTenant + "\", with no authentication")
		} else {
			log.Warn("listening on "+ln.Addr().String()+" beyond loopback without API keys (--insecure): anyone who reaches it reads and writes every conversation, as tenant \""+chatmem.DefaultTenant+"\"",
				"addr", ln.Addr().String())
		}
	}
	var cfg strings.Builder
	cmd.Print(&cfg)
	log.Debug("configuration\n" + cfg.String())
	fmt.Fprintf(stdout, "chatmem listening on http://%s\n", ln.Addr())
	return srv.serve(ctx, ln, c.shutdownTimeout)
}

// server is a running `chatmem serve`: the store, the Memory with its
// worker, the sweeper and the HTTP server, closed in reverse order.
type server struct {
	store  chatmem.Store
	mem    *chatmem.Memory
	http   *http.Server
	log    *slog.Logger
	stop   chan struct{}
	sweeps sync.WaitGroup
}

func newServer(ctx context.Context, c serveConfig, keys []httpapi.Key, log *slog.Logger, tracer chatmem.Tracer) (*server, error) {
	store, mem, err := openMemory(ctx, c, log, tracer)
	if err != nil {
		return nil, err
	}
	up, err := c.upstreamConfig()
	var tenantUps map[string]httpapi.Upstream
	if err == nil {
		tenantUps, err = c.tenantUpstreams()
	}
	if err != nil {
		mem.Close()
		store.Close()
		return nil, err
	}
	limits := httpapi.Limits{MaxBodyBytes: c.maxBodyBytes, MaxMessages: c.maxMessages, MaxContentBytes: int(c.maxContentBytes)}
	mcpHTTP := mcpserver.NewHTTP(mem, mcpserver.HTTPOptions{Options: mcpserver.Options{Logger: log, Version: buildVersion()}, MaxBodyBytes: limits.MaxBodyBytes,
		// httpapi checks every request's Host, /mcp's included, against
		// the allowed hosts (without keys); the SDK's own check knows only
		// loopback names, and would refuse those the operator allowed.
		AnyHost: true,
	})
	api, err := httpapi.New(mem, httpapi.Options{
		Keys:            keys,
		Limits:          limits,
		RateLimit:       httpapi.RateLimit{PerSecond: c.rateLimit, Burst: c.rateBurst},
		Upstream:        up,
		TenantUpstreams: tenantUps,
		Logger:          log,
		MCP:             mcpHTTP.Handler,
		AllowedHosts:    append(addrHost(c.addr), c.allowedHosts...),
		CORSOrigins:     c.corsOrigins,
		Tracer:          tracer,
	})
	if err != nil {
		mem.Close()
		store.Close()
		return nil, err
	}
	s := &server{store: store, mem: mem, log: log, stop: make(chan struct{})}
	s.http = &http.Server{
		Handler:           api,
		ReadHeaderTimeout: c.readHeaderTimeout,
		ReadTimeout:       c.readTimeout,
		WriteTimeout:      c.writeTimeout,
		IdleTimeout:       c.idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if sw, ok := store.(chatmem.Sweeper); ok && c.sweepInterval > 0 {
		s.sweeps.Go(func() { s.sweep(sw, c.sweepInterval) })
	}
	return s, nil
}

// openMemory opens the configured store and starts a Memory over it with
// the configured tokenizer, models and worker, traced by tracer (nil: not
// traced); the caller closes both, the Memory first.
func openMemory(ctx context.Context, c serveConfig, log *slog.Logger, tracer chatmem.Tracer) (chatmem.Store, *chatmem.Memory, error) {
	store, err := openStore(ctx, c.store, c.dataDir)
	if err != nil {
		return nil, nil, err
	}
	counterOpts := tokenizer.Options{Anthropic: anthropic.Counters(anthropic.CounterOptions{APIKey: c.anthropicKey, Model: c.anthropicModel, BaseURL: c.anthropicBase})}
	counter, err := tokenizer.Get(c.tokenizer, counterOpts)
	if err != nil {
		store.Close()
		return nil, nil, &exitError{code: 2, err: err}
	}
	opts := chatmem.Options{
		Counter:  counter,
		Counters: func(name string) (chatmem.Counter, error) { return tokenizer.Get(name, counterOpts) },
		Limits:   chatmem.Limits{MaxContentBytes: int(c.maxContentBytes), MaxBatch: c.maxMessages},
		Logger:   log,
		Summary:  chatmem.SummaryOptions{Trigger: c.summaryTrigger, Target: c.summaryTarget},
		Workers:  c.workers,
		Tracer:   tracer,
		TailCacheBytes: func() int64 {
			if c.tailCacheBytes == 0 {
				return -1 // off
			}
			return c.tailCacheBytes
		}(),
	}
	if opts.Ledger, err = c.ledger(store, log); err != nil {
		store.Close()
		return nil, nil, err
	}
	if opts.Summarizer, opts.Extractors, err = c.models(log, tracer); err != nil {
		store.Close()
		return nil, nil, err
	}
	switch c.embedder {
	case "openai":
		if opts.Embedder, err = openai.NewEmbedder(openai.EmbedderOptions{BaseURL: c.llmBaseURL, APIKey: c.llmKey, Model: c.embeddingModel, Dimensions: c.embeddingDims, Tracer: tracer}); err != nil {
			store.Close()
			return nil, nil, &exitError{code: 2, err: fmt.Errorf("embedder: %w", err)}
		}
	case "none", "":
	default:
		store.Close()
		return nil, nil, usageErr("unknown embedder %q (want none or openai)", c.embedder)
	}
	mem, err := chatmem.New(store, opts)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	if err := mem.Start(); err != nil {
		store.Close()
		return nil, nil, err
	}
	return store, mem, nil
}

// upstreamConfig is the chat proxy's upstream, or nil without --upstream.
func (c serveConfig) upstreamConfig() (*httpapi.Upstream, error) {
	if c.upstream == "" {
		return nil, nil
	}
	up, err := c.upstreamOf(c.upstream, c.upstreamKind, c.upstreamKey, c.upstreamModel)
	if err != nil {
		return nil, err
	}
	up.Auth = c.upstreamAuth
	return &up, nil
}

// upstreamOf is an upstream at base speaking kind, with key, and the
// proxy's settings.
func (c serveConfig) upstreamOf(base, kind, key, model string) (httpapi.Upstream, error) {
	p := chatmem.Policy{Kind: chatmem.PolicyKind(c.proxyPolicy), Budget: c.proxyBudget}
	if p.Kind == chatmem.PolicyLastTurns {
		p.Turns = 10
	}
	if c.proxyCache == chatmem.CacheStable {
		p.Cache = chatmem.CacheStable
	}
	if err := p.Validate(); err != nil {
		return httpapi.Upstream{}, &exitError{code: 2, err: fmt.Errorf("proxy-policy: %w", err)}
	}
	up := httpapi.Upstream{BaseURL: base, APIKey: key, Policy: p, OnDiverge: c.proxyOnDiverge,
		Unnamed: c.proxyUnnamed, DeriveConversation: c.proxyDerive}
	switch kind {
	case "openai", "":
	case "anthropic":
		tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: base, APIKey: key, Model: model})
		if err != nil {
			return httpapi.Upstream{}, &exitError{code: 2, err: fmt.Errorf("upstream: %w", err)}
		}
		up.HTTPClient = &http.Client{Transport: tr}
	case "openai-responses":
		tr, err := openai.NewResponsesTransport(openai.TransportOptions{BaseURL: base, APIKey: key, Model: model})
		if err != nil {
			return httpapi.Upstream{}, &exitError{code: 2, err: fmt.Errorf("upstream: %w", err)}
		}
		up.HTTPClient = &http.Client{Transport: tr}
	default:
		return httpapi.Upstream{}, usageErr("unknown upstream-kind %q (want openai, openai-responses or anthropic)", kind)
	}
	return up, nil
}

// tenantUpstream is one tenant's entry of the --tenant-upstreams file.
type tenantUpstream struct {
	URL     string `json:"url"`
	Kind    string `json:"kind"`     // openai (default), openai-responses or anthropic
	KeyEnv  string `json:"key_env"`  // the environment variable holding the key
	KeyFile string `json:"key_file"` // or the file holding it
	Model   string `json:"model"`    // for an anthropic upstream
}

// tenantUpstreams reads the --tenant-upstreams file: a JSON object from
// tenant to tenantUpstream. Each key comes from its environment variable
// or file, never from the file itself.
func (c serveConfig) tenantUpstreams() (map[string]httpapi.Upstream, error) {
	if c.tenantUpstreamsFile == "" {
		return nil, nil
	}
	bad := func(format string, args ...any) error {
		return &exitError{code: 2, err: fmt.Errorf("tenant-upstreams %s: "+format, append([]any{c.tenantUpstreamsFile}, args...)...)}
	}
	b, err := os.ReadFile(c.tenantUpstreamsFile)
	if err != nil {
		return nil, bad("%v", err)
	}
	var entries map[string]tenantUpstream
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, bad("%v (want {\"TENANT\": {\"url\", \"kind\", \"key_env\" or \"key_file\", \"model\"}})", err)
	}
	out := make(map[string]httpapi.Upstream, len(entries))
	for tenant, e := range entries {
		if e.URL == "" {
			return nil, bad("tenant %s: no url", tenant)
		}
		var key string
		switch {
		case e.KeyEnv != "" && e.KeyFile != "":
			return nil, bad("tenant %s: key_env and key_file exclude each other", tenant)
		case e.KeyEnv != "":
			if key = os.Getenv(e.KeyEnv); key == "" {
				return nil, bad("tenant %s: %s is not set", tenant, e.KeyEnv)
			}
		case e.KeyFile != "":
			k, err := os.ReadFile(e.KeyFile)
			if err != nil {
				return nil, bad("tenant %s: %v", tenant, err)
			}
			key = strings.TrimSpace(string(k))
		}
		up, err := c.upstreamOf(e.URL, e.Kind, key, e.Model)
		if err != nil {
			return nil, err
		}
		out[tenant] = up
	}
	return out, nil
}

// proxyDescription says whether the chat proxy is on, for the startup
// log: "off", or where it forwards to and what that speaks.
func (c serveConfig) proxyDescription() string {
	if c.upstream == "" {
		return "off (no --upstream)"
	}
	u, err := url.Parse(c.upstream)
	if err != nil || u.Host == "" {
		return c.upstreamKind
	}
	return c.upstreamKind + " " + u.Scheme + "://" + u.Host + u.Path
}

// models builds the configured summarizer and extractors.
func (c serveConfig) models(log *slog.Logger, tracer chatmem.Tracer) (chatmem.Summarizer, []chatmem.Extractor, error) {
	oa := openai.Options{BaseURL: c.llmBaseURL, Model: c.llmModel, APIKey: c.llmKey, Tracer: tracer}
	an := anthropic.Options{BaseURL: c.llmBaseURL, Model: c.llmModel, APIKey: c.llmKey, Tracer: tracer}
	var s chatmem.Summarizer
	var err error
	switch c.summarizer {
	case "offline":
		s = offline.NewSummarizer(offline.Options{})
	case "openai":
		s, err = openai.NewSummarizer(oa)
	case "anthropic":
		s, err = anthropic.NewSummarizer(an)
	case "none", "":
	default:
		return nil, nil, usageErr("unknown summarizer %q (want offline, openai, anthropic or none)", c.summarizer)
	}
	if err != nil {
		return nil, nil, &exitError{code: 2, err: fmt.Errorf("summarizer: %w", err)}
	}
	var xs []chatmem.Extractor
	for _, name := range c.extractors {
		var x chatmem.Extractor
		switch name {
		case "rules":
			x = offline.DefaultExtractor()
		case "openai":
			x, err = openai.NewExtractor(openai.ExtractorOptions{Options: oa, Logger: log})
		case "anthropic":
			x, err = anthropic.NewExtractor(anthropic.ExtractorOptions{Options: an, Logger: log})
		case "none", "":
			continue
		default:
			return nil, nil, usageErr("unknown extractor %q (want rules, openai, anthropic or none)", name)
		}
		if err != nil {
			return nil, nil, &exitError{code: 2, err: fmt.Errorf("extractor %s: %w", name, err)}
		}
		xs = append(xs, x)
	}
	return s, xs, nil
}

// serve serves until ctx ends (SIGINT or SIGTERM), then shuts down
// gracefully: in-flight requests finish, the worker drains its queue.
func (s *server) serve(ctx context.Context, ln net.Listener, timeout time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: finishing in-flight requests and queued work", "timeout", timeout)
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.http.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// close stops the sweeper, drains the worker and closes the store.
func (s *server) close() {
	close(s.stop)
	s.sweeps.Wait()
	s.mem.Close()
	s.store.Close()
}

func (s *server) sweep(sw chatmem.Sweeper, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			n, err := sw.Sweep(context.Background(), now)
			if err != nil {
				s.log.Error("sweep expired conversations", "err", err)
			} else if n > 0 {
				s.log.Info("swept expired conversations", "deleted", n)
			}
		}
	}
}

// isLoopback reports whether addr (host:port) listens only on loopback.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// addrHost is the host name addr listens on, if it is a name: requests
// name the server by it. An IP address needs no entry (the address a
// connection reached is allowed), nor does an empty host.
func addrHost(addr string) []string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" || net.ParseIP(host) != nil {
		return nil
	}
	return []string{host}
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log-format %q: want text or json", format)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/anthropic"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/mcpserver"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/openai"
	"github.com/chatmem/chatmem/tokenizer"
)

// serveConfig is everything `chatmem serve` can be told.
type serveConfig struct {
	addr, store, dataDir, apiKeys                      string
	insecure                                           bool
	tokenizer, summarizer, extractors                  string
	summaryTrigger, summaryTarget                      int
	workers, tailCacheMB                               int
	logFormat, logLevel                                string
	maxBodyBytes, maxMessages, maxContentBytes         int
	readHeaderTimeout, readTimeout, writeTimeout       time.Duration
	idleTimeout, shutdownTimeout, sweepInterval        time.Duration
	anthropicKey, anthropicModel, anthropicBase        string
	llmBaseURL, llmModel, llmKey                       string
	rateLimit                                          float64
	rateBurst                                          int
	upstream, upstreamKind, upstreamKey, upstreamModel string
	proxyPolicy                                        string
	embedder, embeddingModel                           string
	embeddingDims                                      int
	proxyBudget                                        int
}

func (c *serveConfig) settings() *settings {
	ss := &settings{secret: map[string]bool{"api-keys": true, "anthropic-api-key": true, "llm-api-key": true, "upstream-key": true}}
	ss.str(&c.addr, "addr", "127.0.0.1:8080", "address to listen on")
	ss.str(&c.store, "store", "", storeURLHelp)
	ss.str(&c.dataDir, "data-dir", defaultDataDir, "data directory of the default SQLite store")
	ss.str(&c.apiKeys, "api-keys", "", "API keys as comma-separated tenant:key pairs (acme:k1,globex:k2); a key written sha256:HEX is stored hashed.\nWithout keys the server serves one tenant, only on loopback")
	ss.bool(&c.insecure, "insecure", false, "allow a non-loopback address without API keys")
	ss.str(&c.tokenizer, "tokenizer", tokenizer.O200kBase, "tokenizer of new conversations: "+strings.Join(tokenizer.Names(), ", "))
	ss.str(&c.summarizer, "summarizer", "offline", "summarizer for summary_buffer: offline (no model), openai (any Chat Completions endpoint), anthropic, or none")
	ss.str(&c.extractors, "extractors", "rules", "fact extractors, comma-separated: rules (no model), openai, anthropic, or none")
	ss.str(&c.llmBaseURL, "llm-base-url", "", "base URL of the model API the openai or anthropic summarizer and extractor call\n(e.g. http://localhost:11434/v1 for Ollama; empty: the provider's own)")
	ss.str(&c.llmModel, "llm-model", "", "model the openai or anthropic summarizer and extractor use")
	ss.str(&c.llmKey, "llm-api-key", "", "API key of the model API (prefer the environment variable to the flag)")
	ss.str(&c.embedder, "embedder", "none", "embedding retriever for the recall policy: none (lexical recall only, no model) or openai\n(any OpenAI-compatible /embeddings endpoint, at --llm-base-url with --llm-api-key)")
	ss.str(&c.embeddingModel, "embedding-model", "text-embedding-3-small", "embedding model (with --embedder openai)")
	ss.int(&c.embeddingDims, "embedding-dimensions", 0, "vector length asked of the embedding model (0: its own; text-embedding-3 models accept e.g. 256)")
	ss.int(&c.summaryTrigger, "summary-trigger", 0, "summarize once the messages after the summary hold more tokens than this\n(0: 60% of the budget each conversation's summary_buffer reads use, 2000 before its first)")
	ss.int(&c.summaryTarget, "summary-target", 0, "tokens left unsummarized after a summary (0: 35% of that budget, or half the trigger)")
	ss.add("tail-cache-mb", strconv.Itoa(chatmem.DefaultTailCacheBytes>>20), "memory for each conversation's newest messages between turns, in MiB, so that a turn reads\nonly what was appended since (0: off, every turn reads its window from the store)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<20 {
			return fmt.Errorf("not a whole number of MiB from 0 to 1048576: %q", v)
		}
		c.tailCacheMB = n
		return nil
	})
	ss.add("workers", strconv.Itoa(chatmem.DefaultWorkers), "goroutines that summarize, extract facts and embed after appends, each conversation in one at a time\n(a model call mostly waits: more workers than cores pay off)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			return fmt.Errorf("not a whole number from 1 to 1024: %q", v)
		}
		c.workers = n
		return nil
	})
	ss.str(&c.logFormat, "log-format", "text", "log format: text or json")
	ss.str(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	ss.int(&c.maxBodyBytes, "max-body-bytes", 4<<20, "largest request body")
	ss.int(&c.maxMessages, "max-messages", 1000, "most messages in one append")
	ss.int(&c.maxContentBytes, "max-content-bytes", 256<<10, "largest message content")
	ss.add("rate-limit", "0", "API requests per second per tenant (0: no limit); over it, 429 with Retry-After", func(v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return fmt.Errorf("not a rate like 50 or 0.5: %q", v)
		}
		c.rateLimit = f
		return nil
	})
	ss.int(&c.rateBurst, "rate-burst", 0, "requests a tenant may make at once above the rate (0: the rate, at least 1)")
	ss.duration(&c.readHeaderTimeout, "read-header-timeout", 5*time.Second, "time to read request headers")
	ss.duration(&c.readTimeout, "read-timeout", 30*time.Second, "time to read a request")
	ss.duration(&c.writeTimeout, "write-timeout", 60*time.Second, "time to write a response")
	ss.duration(&c.idleTimeout, "idle-timeout", 120*time.Second, "keep-alive idle time")
	ss.duration(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "time to finish in-flight requests and drain the worker on SIGTERM")
	ss.duration(&c.sweepInterval, "sweep-interval", time.Minute, "how often SQL stores delete expired conversations")
	ss.str(&c.upstream, "upstream", "", "base URL of the model API that POST /v1/chat/completions forwards to, OpenAI-compatible\n(https://api.openai.com/v1, a vLLM, Ollama or llama.cpp server's /v1); empty: no proxy")
	ss.envName("CHATMEM_UPSTREAM_URL")
	ss.str(&c.upstreamKind, "upstream-kind", "openai", "what the upstream speaks: openai, or anthropic (Messages API, translated both ways)")
	ss.str(&c.upstreamKey, "upstream-key", "", "API key for the upstream (prefer the environment variable to the flag)")
	ss.str(&c.upstreamModel, "upstream-model", "", "model for requests that name none (anthropic upstream)")
	ss.str(&c.proxyPolicy, "proxy-policy", string(chatmem.PolicyTokenBudget), "the proxy's default policy (X-Chatmem-Policy overrides it per request)")
	ss.int(&c.proxyBudget, "proxy-budget", 4000, "the proxy's default token budget (X-Chatmem-Budget overrides it)")
	ss.str(&c.anthropicKey, "anthropic-api-key", "", "API key for the anthropic tokenizer")
	ss.str(&c.anthropicModel, "anthropic-model", "", "model whose tokenizer the anthropic tokenizer counts with")
	ss.str(&c.anthropicBase, "anthropic-base-url", "", "base URL of the Anthropic API (default https://api.anthropic.com)")
	return ss
}

func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var c serveConfig
	ss := c.settings()
	fs := newFlagSet("serve",
		"serve [--addr 127.0.0.1:8080] [--store URL] [--config FILE] [flags]\n\n"+
			"Serves the REST API. Every setting below can also come from an environment variable\n"+
			"or a JSON config file (an object of setting names to values); a flag beats the\n"+
			"environment, which beats the file, which beats the default.",
		"CHATMEM_API_KEYS=acme:k1 chatmem serve --addr 127.0.0.1:8080 --store sqlite:chatmem.db", stderr)
	configPath := fs.String("config", os.Getenv("CHATMEM_CONFIG"), "JSON config file (env CHATMEM_CONFIG)")
	flags := ss.flagSet(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("serve takes no arguments")
	}
	file, err := ss.readConfigFile(*configPath)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := ss.resolve(fs, flags, file); err != nil {
		return &exitError{code: 2, err: err}
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

	srv, err := newServer(ctx, c, keys, log)
	if errors.Is(err, chatmem.ErrInvalid) {
		return &exitError{code: 2, err: err} // a setting the store or API refused
	}
	if err != nil {
		return err
	}
	defer srv.close()
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	log.Info("chatmem serving", "addr", ln.Addr().String(), "store", storeName(c.store), "tenants", len(keys))
	if len(keys) == 0 {
		log.Warn("no API keys configured: every request is tenant \"" + chatmem.DefaultTenant + "\", with no authentication")
	}
	var cfg strings.Builder
	ss.print(&cfg)
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

func newServer(ctx context.Context, c serveConfig, keys []httpapi.Key, log *slog.Logger) (*server, error) {
	store, mem, err := openMemory(ctx, c, log)
	if err != nil {
		return nil, err
	}
	up, err := c.upstreamConfig()
	if err != nil {
		mem.Close()
		store.Close()
		return nil, err
	}
	limits := httpapi.Limits{MaxBodyBytes: int64(c.maxBodyBytes), MaxMessages: c.maxMessages, MaxContentBytes: c.maxContentBytes}
	mcpHTTP := mcpserver.NewHTTP(mem, mcpserver.HTTPOptions{Options: mcpserver.Options{Logger: log, Version: buildVersion()}, MaxBodyBytes: limits.MaxBodyBytes,
		AnyHost: len(keys) > 0, // with keys, a rebinding page has no key to send
	})
	api, err := httpapi.New(mem, httpapi.Options{
		Keys:      keys,
		Limits:    limits,
		RateLimit: httpapi.RateLimit{PerSecond: c.rateLimit, Burst: c.rateBurst},
		Upstream:  up,
		Logger:    log,
		MCP:       mcpHTTP.Handler,
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
// the configured tokenizer, models and worker; the caller closes both,
// the Memory first.
func openMemory(ctx context.Context, c serveConfig, log *slog.Logger) (chatmem.Store, *chatmem.Memory, error) {
	store, err := openStore(ctx, c.store, c.dataDir)
	if err != nil {
		return nil, nil, err
	}
	counterOpts := tokenizer.Options{Anthropic: tokenizer.AnthropicOptions{APIKey: c.anthropicKey, Model: c.anthropicModel, BaseURL: c.anthropicBase}}
	counter, err := tokenizer.Get(c.tokenizer, counterOpts)
	if err != nil {
		store.Close()
		return nil, nil, &exitError{code: 2, err: err}
	}
	opts := chatmem.Options{
		Counter:  counter,
		Counters: func(name string) (chatmem.Counter, error) { return tokenizer.Get(name, counterOpts) },
		Limits:   chatmem.Limits{MaxContentBytes: c.maxContentBytes, MaxBatch: c.maxMessages},
		Logger:   log,
		Summary:  chatmem.SummaryOptions{Trigger: c.summaryTrigger, Target: c.summaryTarget},
		Workers:  c.workers,
		TailCacheBytes: func() int64 {
			if c.tailCacheMB == 0 {
				return -1 // off
			}
			return int64(c.tailCacheMB) << 20
		}(),
	}
	if opts.Summarizer, opts.Extractors, err = c.models(log); err != nil {
		store.Close()
		return nil, nil, err
	}
	switch c.embedder {
	case "openai":
		if opts.Embedder, err = openai.NewEmbedder(openai.EmbedderOptions{BaseURL: c.llmBaseURL, APIKey: c.llmKey, Model: c.embeddingModel, Dimensions: c.embeddingDims}); err != nil {
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
	p := chatmem.Policy{Kind: chatmem.PolicyKind(c.proxyPolicy), Budget: c.proxyBudget}
	if p.Kind == chatmem.PolicyLastTurns {
		p.Turns = 10
	}
	if err := p.Validate(); err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("proxy-policy: %w", err)}
	}
	up := &httpapi.Upstream{BaseURL: c.upstream, APIKey: c.upstreamKey, Policy: p}
	switch c.upstreamKind {
	case "openai", "":
	case "anthropic":
		tr, err := anthropic.NewChatCompletionsTransport(anthropic.Options{BaseURL: c.upstream, APIKey: c.upstreamKey, Model: c.upstreamModel})
		if err != nil {
			return nil, &exitError{code: 2, err: fmt.Errorf("upstream: %w", err)}
		}
		up.HTTPClient = &http.Client{Transport: tr}
	default:
		return nil, usageErr("unknown upstream-kind %q (want openai or anthropic)", c.upstreamKind)
	}
	return up, nil
}

// models builds the configured summarizer and extractors.
func (c serveConfig) models(log *slog.Logger) (chatmem.Summarizer, []chatmem.Extractor, error) {
	oa := openai.Options{BaseURL: c.llmBaseURL, Model: c.llmModel, APIKey: c.llmKey}
	an := anthropic.Options{BaseURL: c.llmBaseURL, Model: c.llmModel, APIKey: c.llmKey}
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
	for _, name := range strings.Split(c.extractors, ",") {
		var x chatmem.Extractor
		switch strings.TrimSpace(name) {
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

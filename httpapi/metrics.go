package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/buildinfo"
)

// metrics are the server's Prometheus collectors.
type metrics struct {
	requests      *prometheus.CounterVec   // route, method, status
	duration      *prometheus.HistogramVec // route, method
	store         *prometheus.HistogramVec // op
	contextTokens *prometheus.HistogramVec // policy
	// promptTokens counts the prompt tokens of proxied turns as the
	// upstream reported them and as chatmem counted them (label counter:
	// "upstream", "chatmem"); promptTokensDiff is the per-turn difference,
	// upstream minus chatmem: the error of chatmem's counter.
	promptTokens     *prometheus.CounterVec
	promptTokensDiff prometheus.Histogram
	// cachedTokens counts the prompt tokens the upstream reported it read
	// from its prompt cache, by tenant and model.
	cachedTokens *prometheus.CounterVec
	// proxyHistory counts chat proxy turns by how their history lined up
	// with the stored conversation (outcome: continued, retry, refused,
	// forked); proxyUnnamed counts requests whose conversation could not
	// be named (outcome: forwarded, without memory, or refused).
	proxyHistory *prometheus.CounterVec
	proxyUnnamed *prometheus.CounterVec
	handler      http.Handler // serves /metrics
}

// newMetrics registers the collectors with reg (a private registry, with
// the Go and process collectors, if nil) and serves /metrics from gather
// (nil: reg, if it is a Gatherer, else the private registry).
func newMetrics(mem *chatmem.Memory, build buildinfo.Info, reg prometheus.Registerer, gather prometheus.Gatherer) (*metrics, error) {
	if reg == nil {
		private := prometheus.NewRegistry()
		private.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		reg = private
	}
	if gather == nil {
		g, ok := reg.(prometheus.Gatherer)
		if !ok {
			return nil, fmt.Errorf("%w: httpapi.Options: a Registerer that is not a Gatherer needs a Gatherer", chatmem.ErrInvalid)
		}
		gather = g
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatmem_http_requests_total",
			Help: "HTTP requests served, by route pattern, method and status code.",
		}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatmem_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route pattern and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"}),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatmem_store_duration_seconds",
			Help:    "Time spent in memory and store calls made for requests, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 15), // 0.2ms to ~3.3s
		}, []string{"op"}),
		contextTokens: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "chatmem_context_tokens",
			Help:    "Tokens of the context windows sent, by policy.",
			Buckets: prometheus.ExponentialBuckets(64, 2, 14), // 64 to ~524k
		}, []string{"policy"}),
		promptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatmem_proxy_prompt_tokens_total",
			Help: "Prompt tokens of chat proxy turns whose upstream reported usage, as the upstream counted them and as chatmem did (counter=upstream|chatmem).",
		}, []string{"counter"}),
		promptTokensDiff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "chatmem_proxy_prompt_tokens_difference",
			Help:    "Per chat proxy turn, the upstream's reported prompt tokens minus chatmem's count of the messages sent (positive: chatmem counted too few).",
			Buckets: []float64{-1000, -300, -100, -30, -10, -3, 0, 3, 10, 30, 100, 300, 1000},
		}),
		cachedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chatmem_proxy_cached_prompt_tokens_total",
			Help: "Prompt tokens of chat proxy turns that the upstream reported reading from its prompt cache (OpenAI's cached_tokens, Anthropic's cache reads), by tenant and model.",
		}, []string{"tenant", "model"}),
	}
	m.proxyHistory = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatmem_proxy_history_total",
		Help: "Chat proxy turns by how the request's history lined up with the stored conversation (outcome=continued|retry|refused|forked).",
	}, []string{"outcome"})
	m.proxyUnnamed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chatmem_proxy_unnamed_total",
		Help: "Chat proxy requests that named no conversation (outcome=forwarded: sent without memory, refused).",
	}, []string{"outcome"})
	queue := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chatmem_worker_queue_depth",
		Help: "Conversations with summary or fact work queued for the worker.",
	}, func() float64 { return float64(mem.QueueDepth()) })
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "chatmem_build_info",
		Help:        "Always 1; its labels say which chatmem serves: module version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": build.Version, "revision": build.Revision, "go_version": build.GoVersion},
	})
	buildInfo.Set(1)
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.store, m.contextTokens, m.promptTokens, m.promptTokensDiff, m.cachedTokens, m.proxyHistory, m.proxyUnnamed, queue, buildInfo, newUsageCollector(mem)} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("httpapi: register metrics: %w", err)
		}
	}
	m.handler = promhttp.HandlerFor(gather, promhttp.HandlerOpts{})
	return m, nil
}

// observeRequest records one served request.
func (m *metrics) observeRequest(route, method string, status int, d time.Duration) {
	method = methodLabel(method)
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route, method).Observe(d.Seconds())
}

// methodLabel bounds the method label to the standard methods, so a client
// cannot grow the metrics without bound by inventing methods.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// timed calls f and records its duration as store operation op.
func timed[T any](s *Server, op string, f func() (T, error)) (T, error) {
	start := time.Now()
	v, err := f()
	s.metrics.store.WithLabelValues(op).Observe(time.Since(start).Seconds())
	return v, err
}

// observePromptTokens records one turn's prompt tokens as the upstream
// reported them and as chatmem counted them.
func (m *metrics) observePromptTokens(upstream, chatmem int) {
	m.promptTokens.WithLabelValues("upstream").Add(float64(upstream))
	m.promptTokens.WithLabelValues("chatmem").Add(float64(chatmem))
	m.promptTokensDiff.Observe(float64(upstream - chatmem))
}

// observeCachedTokens records the prompt tokens a turn's upstream read
// from its prompt cache. A model name longer than maxModelLabel is cut, so
// that an upstream cannot grow a label without bound.
func (m *metrics) observeCachedTokens(tenant, model string, cached int) {
	if len(model) > maxModelLabel {
		model = strings.ToValidUTF8(model[:maxModelLabel], "")
	}
	m.cachedTokens.WithLabelValues(tenant, model).Add(float64(max(cached, 0)))
}

// maxModelLabel bounds the model label's length.
const maxModelLabel = 100

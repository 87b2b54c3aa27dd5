// Package telemetry traces chatmem with OpenTelemetry: it implements the
// chatmem.Tracer hook with the OpenTelemetry Go SDK and exports the spans
// over OTLP (HTTP/protobuf or gRPC). It is the one package that imports
// OpenTelemetry; the root package, httpapi, the stores and the providers
// trace through the hook.
//
// Tracing is configured by the standard OTEL_* environment variables and
// is off unless they ask for it (see FromEnv). Once on, the SDK and the
// OTLP exporter read the rest of their settings from the environment
// themselves: OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, _TIMEOUT, _COMPRESSION,
// _CERTIFICATE and _INSECURE, OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_*, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES. Trace context crosses processes as W3C
// traceparent and tracestate, and baggage, as OTEL_PROPAGATORS chooses.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/chatmem/chatmem"
)

// The OTLP protocols (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is what the environment asks of tracing.
type Config struct {
	// Enabled says whether spans are recorded and exported.
	Enabled bool
	// Protocol is the OTLP protocol: ProtocolHTTP or ProtocolGRPC.
	Protocol string
	// Endpoint is the traces endpoint the environment names, empty for the
	// exporter's default (localhost:4318 over HTTP, localhost:4317 over
	// gRPC).
	Endpoint string
	// Propagators are the trace context formats read from requests and
	// written to upstream calls (OTEL_PROPAGATORS), comma-separated, in
	// order: "tracecontext", "baggage", or "none" for no propagation;
	// empty for the default, tracecontext,baggage.
	Propagators string
	// Why says why tracing is off, for the startup log.
	Why string
}

// String describes the configuration for the startup log: "off (...)", or
// the protocol and endpoint.
func (c Config) String() string {
	if !c.Enabled {
		return "off (" + c.Why + ")"
	}
	ep := c.Endpoint
	if ep == "" {
		ep = "default endpoint"
	}
	s := "otlp " + c.Protocol + " " + ep
	if c.Propagators != "" {
		s += " propagators " + c.Propagators
	}
	return s
}

// FromEnv reads the tracing configuration from the OTEL_* variables getenv
// returns. Tracing is on when
//
//   - OTEL_TRACES_EXPORTER is "otlp", or
//   - OTEL_TRACES_EXPORTER is unset and OTEL_EXPORTER_OTLP_ENDPOINT or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
//
// and OTEL_SDK_DISABLED is not "true" (which turns it off whatever else is
// set). OTEL_TRACES_EXPORTER "none" turns it off. The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf. OTEL_PROPAGATORS lists the trace context formats
// (tracecontext, baggage, none; default tracecontext,baggage). Another
// exporter, protocol or propagator (console, zipkin, http/json, b3) is an
// error wrapping chatmem.ErrInvalid, as is an OTEL_SDK_DISABLED that is
// not a boolean; OTEL_PROPAGATORS is only checked when tracing is on.
func FromEnv(getenv func(string) string) (Config, error) {
	switch v := strings.ToLower(strings.TrimSpace(getenv("OTEL_SDK_DISABLED"))); v {
	case "true":
		return Config{Why: "OTEL_SDK_DISABLED=true"}, nil
	case "", "false":
	default:
		return Config{}, fmt.Errorf("%w: OTEL_SDK_DISABLED=%q: want true or false", chatmem.ErrInvalid, v)
	}
	endpoint := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	if endpoint == "" {
		endpoint = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	switch v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v {
	case "none":
		return Config{Why: "OTEL_TRACES_EXPORTER=none"}, nil
	case "":
		if endpoint == "" {
			return Config{Why: "no OTEL_TRACES_EXPORTER or OTLP endpoint set"}, nil
		}
	case "otlp":
	default:
		return Config{}, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: chatmem exports traces over otlp (or none)", chatmem.ErrInvalid, v)
	}
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch proto {
	case "":
		proto = ProtocolHTTP
	case ProtocolHTTP, ProtocolGRPC:
	default:
		return Config{}, fmt.Errorf("%w: OTLP protocol %q: want %s or %s", chatmem.ErrInvalid, proto, ProtocolHTTP, ProtocolGRPC)
	}
	props, err := propagatorsOf(getenv("OTEL_PROPAGATORS"))
	if err != nil {
		return Config{}, err
	}
	return Config{Enabled: true, Protocol: proto, Endpoint: endpoint, Propagators: props}, nil
}

// propagatorsOf checks an OTEL_PROPAGATORS value and returns it trimmed,
// without repeats: empty for the default, "none" alone or the formats
// chatmem speaks.
func propagatorsOf(v string) (string, error) {
	var out []string
	for _, p := range strings.Split(v, ",") {
		switch p = strings.ToLower(strings.TrimSpace(p)); p {
		case "":
		case "tracecontext", "baggage", "none":
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		default:
			return "", fmt.Errorf("%w: OTEL_PROPAGATORS: propagator %q: chatmem speaks tracecontext and baggage (or none)", chatmem.ErrInvalid, p)
		}
	}
	if slices.Contains(out, "none") {
		if len(out) > 1 {
			return "", fmt.Errorf("%w: OTEL_PROPAGATORS=%q: none with other propagators", chatmem.ErrInvalid, v)
		}
	}
	return strings.Join(out, ","), nil
}

// propagator is the composite propagator of a Config's Propagators.
func propagator(props string) propagation.TextMapPropagator {
	if props == "" {
		props = "tracecontext,baggage"
	}
	var ps []propagation.TextMapPropagator
	for _, p := range strings.Split(props, ",") {
		switch p {
		case "tracecontext":
			ps = append(ps, propagation.TraceContext{})
		case "baggage":
			ps = append(ps, propagation.Baggage{})
		}
	}
	return propagation.NewCompositeTextMapPropagator(ps...)
}

// Options describe the process for its spans.
type Options struct {
	// ServiceVersion is service.version. The service's name is
	// OTEL_SERVICE_NAME, else "chatmem".
	ServiceVersion string
	// StoreSystem is db.system.name on the store's spans ("sqlite",
	// "redis", "postgresql"); empty leaves it out.
	StoreSystem string
	// Logger receives the exporter's errors (a collector that cannot be
	// reached). Nil: they are dropped.
	Logger *slog.Logger
}

// Tracer is a chatmem.Tracer over an OpenTelemetry tracer provider that
// exports spans over OTLP in batches. It is safe for concurrent use;
// Shutdown flushes what is still batched.
type Tracer struct {
	tp       *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	dbSystem attribute.KeyValue
	hasDB    bool
}

var _ chatmem.Tracer = (*Tracer)(nil)

// New starts tracing as cfg says, which must be Enabled. It makes no
// request: the exporter connects when it first exports. A bad exporter
// setting in the environment (an endpoint that does not parse) is an
// error.
func New(ctx context.Context, cfg Config, opts Options) (*Tracer, error) {
	if !cfg.Enabled {
		return nil, fmt.Errorf("%w: telemetry.New with tracing off (%s)", chatmem.ErrInvalid, cfg.Why)
	}
	var client otlptrace.Client
	switch cfg.Protocol {
	case ProtocolGRPC:
		client = otlptracegrpc.NewClient()
	default:
		client = otlptracehttp.NewClient()
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName("chatmem")}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(opts.ServiceVersion))
	}
	// Later sources win: the environment's OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES over chatmem's defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	if opts.Logger != nil {
		// The SDK reports export failures to its one, process-wide error
		// handler: the server's log is where an operator looks.
		log := opts.Logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("opentelemetry", "error", err.Error())
		}))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t := &Tracer{
		tp:     tp,
		tracer: tp.Tracer("github.com/chatmem/chatmem"),
		prop:   propagator(cfg.Propagators),
	}
	if opts.StoreSystem != "" {
		t.dbSystem, t.hasDB = semconv.DBSystemNameKey.String(opts.StoreSystem), true
	}
	return t, nil
}

// Shutdown exports the spans still batched and stops the exporter; spans
// ended after it are dropped. ctx bounds the wait.
func (t *Tracer) Shutdown(ctx context.Context) error {
	return t.tp.Shutdown(ctx)
}

// Start begins a span; see chatmem.Tracer.
func (t *Tracer) Start(ctx context.Context, name string, kind chatmem.SpanKind, attrs ...chatmem.Attr) (context.Context, chatmem.Span) {
	kv := make([]attribute.KeyValue, 0, len(attrs)+1)
	sk := trace.SpanKindInternal
	switch kind {
	case chatmem.SpanServer:
		sk = trace.SpanKindServer
	case chatmem.SpanClient:
		sk = trace.SpanKindClient
	case chatmem.SpanStore:
		sk = trace.SpanKindClient
		if t.hasDB {
			kv = append(kv, t.dbSystem)
		}
	}
	kv = appendAttrs(kv, attrs)
	ctx, sp := t.tracer.Start(ctx, name, trace.WithSpanKind(sk), trace.WithAttributes(kv...))
	return ctx, span{sp}
}

// Inject writes ctx's trace context (traceparent, tracestate, baggage).
func (t *Tracer) Inject(ctx context.Context, set func(key, value string)) {
	t.prop.Inject(ctx, setter(set))
}

// Extract reads a remote trace context (traceparent, tracestate, baggage).
func (t *Tracer) Extract(ctx context.Context, get func(key string) string) context.Context {
	return t.prop.Extract(ctx, getter(get))
}

// setter and getter adapt functions to the propagators' carrier. Keys()
// is not needed by the W3C propagators, which ask for their headers by
// name.
type setter func(key, value string)

func (s setter) Get(string) string     { return "" }
func (s setter) Set(key, value string) { s(key, value) }
func (s setter) Keys() []string        { return nil }

type getter func(key string) string

func (g getter) Get(key string) string { return g(key) }
func (g getter) Set(string, string)    {}
func (g getter) Keys() []string        { return nil }

// span is a chatmem.Span over an OpenTelemetry span.
type span struct{ s trace.Span }

func (s span) SetName(name string) { s.s.SetName(name) }

func (s span) SetAttributes(attrs ...chatmem.Attr) {
	s.s.SetAttributes(appendAttrs(make([]attribute.KeyValue, 0, len(attrs)), attrs)...)
}

// End ends the span, with err recorded and the status Error if err is not
// nil. A canceled call is the caller's decision, not a failure: it is
// recorded without the Error status.
func (s span) End(err error) {
	if err != nil {
		s.s.RecordError(err)
		if !errors.Is(err, context.Canceled) {
			s.s.SetStatus(codes.Error, err.Error())
		}
	}
	s.s.End()
}

// appendAttrs appends attrs to kv as OpenTelemetry attributes.
func appendAttrs(kv []attribute.KeyValue, attrs []chatmem.Attr) []attribute.KeyValue {
	for _, a := range attrs {
		k := attribute.Key(a.Key)
		switch v := a.Value.(type) {
		case string:
			kv = append(kv, k.String(v))
		case bool:
			kv = append(kv, k.Bool(v))
		case int:
			kv = append(kv, k.Int(v))
		case int64:
			kv = append(kv, k.Int64(v))
		case float64:
			kv = append(kv, k.Float64(v))
		case []string:
			kv = append(kv, k.StringSlice(v))
		case []int64:
			kv = append(kv, k.Int64Slice(v))
		default:
			kv = append(kv, k.String(fmt.Sprint(v)))
		}
	}
	return kv
}

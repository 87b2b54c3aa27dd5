package telemetry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TestFromEnv: tracing is off unless an OTLP exporter or endpoint is asked
// for, OTEL_SDK_DISABLED=true wins over everything, the traces' protocol
// over the general one, and a value chatmem cannot honour is refused.
func TestFromEnv(t *testing.T) {
	for _, tt := range []struct {
		env  map[string]string
		want Config
		err  bool
	}{
		{env: nil, want: Config{Why: "no OTEL_TRACES_EXPORTER or OTLP endpoint set"}},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, want: Config{Why: "no OTEL_TRACES_EXPORTER or OTLP endpoint set"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: Config{Enabled: true, Protocol: ProtocolHTTP}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: Config{Enabled: true, Protocol: ProtocolHTTP, Endpoint: "http://collector:4318"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/v1/traces"},
			want: Config{Enabled: true, Protocol: ProtocolHTTP, Endpoint: "http://b:4318/v1/traces"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, want: Config{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://a:4317"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, want: Config{Enabled: true, Protocol: ProtocolHTTP}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_SDK_DISABLED": "true"}, want: Config{Why: "OTEL_SDK_DISABLED=true"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "TRUE"}, want: Config{Why: "OTEL_SDK_DISABLED=true"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"}, want: Config{Enabled: true, Protocol: ProtocolHTTP}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_TRACES_EXPORTER": "none"}, want: Config{Why: "OTEL_TRACES_EXPORTER=none"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_PROPAGATORS": " baggage, tracecontext,baggage "}, want: Config{Enabled: true, Protocol: ProtocolHTTP, Propagators: "baggage,tracecontext"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_PROPAGATORS": "none"}, want: Config{Enabled: true, Protocol: ProtocolHTTP, Propagators: "none"}},
		{env: map[string]string{"OTEL_PROPAGATORS": "b3"}, want: Config{Why: "no OTEL_TRACES_EXPORTER or OTLP endpoint set"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_PROPAGATORS": "tracecontext,b3"}, err: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_PROPAGATORS": "none,baggage"}, err: true},
		{env: map[string]string{"OTEL_SDK_DISABLED": "yes"}, err: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, err: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
	} {
		got, err := FromEnv(func(k string) string { return tt.env[k] })
		if tt.err {
			if !errors.Is(err, chatmem.ErrInvalid) {
				t.Errorf("FromEnv(%v) = %+v, %v; want ErrInvalid", tt.env, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("FromEnv(%v) = %+v, %v; want %+v", tt.env, got, err, tt.want)
		}
	}
}

// TestPropagation: a W3C traceparent extracted is the parent of the span
// started from it, and the span's own context is what is injected.
func TestPropagation(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
	tr, err := New(t.Context(), Config{Enabled: true, Protocol: ProtocolHTTP}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background()) // nothing reaches port 9; Shutdown gives up with the context
	in := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "vendor=x"}
	ctx := tr.Extract(t.Context(), func(k string) string { return in[k] })
	ctx, sp := tr.Start(ctx, "op", chatmem.SpanClient)
	out := map[string]string{}
	tr.Inject(ctx, func(k, v string) { out[k] = v })
	sp.End(nil)
	tp := out["traceparent"]
	if len(tp) != 55 || tp[:36] != "00-4bf92f3577b34da6a3ce929d0e0e4736-" || tp[36:52] == "00f067aa0ba902b7" || tp[52:] != "-01" {
		t.Errorf("injected traceparent %q, want the trace 4bf92f3577b34da6a3ce929d0e0e4736 with a span of its own", tp)
	}
	if out["tracestate"] != "vendor=x" {
		t.Errorf("injected tracestate %q, want vendor=x", out["tracestate"])
	}
}

// TestPropagators: OTEL_PROPAGATORS chooses what crosses processes:
// baggage alone reads and writes no traceparent, none nothing at all, and
// the default both trace context and baggage.
func TestPropagators(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
	in := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "baggage": "tenant=acme"}
	for _, tt := range []struct {
		props             string
		trace, baggageOut bool
	}{
		{"", true, true},
		{"tracecontext", true, false},
		{"baggage", false, true},
		{"none", false, false},
	} {
		tr, err := New(t.Context(), Config{Enabled: true, Protocol: ProtocolHTTP, Propagators: tt.props}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := tr.Extract(t.Context(), func(k string) string { return in[k] })
		ctx, sp := tr.Start(ctx, "op", chatmem.SpanClient)
		out := map[string]string{}
		tr.Inject(ctx, func(k, v string) { out[k] = v })
		sp.End(nil)
		continued := strings.HasPrefix(out["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-")
		if continued != tt.trace || (out["traceparent"] != "") != tt.trace {
			t.Errorf("OTEL_PROPAGATORS=%q: injected traceparent %q; want the client's trace continued: %v", tt.props, out["traceparent"], tt.trace)
		}
		if got := out["baggage"] == "tenant=acme"; got != tt.baggageOut || (!tt.baggageOut && out["baggage"] != "") {
			t.Errorf("OTEL_PROPAGATORS=%q: injected baggage %q; want it relayed: %v", tt.props, out["baggage"], tt.baggageOut)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = tr.Shutdown(ctx) // nothing reaches port 9
		cancel()
	}
}

package telemetry

import (
	"context"
	"errors"
	"testing"

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

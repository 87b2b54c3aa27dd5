// Package genai traces calls to models as the OpenTelemetry semantic
// conventions for generative AI describe them (gen_ai.* attributes on a
// client span named "{operation} {model}"), through the dependency-free
// chatmem.Tracer hook: the packages that call models (openai, anthropic,
// httpapi's proxy) use it without depending on OpenTelemetry.
package genai

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"

	"github.com/chatmem/chatmem"
)

// The operations (gen_ai.operation.name) chatmem's model calls are.
const (
	OpChat       = "chat"
	OpEmbeddings = "embeddings"
)

// The providers (gen_ai.provider.name). An OpenAI-compatible server that is
// not OpenAI's own is traced as "openai", the API it speaks.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// Request is what a call sends, known before it is made.
type Request struct {
	Operation string // OpChat, OpEmbeddings
	Provider  string // ProviderOpenAI, ProviderAnthropic
	Model     string // gen_ai.request.model
	// MaxTokens and Temperature are the request's, if set (Temperature
	// below zero: not sent).
	MaxTokens   int
	Temperature float64
	// ServerURL is the API's address: server.address and server.port.
	ServerURL string
	// Purpose says what chatmem made the call for: "proxy", "summarizer",
	// "extractor", "embedder" (chatmem.model.purpose).
	Purpose string
}

// Response is what the answer said. Zero fields are left out.
type Response struct {
	ID           string
	Model        string
	InputTokens  int
	OutputTokens int
	// CachedInputTokens are the input tokens the provider read from its
	// prompt cache (gen_ai.usage.cache_read.input_tokens).
	CachedInputTokens int
	FinishReasons     []string
	// Dimensions is the length of the vectors of an embeddings call.
	Dimensions int
}

// Call is one traced model call. A nil *Call (no tracer) does nothing.
type Call struct {
	span chatmem.Span
}

// Start begins the span of a call to req's model as a child of ctx's span
// and returns ctx carrying it; with a nil tracer it returns ctx and a nil
// Call, having done nothing.
func Start(ctx context.Context, t chatmem.Tracer, req Request) (context.Context, *Call) {
	if t == nil {
		return ctx, nil
	}
	name := req.Operation
	if req.Model != "" {
		name += " " + req.Model
	}
	attrs := []chatmem.Attr{
		{Key: "gen_ai.operation.name", Value: req.Operation},
		{Key: "gen_ai.provider.name", Value: req.Provider},
	}
	if req.Model != "" {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.request.model", Value: req.Model})
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.request.max_tokens", Value: req.MaxTokens})
	}
	if req.Operation == OpChat && req.Temperature >= 0 {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.request.temperature", Value: req.Temperature})
	}
	if req.Purpose != "" {
		attrs = append(attrs, chatmem.Attr{Key: "chatmem.model.purpose", Value: req.Purpose})
	}
	if host, port := serverOf(req.ServerURL); host != "" {
		attrs = append(attrs, chatmem.Attr{Key: "server.address", Value: host})
		if port > 0 {
			attrs = append(attrs, chatmem.Attr{Key: "server.port", Value: port})
		}
	}
	ctx, sp := t.Start(ctx, name, chatmem.SpanClient, attrs...)
	return ctx, &Call{span: sp}
}

// serverOf returns the host and port of an API's address; the port is the
// scheme's when the address names none.
func serverOf(raw string) (string, int) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", 0
	}
	host, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		host = u.Host
		switch u.Scheme {
		case "https":
			return host, 443
		case "http":
			return host, 80
		}
		return host, 0
	}
	port, _ := strconv.Atoi(p)
	return host, port
}

// End ends the call's span with what the answer said, or err. A call that
// failed is marked with error.type (the error's chatmem class) as well.
func (c *Call) End(res Response, err error) {
	if c == nil {
		return
	}
	attrs := make([]chatmem.Attr, 0, 8)
	if res.ID != "" {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.response.id", Value: res.ID})
	}
	if res.Model != "" {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.response.model", Value: res.Model})
	}
	if res.InputTokens > 0 {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.usage.input_tokens", Value: res.InputTokens})
	}
	if res.OutputTokens > 0 {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.usage.output_tokens", Value: res.OutputTokens})
	}
	if res.CachedInputTokens > 0 {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.usage.cache_read.input_tokens", Value: res.CachedInputTokens})
	}
	if len(res.FinishReasons) > 0 {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.response.finish_reasons", Value: res.FinishReasons})
	}
	if res.Dimensions > 0 {
		attrs = append(attrs, chatmem.Attr{Key: "gen_ai.embeddings.dimension.count", Value: res.Dimensions})
	}
	if err != nil {
		attrs = append(attrs, chatmem.Attr{Key: "error.type", Value: errorType(err)})
	}
	c.span.SetAttributes(attrs...)
	c.span.End(err)
}

// Inject writes the call's trace context into a request's headers with
// set, so that the model server continues the trace; nothing without a
// tracer.
func Inject(ctx context.Context, t chatmem.Tracer, set func(key, value string)) {
	if t != nil {
		t.Inject(ctx, set)
	}
}

// errorType is error.type for a failed call: what err says of itself
// (an error with an ErrorType method, such as an HTTP status), else the
// chatmem class of err, else "_OTHER".
func errorType(err error) string {
	var typed interface{ ErrorType() string }
	switch {
	case errors.As(err, &typed):
		return typed.ErrorType()
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, chatmem.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, chatmem.ErrInvalid):
		return "invalid"
	}
	return "_OTHER"
}

package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/genai"
)

// The server traces through Options.Tracer, the dependency-free hook the
// telemetry package implements with OpenTelemetry: a server span per
// request, continuing the client's W3C trace context (startRequest); a
// client span per call to the upstream, with the GenAI conventions'
// attributes, whose trace context the upstream gets (startUpstream). The
// Memory's spans (context assembly, store calls) are children of the
// request's. Without a Tracer none of this runs.

// startRequest starts r's server span, the child of the trace context r
// carries, and returns r with it in its context; sp is nil without a
// tracer.
func (s *Server) startRequest(r *http.Request) (_ *http.Request, sp chatmem.Span) {
	if s.tracer == nil {
		return r, nil
	}
	ctx := s.tracer.Extract(r.Context(), r.Header.Get)
	attrs := []chatmem.Attr{
		{Key: "http.request.method", Value: r.Method},
		{Key: "url.path", Value: r.URL.Path},
		{Key: "url.scheme", Value: schemeOf(r)},
		{Key: "network.protocol.version", Value: strings.TrimPrefix(r.Proto, "HTTP/")},
	}
	if r.URL.RawQuery != "" {
		attrs = append(attrs, chatmem.Attr{Key: "url.query", Value: r.URL.RawQuery})
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, chatmem.Attr{Key: "user_agent.original", Value: ua})
	}
	if host, port := hostPort(r.Host); host != "" {
		attrs = append(attrs, chatmem.Attr{Key: "server.address", Value: host})
		if port > 0 {
			attrs = append(attrs, chatmem.Attr{Key: "server.port", Value: port})
		}
	}
	if host, _ := hostPort(r.RemoteAddr); host != "" {
		attrs = append(attrs, chatmem.Attr{Key: "client.address", Value: host})
	}
	ctx, sp = s.tracer.Start(ctx, r.Method, chatmem.SpanServer, attrs...)
	return r.WithContext(ctx), sp
}

// endRequest ends a request's server span: named for its route, with the
// status, and failed for a 5xx (a 4xx is the client's, not the server's,
// failure).
func endRequest(sp chatmem.Span, r *http.Request, info *reqInfo, status int) {
	attrs := []chatmem.Attr{
		{Key: "http.response.status_code", Value: status},
		{Key: "chatmem.request_id", Value: info.id},
	}
	if info.route != routeUnmatched {
		sp.SetName(r.Method + " " + info.route)
		attrs = append(attrs, chatmem.Attr{Key: "http.route", Value: info.route})
	}
	if info.tenant != "" {
		attrs = append(attrs, chatmem.Attr{Key: "chatmem.tenant", Value: info.tenant})
	}
	if info.code != "" {
		attrs = append(attrs, chatmem.Attr{Key: "chatmem.error.code", Value: info.code})
	}
	var err error
	if status >= 500 {
		attrs = append(attrs, chatmem.Attr{Key: "error.type", Value: strconv.Itoa(status)})
		err = info.err
		if err == nil {
			err = errStatus(status)
		}
	}
	sp.SetAttributes(attrs...)
	sp.End(err)
}

// ErrorType is the upstream's status, the error.type of the span of the
// call that got it.
func (e *upstreamError) ErrorType() string { return strconv.Itoa(e.status) }

// errStatus is the error a failed request's span records when the
// handler left none.
type errStatus int

func (e errStatus) Error() string { return strconv.Itoa(int(e)) + " " + http.StatusText(int(e)) }

func schemeOf(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// hostPort splits "host:port" (a Host header, a RemoteAddr); port 0 when
// there is none.
func hostPort(hp string) (string, int) {
	i := strings.LastIndexByte(hp, ':')
	if i < 0 || strings.HasSuffix(hp, "]") {
		return strings.Trim(hp, "[]"), 0
	}
	port, _ := strconv.Atoi(hp[i+1:])
	return strings.Trim(hp[:i], "[]"), port
}

// upstreamCall is a traced call to the upstream: its span ends when the
// answer's body is closed (watch), or with the error that ended the call.
// A nil *upstreamCall (no tracer) does nothing.
type upstreamCall struct {
	call *genai.Call
	span chatmem.Span // a call that is not a chat (the model list)
}

// startUpstream starts the span of a call to the upstream and returns ctx
// carrying it. A call with a body is a chat completion (the chat proxy's
// and the Responses API's), traced as GenAI's "chat {model}"; one without
// is the model list, a plain HTTP client span.
//
// The provider (gen_ai.provider.name) is the one client's Transport names
// with a GenAIProvider method (the Anthropic transport: "anthropic"),
// else "openai", the API the upstream speaks.
func (s *Server) startUpstream(ctx context.Context, client *http.Client, method, url string, body []byte) (context.Context, *upstreamCall) {
	if s.tracer == nil {
		return ctx, nil
	}
	if body == nil {
		ctx, sp := s.tracer.Start(ctx, method, chatmem.SpanClient,
			chatmem.Attr{Key: "http.request.method", Value: method}, chatmem.Attr{Key: "url.full", Value: url})
		return ctx, &upstreamCall{span: sp}
	}
	var req struct {
		Model               string   `json:"model"`
		MaxTokens           int      `json:"max_tokens"`
		MaxCompletionTokens int      `json:"max_completion_tokens"`
		Temperature         *float64 `json:"temperature"`
	}
	_ = json.Unmarshal(body, &req)
	g := genai.Request{
		Operation: genai.OpChat, Provider: providerOf(client), Model: req.Model,
		MaxTokens: max(req.MaxTokens, req.MaxCompletionTokens), Temperature: -1, ServerURL: url, Purpose: "proxy",
	}
	if req.Temperature != nil {
		g.Temperature = *req.Temperature
	}
	ctx, call := genai.Start(ctx, s.tracer, g)
	return ctx, &upstreamCall{call: call}
}

// providerOf is the GenAI provider of an upstream reached through client:
// what its Transport says it translates to, else OpenAI.
func providerOf(client *http.Client) string {
	if client != nil {
		if p, ok := client.Transport.(interface{ GenAIProvider() string }); ok {
			return p.GenAIProvider()
		}
	}
	return genai.ProviderOpenAI
}

// fail ends the call's span with err.
func (u *upstreamCall) fail(err error) {
	if u == nil {
		return
	}
	if u.span != nil {
		u.span.End(err)
		return
	}
	u.call.End(genai.Response{}, err)
}

// watch returns resp's body, read through a reader that finds what the
// answer says of the call (its id, model, usage and finish reasons) in
// a chat completion or in a stream's chunks, and ends the span when it is
// closed.
func (u *upstreamCall) watch(resp *http.Response) io.ReadCloser {
	if u == nil {
		return resp.Body
	}
	if u.span != nil {
		u.span.SetAttributes(chatmem.Attr{Key: "http.response.status_code", Value: resp.StatusCode})
	}
	return &answerReader{rc: resp.Body, u: u, stream: strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")}
}

// maxTracedAnswer bounds what answerReader keeps of an answer that is not
// a stream: beyond it, the answer is not decoded for its span.
const maxTracedAnswer = maxUpstreamBody

// answerReader reads an upstream's answer for the proxy and, on the side,
// for its span.
type answerReader struct {
	rc     io.ReadCloser
	u      *upstreamCall
	stream bool
	buf    []byte // the answer so far, or the stream's unfinished line
	over   bool   // the answer outgrew maxTracedAnswer
	res    genai.Response
	ended  bool
}

func (a *answerReader) Read(p []byte) (int, error) {
	n, err := a.rc.Read(p)
	if n > 0 && a.u.span == nil {
		a.take(p[:n])
	}
	return n, err
}

// take follows the answer: a stream line by line (each "data:" line a
// chunk), anything else whole.
func (a *answerReader) take(b []byte) {
	if !a.stream {
		if !a.over && len(a.buf)+len(b) <= maxTracedAnswer {
			a.buf = append(a.buf, b...)
		} else {
			a.over, a.buf = true, nil
		}
		return
	}
	a.buf = append(a.buf, b...)
	for {
		i := bytes.IndexByte(a.buf, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimRight(a.buf[:i], "\r")
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			a.chunk(bytes.TrimSpace(data))
		}
		a.buf = a.buf[i+1:]
	}
	if len(a.buf) > maxTracedAnswer {
		a.buf = nil // a line that long is no chunk the proxy takes either
	}
	a.buf = append(a.buf[:0:0], a.buf...) // let go of what was read
}

// chunk takes what a chat completion or one of a stream's chunks says.
func (a *answerReader) chunk(data []byte) {
	if len(data) == 0 || data[0] != '{' {
		return // [DONE]
	}
	var cc struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *chatUsage `json:"usage"`
	}
	if json.Unmarshal(data, &cc) != nil {
		return
	}
	if cc.ID != "" {
		a.res.ID = cc.ID
	}
	if cc.Model != "" {
		a.res.Model = cc.Model
	}
	for _, ch := range cc.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.res.FinishReasons = append(a.res.FinishReasons, *ch.FinishReason)
		}
	}
	if u := cc.Usage; u != nil {
		a.res.InputTokens, a.res.OutputTokens = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			a.res.CachedInputTokens = u.PromptTokensDetails.CachedTokens
		}
	}
}

// Close closes the body and ends the span with what the answer said.
func (a *answerReader) Close() error {
	err := a.rc.Close()
	if a.ended {
		return err
	}
	a.ended = true
	if a.u.span != nil {
		a.u.span.End(nil)
		return err
	}
	if !a.stream && !a.over {
		a.chunk(a.buf)
	}
	a.buf = nil
	a.u.call.End(a.res, nil)
	return err
}

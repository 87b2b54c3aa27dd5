// Package chatwire holds what the transports that answer OpenAI Chat
// Completions requests from another API (anthropic's Messages, openai's
// Responses) share of the Chat Completions wire format: its request and
// answer types (types.go), its error body, the error type of a status,
// the synthesized *http.Response, a streamed body that also closes the
// upstream's, and one server-sent event.
package chatwire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// ErrorBody is an OpenAI error answer: {"error":{...}}.
type ErrorBody struct {
	Error Error `json:"error"`
}

// Error is the error of an OpenAI error answer; param and code are null,
// not left out, when absent, as OpenAI sends them.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// ErrorType is the OpenAI error type of an HTTP status.
func ErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// ErrorResponse is an OpenAI error answer of status with msg and, if not
// empty, code; h (which may be nil) holds the headers to send with it,
// to which it adds Content-Type.
func ErrorResponse(req *http.Request, status int, msg, code string, h http.Header) *http.Response {
	e := Error{Message: msg, Type: ErrorType(status)}
	if code != "" {
		e.Code = &code
	}
	body, _ := json.Marshal(ErrorBody{Error: e})
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	return NewResponse(req, status, h, body)
}

// NewResponse is an HTTP/1.1 answer to req of status, with h and body.
func NewResponse(req *http.Request, status int, h http.Header, body []byte) *http.Response {
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// StreamBody is a streamed answer's body, the reading end of the pipe a
// relay writes the translated events to: closing it also closes the
// upstream's stream, so a reader that goes away ends the upstream request
// at once rather than at the next event.
type StreamBody struct {
	*io.PipeReader
	Upstream io.Closer
}

// Close closes the pipe and the upstream's stream.
func (b *StreamBody) Close() error {
	b.PipeReader.Close()
	return b.Upstream.Close()
}

// WriteData writes v as one server-sent event: "data: JSON" and a blank
// line.
func WriteData(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}

// StreamResponse is a streamed answer to req with h: it starts relay,
// which writes the translated events of upstream to the pipe whose
// reading end is the answer's body.
func StreamResponse(req *http.Request, h http.Header, upstream io.ReadCloser, relay func(src io.ReadCloser, dst *io.PipeWriter)) *http.Response {
	pr, pw := io.Pipe()
	go relay(upstream, pw)
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	r := NewResponse(req, http.StatusOK, h, nil)
	r.Body = &StreamBody{PipeReader: pr, Upstream: upstream}
	r.ContentLength = -1
	return r
}

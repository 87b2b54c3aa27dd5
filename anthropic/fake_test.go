package anthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeAnthropic is an httptest server that speaks the wire format of
// Anthropic's Messages API, POST /v1/messages: it decodes the request body
// as the API defines it (model, max_tokens, system as a string or text
// blocks, messages whose content is a string or an array of blocks), checks
// the x-api-key and anthropic-version headers and the JSON content type,
// and answers with a message object (id, type "message", role, model,
// content blocks, stop_reason, stop_sequence, usage) or with the API's
// error body {"type":"error","error":{"type","message"},"request_id"} and
// its status and request-id header. Like the real API it answers 401
// authentication_error to a wrong key, 404 not_found_error to an unknown
// model, and 400 invalid_request_error to a request without max_tokens,
// without messages, with an empty text block, with a role other than user
// and assistant, with a last message that is not the user's (newer models
// refuse prefill), or with temperature, top_p or top_k (removed in API
// version 2026-10-21, which the SDK sends).
type fakeAnthropic struct {
	*httptest.Server
	key   string
	model string

	mu      sync.Mutex
	reqs    []messagesRequest
	headers []http.Header
	// reply, if set, answers the n-th request (from 1); nil answers
	// "A summary." with stop_reason "end_turn".
	reply func(n int, req messagesRequest) fakeReply
}

// fakeReply is one answer of the fake: a message, or an error status.
type fakeReply struct {
	text       string
	thinking   string // if set, a thinking block comes before the text
	stopReason string // "" means "end_turn"
	// status, when not 200 or 0, sends an error of errType with that status.
	status  int
	errType string
	errMsg  string
	raw     string // if set, the error body as it is
	header  map[string]string
	// hang waits until the client gives up on the request.
	hang bool
}

// messagesRequest is the request body as the API defines it.
type messagesRequest struct {
	Model        string            `json:"model"`
	MaxTokens    *int              `json:"max_tokens"`
	System       json.RawMessage   `json:"system"`
	Messages     []messagesMessage `json:"messages"`
	Temperature  *float64          `json:"temperature"`
	TopP         *float64          `json:"top_p"`
	TopK         *int              `json:"top_k"`
	ToolChoice   json.RawMessage   `json:"tool_choice"`
	Tools        json.RawMessage   `json:"tools"`
	OutputConfig json.RawMessage   `json:"output_config"`
}

type messagesMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// blocksText returns content given as a string or as blocks, the text
// blocks joined; ok is false if a text block is empty or content is neither.
func blocksText(raw json.RawMessage) (text string, ok bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, s != ""
	}
	var blocks []block
	if json.Unmarshal(raw, &blocks) != nil || len(blocks) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" && bl.Text == "" {
			return "", false
		}
		b.WriteString(bl.Text)
	}
	return b.String(), true
}

// system returns the request's system prompt text.
func (r messagesRequest) system() string {
	s, _ := blocksText(r.System)
	return s
}

// user returns the text of the request's only user message.
func (r messagesRequest) user() string {
	var found []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			s, _ := blocksText(m.Content)
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		return fmt.Sprintf("<%d user messages>", len(found))
	}
	return found[0]
}

func newFakeAnthropic(t *testing.T) *fakeAnthropic {
	t.Helper()
	f := &fakeAnthropic{key: "sk-ant-test", model: "claude-test"}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// options returns Options for the fake, with the SDK's retries off.
func (f *fakeAnthropic) options() Options {
	return Options{BaseURL: f.URL, APIKey: f.key, Model: f.model, MaxRetries: -1}
}

func (f *fakeAnthropic) summarizer(t *testing.T) *Summarizer {
	t.Helper()
	s, err := NewSummarizer(f.options())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fakeAnthropic) extractor(t *testing.T, mod func(*ExtractorOptions)) *Extractor {
	t.Helper()
	opts := ExtractorOptions{Options: f.options()}
	if mod != nil {
		mod(&opts)
	}
	x, err := NewExtractor(opts)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func (f *fakeAnthropic) requests() []messagesRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]messagesRequest(nil), f.reqs...)
}

// last returns the last request and its headers.
func (f *fakeAnthropic) last(t *testing.T) (messagesRequest, http.Header) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the fake received no request")
	}
	return f.reqs[len(f.reqs)-1], f.headers[len(f.headers)-1]
}

// apiError returns the API's error body.
func apiError(errType, message string) string {
	b, _ := json.Marshal(map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": errType, "message": message},
		"request_id": "req_011test",
	})
	return string(b)
}

func writeError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", "req_011test")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

var apiVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// invalid returns why the API would refuse req with a 400, or "".
func invalid(req messagesRequest) string {
	switch {
	case req.MaxTokens == nil:
		return "max_tokens: Field required"
	case *req.MaxTokens < 1:
		return "max_tokens: Input should be greater than or equal to 1"
	case req.Temperature != nil || req.TopP != nil || req.TopK != nil:
		return "temperature, top_p and top_k are not supported in this API version"
	case len(req.Messages) == 0:
		return "messages: at least one message is required"
	case req.Messages[len(req.Messages)-1].Role != "user":
		return "This model does not support assistant message prefill. The conversation must end with a user message."
	}
	if len(req.System) > 0 {
		if _, ok := blocksText(req.System); !ok {
			return "system: text content blocks must be non-empty"
		}
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if _, ok := blocksText(m.Content); !ok {
			return fmt.Sprintf("messages.%d: text content blocks must be non-empty", i)
		}
	}
	return ""
}

func (f *fakeAnthropic) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		writeError(w, http.StatusNotFound, apiError("not_found_error", "Not found: "+r.Method+" "+r.URL.Path))
		return
	}
	// Every request is recorded, refused ones too, so tests can look at
	// what was sent.
	var req messagesRequest
	body, _ := io.ReadAll(r.Body)
	parseErr := json.Unmarshal(body, &req)
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.headers = append(f.headers, r.Header.Clone())
	n := len(f.reqs)
	reply := f.reply
	f.mu.Unlock()

	switch {
	case r.Header.Get("X-Api-Key") != f.key:
		writeError(w, http.StatusUnauthorized, apiError("authentication_error", "invalid x-api-key"))
		return
	case !apiVersion.MatchString(r.Header.Get("Anthropic-Version")):
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "anthropic-version: header is required"))
		return
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "Content-Type must be application/json"))
		return
	case parseErr != nil:
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", "Request body is not valid JSON"))
		return
	case req.Model != f.model:
		writeError(w, http.StatusNotFound, apiError("not_found_error", "model: "+req.Model))
		return
	}
	if why := invalid(req); why != "" {
		writeError(w, http.StatusBadRequest, apiError("invalid_request_error", why))
		return
	}
	rep := fakeReply{text: "A summary."}
	if reply != nil {
		rep = reply(n, req)
	}
	if rep.hang {
		<-r.Context().Done()
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		body := rep.raw
		if body == "" {
			body = apiError(rep.errType, rep.errMsg)
		}
		writeError(w, rep.status, body)
		return
	}
	stop := rep.stopReason
	if stop == "" {
		stop = "end_turn"
	}
	var content []any
	if rep.thinking != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": rep.thinking, "signature": "sig_test"})
	}
	content = append(content, map[string]any{"type": "text", "text": rep.text})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("request-id", fmt.Sprintf("req_%d", n))
	json.NewEncoder(w).Encode(map[string]any{
		"id":            fmt.Sprintf("msg_01test%d", n),
		"type":          "message",
		"role":          "assistant",
		"model":         f.model,
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": len(body) / 4, "output_tokens": len(rep.text) / 4,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
		},
	})
}

package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem/internal/llm/llmtest"
)

// fakeOpenAI is an httptest server that speaks the wire format of the
// OpenAI Chat Completions API, POST /v1/chat/completions: it decodes the
// request body as the API defines it (model, messages with string or
// text-part content, temperature, max_completion_tokens or max_tokens,
// response_format), checks "Authorization: Bearer KEY" and the JSON content
// type, and answers with a chat.completion object (choices[0].message with
// content and refusal, finish_reason, usage) or with the API's error body
// {"error":{"message","type","param","code"}} and its status. Like the
// real API it answers 401 to a wrong key, 404 to an unknown model and 400
// to a request without messages.
type fakeOpenAI struct {
	*httptest.Server
	key   string
	model string

	mu      sync.Mutex
	reqs    []chatRequest
	headers []http.Header
	// reply, if set, answers the n-th request (from 1); nil answers
	// "A summary." with finish_reason "stop".
	reply func(n int, req chatRequest) fakeReply
}

// fakeReply is one answer of the fake: a completion, or an error status.
type fakeReply struct {
	content      string
	refusal      string
	finishReason string // "" means "stop"
	// status, when not 200 or 0, sends errBody with that status instead.
	status  int
	errBody string
	header  map[string]string
	// hang waits until the client gives up on the request.
	hang bool
}

// chatRequest is the request body as the API defines it.
type chatRequest struct {
	Model               string                `json:"model"`
	Messages            []llmtest.ChatMessage `json:"messages"`
	Temperature         *float64              `json:"temperature"`
	MaxCompletionTokens *int                  `json:"max_completion_tokens"`
	MaxTokens           *int                  `json:"max_tokens"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Strict      bool            `json:"strict"`
			Schema      json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// system and user return the text of the request's only system and user
// messages.
func (r chatRequest) system() string { return r.only("system") }
func (r chatRequest) user() string   { return r.only("user") }

func (r chatRequest) only(role string) string {
	var found []string
	for _, m := range r.Messages {
		if m.Role == role {
			found = append(found, m.Text())
		}
	}
	if len(found) != 1 {
		return fmt.Sprintf("<%d %s messages>", len(found), role)
	}
	return found[0]
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	t.Helper()
	f := &fakeOpenAI{key: "sk-test", model: "gpt-test"}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// options returns Options for the fake, with the SDK's retries off.
func (f *fakeOpenAI) options() Options {
	return Options{BaseURL: f.URL + "/v1", APIKey: f.key, Model: f.model, MaxRetries: -1}
}

func (f *fakeOpenAI) summarizer(t *testing.T) *Summarizer {
	t.Helper()
	s, err := NewSummarizer(f.options())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fakeOpenAI) extractor(t *testing.T, mod func(*ExtractorOptions)) *Extractor {
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

func (f *fakeOpenAI) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.reqs...)
}

// last returns the last request and its headers.
func (f *fakeOpenAI) last(t *testing.T) (chatRequest, http.Header) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("the fake received no request")
	}
	return f.reqs[len(f.reqs)-1], f.headers[len(f.headers)-1]
}

func writeError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// apiError returns the API's error body.
func apiError(message, typ, code string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": nullable(code),
	}})
	return string(b)
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (f *fakeOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		writeError(w, http.StatusNotFound, apiError("Invalid URL ("+r.Method+" "+r.URL.Path+")", "invalid_request_error", ""))
		return
	}
	// Every request is recorded, refused ones too, so tests can look at
	// what was sent.
	var req chatRequest
	body, _ := io.ReadAll(r.Body)
	parseErr := json.Unmarshal(body, &req)
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.headers = append(f.headers, r.Header.Clone())
	n := len(f.reqs)
	reply := f.reply
	f.mu.Unlock()

	if !admitted(w, r, f.key, parseErr) {
		return
	}
	if req.Model != f.model {
		writeError(w, http.StatusNotFound, apiError("The model `"+req.Model+"` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"))
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, apiError("[] is too short - 'messages'", "invalid_request_error", ""))
		return
	}
	rep := fakeReply{content: "A summary."}
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
		writeError(w, rep.status, rep.errBody)
		return
	}
	finish := rep.finishReason
	if finish == "" {
		finish = "stop"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"id":      fmt.Sprintf("chatcmpl-test%d", n),
		"object":  "chat.completion",
		"created": 1767225600,
		"model":   f.model + "-2025-01-01",
		"choices": []any{map[string]any{
			"index": 0,
			"message": map[string]any{
				"role": "assistant", "content": rep.content, "refusal": nullable(rep.refusal), "annotations": []any{},
			},
			"logprobs":      nil,
			"finish_reason": finish,
		}},
		"usage": map[string]any{
			"prompt_tokens": len(body) / 4, "completion_tokens": len(rep.content) / 4,
			"total_tokens": len(body)/4 + len(rep.content)/4,
		},
		"service_tier":       "default",
		"system_fingerprint": "fp_test",
	})
}

// admitted answers as the API does a request with the wrong key, the
// wrong content type or a body that is not JSON, and reports whether the
// request got past those checks.
func admitted(w http.ResponseWriter, r *http.Request, key string, parseErr error) bool {
	if r.Header.Get("Authorization") != "Bearer "+key {
		writeError(w, http.StatusUnauthorized, apiError("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"))
		return false
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusBadRequest, apiError("Content-Type must be application/json, got "+ct, "invalid_request_error", ""))
		return false
	}
	if parseErr != nil {
		writeError(w, http.StatusBadRequest, apiError("We could not parse the JSON body of your request.", "invalid_request_error", ""))
		return false
	}
	return true
}

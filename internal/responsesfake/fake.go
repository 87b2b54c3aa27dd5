// Package responsesfake is a fake of the OpenAI Responses API (POST
// /v1/responses) for tests: an httptest server that speaks the API's wire
// format as documented, so that what talks to it is tested against the
// real format, not against the code's own idea of it.
package responsesfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Server answers POST /v1/responses. Like the API it refuses (400, in
// OpenAI's error shape) a request without model or input, with a field
// the API does not have (messages, max_tokens, stop, n), an input item of
// a type it does not know, a message item without role or content, a
// function_call without call_id, name or arguments, a function_call_output
// whose call_id no earlier function_call in the input has (with store
// false there is nothing else to find it in), and a function tool without
// name or parameters; without "Authorization: Bearer " + Key it answers
// 401. Every request is recorded.
type Server struct {
	*httptest.Server
	// Key is the API key the server wants.
	Key string

	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	// answer returns the answer to the n-th request (from 1).
	answer func(n int, req map[string]any) Answer
}

// Answer is what the server answers one request with.
type Answer struct {
	// Text is the output message's text; empty sends no message item.
	Text string
	// Refusal, if set, is the message's refusal part.
	Refusal string
	// Calls are function_call items after the message.
	Calls []Call
	// Reasoning sends a reasoning item first.
	Reasoning bool
	// Usage is the response's usage.
	Usage Usage
	// Incomplete, if set, ends the response incomplete with this reason
	// (max_output_tokens, content_filter).
	Incomplete string
	// Status, if set, answers with this error status, ErrType, ErrCode and
	// ErrMsg in OpenAI's error shape.
	Status                   int
	ErrType, ErrCode, ErrMsg string
	// Fail, if set, ends a stream after the first text delta with
	// response.failed of this message (an unstreamed answer has status
	// failed).
	Fail string
	// Header is set on the answer.
	Header map[string]string
}

// Call is a function call of an answer.
type Call struct{ CallID, Name, Arguments string }

// Usage is a response's token counts.
type Usage struct{ Input, Cached, Output, Reasoning int }

// New starts a server, closed when the test ends, whose n-th answer is
// answer(n, request); nil answers "Answer n".
func New(t testing.TB, answer func(n int, req map[string]any) Answer) *Server {
	if answer == nil {
		answer = func(n int, _ map[string]any) Answer {
			return Answer{Text: fmt.Sprintf("Answer %d", n), Usage: Usage{Input: 10 * n, Output: 3}}
		}
	}
	s := &Server{Key: "sk-responses-fake", answer: answer}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// URL of the API, with /v1, as a base URL.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Requests returns the bodies of the requests so far, in order.
func (s *Server) Requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// Last returns the last request's body and headers; nil if none.
func (s *Server) Last() (map[string]any, http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bodies) == 0 {
		return nil, nil
	}
	return s.bodies[len(s.bodies)-1], s.headers[len(s.headers)-1]
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var c any
	if code != "" {
		c = code
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}

// invalid returns why the API would refuse body, or "".
func invalid(body map[string]any) string {
	for _, k := range []string{"messages", "max_tokens", "max_completion_tokens", "stop", "n", "stream_options", "response_format", "reasoning_effort"} {
		if _, ok := body[k]; ok {
			return fmt.Sprintf("Unknown parameter: '%s'.", k)
		}
	}
	if m, _ := body["model"].(string); m == "" {
		return "Missing required parameter: 'model'."
	}
	var items []any
	switch in := body["input"].(type) {
	case string:
	case []any:
		items = in
	default:
		return "Missing required parameter: 'input'."
	}
	calls := map[string]bool{}
	for i, raw := range items {
		it, _ := raw.(map[string]any)
		typ, _ := it["type"].(string)
		if typ == "" {
			typ = "message"
		}
		switch typ {
		case "message":
			role, _ := it["role"].(string)
			switch role {
			case "user", "system", "developer", "assistant":
			default:
				return fmt.Sprintf("Invalid value for 'input[%d].role': %q.", i, role)
			}
			if it["content"] == nil {
				return fmt.Sprintf("Missing required parameter: 'input[%d].content'.", i)
			}
		case "function_call":
			for _, k := range []string{"call_id", "name", "arguments"} {
				if _, ok := it[k].(string); !ok {
					return fmt.Sprintf("Missing required parameter: 'input[%d].%s'.", i, k)
				}
			}
			calls[it["call_id"].(string)] = true
		case "function_call_output":
			id, _ := it["call_id"].(string)
			if !calls[id] {
				return fmt.Sprintf("No tool call found for function call output with call_id %s.", id)
			}
			if _, ok := it["output"]; !ok {
				return fmt.Sprintf("Missing required parameter: 'input[%d].output'.", i)
			}
		default:
			return fmt.Sprintf("Invalid value: '%s'. Supported values are: 'message', 'function_call', 'function_call_output', ...", typ)
		}
	}
	tools, _ := body["tools"].([]any)
	for i, raw := range tools {
		tl, _ := raw.(map[string]any)
		if tl["type"] != "function" {
			continue
		}
		if n, _ := tl["name"].(string); n == "" {
			return fmt.Sprintf("Missing required parameter: 'tools[%d].name'.", i)
		}
		if _, ok := tl["parameters"]; !ok {
			return fmt.Sprintf("Missing required parameter: 'tools[%d].parameters'.", i)
		}
	}
	return ""
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "Not found: "+r.URL.Path)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	n := len(s.bodies)
	s.mu.Unlock()
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_fake%d", n))
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	if msg := invalid(body); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", msg)
		return
	}
	a := s.answer(n, body)
	for k, v := range a.Header {
		w.Header().Set(k, v)
	}
	if a.Status != 0 {
		writeError(w, a.Status, a.ErrType, a.ErrCode, a.ErrMsg)
		return
	}
	model, _ := body["model"].(string)
	resp := response(n, model, a)
	if stream, _ := body["stream"].(bool); stream {
		s.stream(w, n, model, a, resp)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func usage(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":          u.Input,
		"input_tokens_details":  map[string]any{"cached_tokens": u.Cached},
		"output_tokens":         u.Output,
		"output_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning},
		"total_tokens":          u.Input + u.Output,
	}
}

func messageItem(n int, a Answer, status string) map[string]any {
	content := []any{}
	if a.Text != "" {
		content = append(content, map[string]any{"type": "output_text", "text": a.Text, "annotations": []any{}, "logprobs": []any{}})
	}
	if a.Refusal != "" {
		content = append(content, map[string]any{"type": "refusal", "refusal": a.Refusal})
	}
	return map[string]any{"type": "message", "id": fmt.Sprintf("msg_%d", n), "status": status, "role": "assistant", "content": content}
}

func callItem(n, i int, c Call, args string, status string) map[string]any {
	return map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", n, i), "call_id": c.CallID, "name": c.Name, "arguments": args, "status": status}
}

// output returns the answer's output items, finished.
func output(n int, a Answer) []any {
	out := []any{}
	if a.Reasoning {
		out = append(out, map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", n), "summary": []any{}})
	}
	if a.Text != "" || a.Refusal != "" {
		out = append(out, messageItem(n, a, "completed"))
	}
	for i, c := range a.Calls {
		out = append(out, callItem(n, i, c, c.Arguments, "completed"))
	}
	return out
}

func response(n int, model string, a Answer) map[string]any {
	r := map[string]any{
		"id": fmt.Sprintf("resp_%d", n), "object": "response", "created_at": 1764000000 + n,
		"status": "completed", "error": nil, "incomplete_details": nil, "model": model,
		"output": output(n, a), "usage": usage(a.Usage), "store": false, "parallel_tool_calls": true,
	}
	if a.Incomplete != "" {
		r["status"] = "incomplete"
		r["incomplete_details"] = map[string]any{"reason": a.Incomplete}
	}
	if a.Fail != "" {
		r["status"] = "failed"
		r["error"] = map[string]any{"code": "server_error", "message": a.Fail}
	}
	return r
}

// split cuts s into up to three pieces.
func split(s string) []string {
	if len(s) < 3 {
		return []string{s}
	}
	k := len(s) / 3
	return []string{s[:k], s[k : 2*k], s[2*k:]}
}

// stream writes the answer as the API's event sequence.
func (s *Server) stream(w http.ResponseWriter, n int, model string, a Answer, final map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	seq := 0
	send := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(fields)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
	}
	start := map[string]any{}
	for k, v := range final {
		start[k] = v
	}
	start["status"], start["output"], start["usage"] = "in_progress", []any{}, nil
	send("response.created", map[string]any{"response": start})
	send("response.in_progress", map[string]any{"response": start})
	idx := 0
	if a.Reasoning {
		item := map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_%d", n), "summary": []any{}}
		send("response.output_item.added", map[string]any{"output_index": idx, "item": item})
		send("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		idx++
	}
	if a.Text != "" || a.Refusal != "" {
		id := fmt.Sprintf("msg_%d", n)
		send("response.output_item.added", map[string]any{"output_index": idx, "item": messageItem(n, Answer{}, "in_progress")})
		part := 0
		if a.Text != "" {
			send("response.content_part.added", map[string]any{"item_id": id, "output_index": idx, "content_index": part,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for i, d := range split(a.Text) {
				send("response.output_text.delta", map[string]any{"item_id": id, "output_index": idx, "content_index": part, "delta": d, "logprobs": []any{}})
				if i == 0 && a.Fail != "" {
					send("response.failed", map[string]any{"response": final})
					return
				}
			}
			send("response.output_text.done", map[string]any{"item_id": id, "output_index": idx, "content_index": part, "text": a.Text, "logprobs": []any{}})
			send("response.content_part.done", map[string]any{"item_id": id, "output_index": idx, "content_index": part,
				"part": map[string]any{"type": "output_text", "text": a.Text, "annotations": []any{}}})
			part++
		}
		if a.Refusal != "" {
			send("response.content_part.added", map[string]any{"item_id": id, "output_index": idx, "content_index": part,
				"part": map[string]any{"type": "refusal", "refusal": ""}})
			send("response.refusal.delta", map[string]any{"item_id": id, "output_index": idx, "content_index": part, "delta": a.Refusal})
			send("response.refusal.done", map[string]any{"item_id": id, "output_index": idx, "content_index": part, "refusal": a.Refusal})
		}
		send("response.output_item.done", map[string]any{"output_index": idx, "item": messageItem(n, a, "completed")})
		idx++
	}
	for i, c := range a.Calls {
		id := fmt.Sprintf("fc_%d_%d", n, i)
		send("response.output_item.added", map[string]any{"output_index": idx, "item": callItem(n, i, c, "", "in_progress")})
		for _, d := range split(c.Arguments) {
			if d != "" {
				send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": idx, "delta": d})
			}
		}
		send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": idx, "arguments": c.Arguments})
		send("response.output_item.done", map[string]any{"output_index": idx, "item": callItem(n, i, c, c.Arguments, "completed")})
		idx++
	}
	typ := "response.completed"
	if a.Incomplete != "" {
		typ = "response.incomplete"
	}
	send(typ, map[string]any{"response": final})
}

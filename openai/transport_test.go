package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/chatmem/chatmem/internal/responsesfake"
	"github.com/chatmem/chatmem/internal/sse"
)

func newResponsesFake(t *testing.T, answer func(n int, req map[string]any) responsesfake.Answer) (*responsesfake.Server, http.RoundTripper) {
	t.Helper()
	f := responsesfake.New(t, answer)
	tr, err := NewResponsesTransport(TransportOptions{BaseURL: f.BaseURL(), APIKey: f.Key, Model: "gpt-default"})
	if err != nil {
		t.Fatal(err)
	}
	return f, tr
}

func postChat(t *testing.T, tr http.RoundTripper, body string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://chatmem.test/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decodeBody(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// jsonEqual fails unless got, marshalled, is the JSON want.
func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	gb, _ := json.Marshal(got)
	var g, w any
	_ = json.Unmarshal(gb, &g)
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad want: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s =\n%s\nwant\n%s", what, gb, want)
	}
}

func TestResponsesTransportText(t *testing.T) {
	f, tr := newResponsesFake(t, func(n int, _ map[string]any) responsesfake.Answer {
		return responsesfake.Answer{Text: "Paris.", Reasoning: true, Usage: responsesfake.Usage{Input: 120, Cached: 64, Output: 30, Reasoning: 20},
			Header: map[string]string{"X-Ratelimit-Remaining-Requests": "99"}}
	})
	resp := postChat(t, tr, `{"model":"gpt-5-mini","messages":[
		{"role":"system","content":"Be brief."},
		{"role":"user","content":"Capital of France?"},
		{"role":"assistant","content":"Which France?"},
		{"role":"developer","content":[{"type":"text","text":"Answer in one word."}]},
		{"role":"user","content":[{"type":"text","text":"The country."},{"type":"image_url","image_url":{"url":"https://example.com/map.png"}}]}],
		"max_completion_tokens":200,"temperature":0.5,"top_p":0.9,"user":"u1","prompt_cache_key":"k1",
		"reasoning_effort":"low","metadata":{"a":"b"},"n":1,"store":false,
		"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"},"strict":true}}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got := resp.Header.Get("X-Request-Id"); got != "req_fake1" {
		t.Errorf("X-Request-Id = %q, want req_fake1", got)
	}
	if got := resp.Header.Get("X-Ratelimit-Remaining-Requests"); got != "99" {
		t.Errorf("X-Ratelimit-Remaining-Requests = %q, want 99", got)
	}
	body, h := f.Last()
	if got := h.Get("Authorization"); got != "Bearer "+f.Key {
		t.Errorf("Authorization = %q", got)
	}
	jsonEqual(t, "request", body, `{"model":"gpt-5-mini","store":false,
		"input":[
			{"type":"message","role":"system","content":"Be brief."},
			{"type":"message","role":"user","content":"Capital of France?"},
			{"type":"message","role":"assistant","content":"Which France?"},
			{"type":"message","role":"developer","content":[{"type":"input_text","text":"Answer in one word."}]},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"The country."},{"type":"input_image","image_url":"https://example.com/map.png","detail":"auto"}]}],
		"max_output_tokens":200,"temperature":0.5,"top_p":0.9,"user":"u1","prompt_cache_key":"k1",
		"reasoning":{"effort":"low"},"metadata":{"a":"b"},
		"text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object"},"strict":true}}}`)
	got := decodeBody(t, resp)
	jsonEqual(t, "answer", got, `{"id":"chatcmpl-resp_1","object":"chat.completion","created":1764000001,"model":"gpt-5-mini",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Paris.","refusal":null},"logprobs":null,"finish_reason":"stop"}],
		"usage":{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,
			"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":20}}}`)
}

func TestResponsesTransportToolRoundTrip(t *testing.T) {
	f, tr := newResponsesFake(t, func(n int, _ map[string]any) responsesfake.Answer {
		if n == 1 {
			return responsesfake.Answer{Calls: []responsesfake.Call{{CallID: "call_w1", Name: "weather", Arguments: `{"city":"Oslo"}`}}}
		}
		return responsesfake.Answer{Text: "It is 3 degrees in Oslo."}
	})
	tools := `"tools":[{"type":"function","function":{"name":"weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":{"type":"function","function":{"name":"weather"}},"parallel_tool_calls":false`
	resp := postChat(t, tr, `{"model":"gpt-5","messages":[{"role":"user","content":"Weather in Oslo?"}],`+tools+`}`)
	got := decodeBody(t, resp)
	jsonEqual(t, "first answer", got["choices"], `[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,
		"tool_calls":[{"id":"call_w1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},
		"logprobs":null,"finish_reason":"tool_calls"}]`)
	body, _ := f.Last()
	jsonEqual(t, "tools", body["tools"], `[{"type":"function","name":"weather","description":"Weather of a city",
		"parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":false}]`)
	jsonEqual(t, "tool_choice", body["tool_choice"], `{"type":"function","name":"weather"}`)
	jsonEqual(t, "parallel_tool_calls", body["parallel_tool_calls"], `false`)

	resp = postChat(t, tr, `{"model":"gpt-5","messages":[{"role":"user","content":"Weather in Oslo?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_w1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},
		{"role":"tool","tool_call_id":"call_w1","content":"3 degrees"}],`+tools+`}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", resp.StatusCode, decodeBody(t, resp))
	}
	got = decodeBody(t, resp)
	jsonEqual(t, "second answer", got["choices"], `[{"index":0,"message":{"role":"assistant","content":"It is 3 degrees in Oslo.","refusal":null},"logprobs":null,"finish_reason":"stop"}]`)
	body, _ = f.Last()
	jsonEqual(t, "input", body["input"], `[
		{"type":"message","role":"user","content":"Weather in Oslo?"},
		{"type":"function_call","call_id":"call_w1","name":"weather","arguments":"{\"city\":\"Oslo\"}"},
		{"type":"function_call_output","call_id":"call_w1","output":"3 degrees"}]`)
}

// readChunks reads a translated stream: its chunks, whether it ended with
// [DONE], and the error it ended with.
func readChunks(t *testing.T, r io.Reader) (chunks []map[string]any, done bool, err error) {
	t.Helper()
	rd := sse.NewReader(r, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return chunks, done, nil
		}
		if err != nil {
			return chunks, done, err
		}
		if string(ev.Data) == "[DONE]" {
			done = true
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("chunk %q: %v", ev.Data, err)
		}
		chunks = append(chunks, m)
	}
}

func TestResponsesTransportStream(t *testing.T) {
	f, tr := newResponsesFake(t, func(n int, _ map[string]any) responsesfake.Answer {
		return responsesfake.Answer{Text: "Hello there, world.", Reasoning: true,
			Calls: []responsesfake.Call{{CallID: "call_a", Name: "lookup", Arguments: `{"q":"first"}`}, {CallID: "call_b", Name: "lookup", Arguments: `{"q":"second"}`}},
			Usage: responsesfake.Usage{Input: 50, Cached: 40, Output: 12, Reasoning: 5}}
	})
	resp := postChat(t, tr, `{"model":"gpt-5","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}],
		"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"},"strict":true}}]}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := resp.Header.Get("X-Request-Id"); got != "req_fake1" {
		t.Errorf("X-Request-Id = %q", got)
	}
	chunks, done, err := readChunks(t, resp.Body)
	resp.Body.Close()
	if err != nil || !done {
		t.Fatalf("stream ended with done %v, err %v", done, err)
	}
	body, _ := f.Last()
	if body["stream"] != true || body["store"] != false {
		t.Errorf("stream %v store %v, want true false", body["stream"], body["store"])
	}
	jsonEqual(t, "tool strict", body["tools"].([]any)[0].(map[string]any)["strict"], `true`)

	var text strings.Builder
	args := map[int]string{}
	ids := map[int]string{}
	var finish any
	var usage any
	for _, c := range chunks {
		if c["id"] != "chatcmpl-resp_1" || c["object"] != "chat.completion.chunk" || c["model"] != "gpt-5" {
			t.Errorf("chunk header %v %v %v", c["id"], c["object"], c["model"])
		}
		choices := c["choices"].([]any)
		if len(choices) == 0 {
			usage = c["usage"]
			continue
		}
		ch := choices[0].(map[string]any)
		if fr := ch["finish_reason"]; fr != nil {
			finish = fr
		}
		d := ch["delta"].(map[string]any)
		if s, ok := d["content"].(string); ok {
			text.WriteString(s)
		}
		tcs, _ := d["tool_calls"].([]any)
		for _, raw := range tcs {
			tc := raw.(map[string]any)
			i := int(tc["index"].(float64))
			if id, ok := tc["id"].(string); ok {
				ids[i] = id
			}
			args[i] += tc["function"].(map[string]any)["arguments"].(string)
		}
	}
	if first := chunks[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any); first["role"] != "assistant" {
		t.Errorf("first delta %v, want the assistant role", first)
	}
	if text.String() != "Hello there, world." {
		t.Errorf("text = %q", text.String())
	}
	jsonEqual(t, "tool call ids", ids, `{"0":"call_a","1":"call_b"}`)
	jsonEqual(t, "tool call arguments", args, `{"0":"{\"q\":\"first\"}","1":"{\"q\":\"second\"}"}`)
	if finish != "tool_calls" {
		t.Errorf("finish_reason = %v, want tool_calls", finish)
	}
	jsonEqual(t, "usage", usage, `{"prompt_tokens":50,"completion_tokens":12,"total_tokens":62,
		"prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":5}}`)
}

func TestResponsesTransportStreamWithoutUsageAndIncomplete(t *testing.T) {
	_, tr := newResponsesFake(t, func(int, map[string]any) responsesfake.Answer {
		return responsesfake.Answer{Text: "cut sho", Incomplete: "max_output_tokens"}
	})
	resp := postChat(t, tr, `{"model":"gpt-5","stream":true,"max_tokens":3,"messages":[{"role":"user","content":"Hi"}]}`)
	chunks, done, err := readChunks(t, resp.Body)
	resp.Body.Close()
	if err != nil || !done {
		t.Fatalf("done %v, err %v", done, err)
	}
	last := chunks[len(chunks)-1]
	if _, ok := last["usage"]; ok {
		t.Errorf("a usage chunk without include_usage: %v", last)
	}
	if fr := last["choices"].([]any)[0].(map[string]any)["finish_reason"]; fr != "length" {
		t.Errorf("finish_reason = %v, want length", fr)
	}
}

func TestResponsesTransportStreamFailed(t *testing.T) {
	_, tr := newResponsesFake(t, func(int, map[string]any) responsesfake.Answer {
		return responsesfake.Answer{Text: "This will fail", Fail: "The model crashed."}
	})
	resp := postChat(t, tr, `{"model":"gpt-5","stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	chunks, done, err := readChunks(t, resp.Body)
	resp.Body.Close()
	if err == nil || done {
		t.Fatalf("done %v, err %v: want a failed stream", done, err)
	}
	last := chunks[len(chunks)-1]
	jsonEqual(t, "error event", last, `{"error":{"message":"The model crashed.","type":"server_error","param":null,"code":"server_error"}}`)
}

func TestResponsesTransportStreamCut(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_x\",\"object\":\"response\",\"model\":\"m\"}}\n\n")
		io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hel\"}\n\n")
	}))
	defer up.Close()
	tr, _ := NewResponsesTransport(TransportOptions{BaseURL: up.URL, APIKey: "k"})
	resp := postChat(t, tr, `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}]}`)
	_, done, err := readChunks(t, resp.Body)
	resp.Body.Close()
	if err == nil || done || !strings.Contains(err.Error(), "before response.completed") {
		t.Errorf("done %v, err %v: want the stream cut", done, err)
	}
}

func TestResponsesTransportRefusal(t *testing.T) {
	_, tr := newResponsesFake(t, func(int, map[string]any) responsesfake.Answer {
		return responsesfake.Answer{Refusal: "I can't help with that."}
	})
	got := decodeBody(t, postChat(t, tr, `{"model":"gpt-5","messages":[{"role":"user","content":"Hi"}]}`))
	jsonEqual(t, "message", got["choices"].([]any)[0].(map[string]any)["message"], `{"role":"assistant","content":null,"refusal":"I can't help with that."}`)
}

func TestResponsesTransportUpstreamErrors(t *testing.T) {
	for _, tc := range []struct {
		status        int
		typ, code     string
		wantTypeInRes string
	}{
		{http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error"},
		{http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "invalid_request_error"},
		{http.StatusInternalServerError, "server_error", "", "server_error"},
		{http.StatusServiceUnavailable, "", "", "server_error"},
	} {
		_, tr := newResponsesFake(t, func(int, map[string]any) responsesfake.Answer {
			return responsesfake.Answer{Status: tc.status, ErrType: tc.typ, ErrCode: tc.code, ErrMsg: "upstream says no",
				Header: map[string]string{"Retry-After": "7"}}
		})
		for _, stream := range []string{"false", "true"} {
			resp := postChat(t, tr, `{"model":"gpt-5","stream":`+stream+`,"messages":[{"role":"user","content":"Hi"}]}`)
			if resp.StatusCode != tc.status {
				t.Errorf("%d: status %d", tc.status, resp.StatusCode)
			}
			if resp.Header.Get("Retry-After") != "7" || resp.Header.Get("X-Request-Id") == "" {
				t.Errorf("%d: headers %v", tc.status, resp.Header)
			}
			e := decodeBody(t, resp)["error"].(map[string]any)
			if e["message"] != "upstream says no" || e["type"] != tc.wantTypeInRes {
				t.Errorf("%d: error %v", tc.status, e)
			}
			if tc.code != "" && e["code"] != tc.code {
				t.Errorf("%d: code %v, want %s", tc.status, e["code"], tc.code)
			}
		}
	}

	// A wrong key is the upstream's 401, relayed.
	f := responsesfake.New(t, nil)
	tr, _ := NewResponsesTransport(TransportOptions{BaseURL: f.BaseURL(), APIKey: "wrong"})
	resp := postChat(t, tr, `{"model":"gpt-5","messages":[{"role":"user","content":"Hi"}]}`)
	if e := decodeBody(t, resp)["error"].(map[string]any); resp.StatusCode != http.StatusUnauthorized || e["code"] != "invalid_api_key" {
		t.Errorf("status %d, error %v", resp.StatusCode, e)
	}

	// A body that is not OpenAI's error shape becomes the message of one.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_gw")
		http.Error(w, "bad gateway from the balancer", http.StatusBadGateway)
	}))
	defer up.Close()
	tr, _ = NewResponsesTransport(TransportOptions{BaseURL: up.URL, APIKey: "k"})
	resp = postChat(t, tr, `{"model":"gpt-5","messages":[{"role":"user","content":"Hi"}]}`)
	e := decodeBody(t, resp)["error"].(map[string]any)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(e["message"].(string), "bad gateway from the balancer") || e["type"] != "server_error" {
		t.Errorf("status %d, error %v", resp.StatusCode, e)
	}
	if resp.Header.Get("X-Request-Id") != "req_gw" {
		t.Errorf("X-Request-Id = %q", resp.Header.Get("X-Request-Id"))
	}
}

func TestResponsesTransportRefusesWhatItCannotSend(t *testing.T) {
	f, tr := newResponsesFake(t, nil)
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","n":2,"messages":[{"role":"user","content":"Hi"}]}`, "n: only 1 choice"},
		{`{"model":"m","stop":["END"],"messages":[{"role":"user","content":"Hi"}]}`, "stop: the OpenAI Responses API has no stop sequences"},
		{`{"model":"m","seed":7,"messages":[{"role":"user","content":"Hi"}]}`, "seed: not supported by this upstream"},
		{`{"model":"m","logit_bias":{"1":2},"messages":[{"role":"user","content":"Hi"}]}`, "logit_bias: not supported"},
		{`{"model":"m","presence_penalty":0.5,"messages":[{"role":"user","content":"Hi"}]}`, "presence_penalty: the OpenAI Responses API has no penalties"},
		{`{"model":"m","store":true,"messages":[{"role":"user","content":"Hi"}]}`, "store: this upstream sends store false"},
		{`{"model":"m","logprobs":true,"messages":[{"role":"user","content":"Hi"}]}`, "logprobs"},
		{`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`, `messages[0].content: a "input_audio" part is not supported`},
		{`{"model":"m","messages":[{"role":"function","name":"f","content":"x"}]}`, `messages[0].role: "function" is not supported`},
		{`{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id: required"},
		{`{"model":"m","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, `tools[0].type: "custom" is not supported`},
		{`{"model":"m","messages":[{"role":"user","content":"Hi"}],"tool_choice":{"type":"allowed_tools"}}`, "tool_choice: not a supported choice"},
		{`{"messages":[{"role":"user","content":"Hi"}],"model":""}`, ""},
		{`{"model":"m","messages":[]}`, "messages: at least one message"},
		{`not json`, "not a chat completions request"},
	} {
		before := len(f.Requests())
		resp := postChat(t, tr, tc.body)
		if tc.want == "" { // the default model stands in
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: status %d", tc.body, resp.StatusCode)
			}
			resp.Body.Close()
			continue
		}
		e := decodeBody(t, resp)["error"].(map[string]any)
		if resp.StatusCode != http.StatusBadRequest || e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), tc.want) {
			t.Errorf("%s: status %d, error %v, want 400 with %q", tc.body, resp.StatusCode, e, tc.want)
		}
		if len(f.Requests()) != before {
			t.Errorf("%s: sent upstream", tc.body)
		}
	}
	// Neutral values of those fields are accepted.
	resp := postChat(t, tr, `{"model":"m","n":1,"stop":[],"store":false,"logprobs":false,"frequency_penalty":0,"seed":null,"messages":[{"role":"user","content":"Hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("neutral fields: status %d: %v", resp.StatusCode, decodeBody(t, resp))
	}
	resp.Body.Close()
	// Not a chat completions path.
	req := httptest.NewRequest(http.MethodPost, "http://chatmem.test/v1/embeddings", strings.NewReader(`{}`))
	resp, _ = tr.RoundTrip(req)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("embeddings: status %d, want 404", resp.StatusCode)
	}
}

func TestResponsesTransportForwardsAuthorizationWithoutKey(t *testing.T) {
	f := responsesfake.New(t, nil)
	tr, _ := NewResponsesTransport(TransportOptions{BaseURL: f.BaseURL()})
	req := httptest.NewRequest(http.MethodPost, "http://chatmem.test/v1/chat/completions",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+f.Key)
	req.Header.Set("X-Chatmem-Key", "secret-of-chatmem")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_, h := f.Last()
	if resp.StatusCode != http.StatusOK || h.Get("X-Chatmem-Key") != "" {
		t.Errorf("status %d, X-Chatmem-Key %q: want 200 and the header not forwarded", resp.StatusCode, h.Get("X-Chatmem-Key"))
	}
}

// FuzzTranslateResponsesRequest: any body is translated or refused with
// a requestError, never a panic; a translated request always has a model,
// input items and store false.
func FuzzTranslateResponsesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`,
		`{"model":"m","n":2,"stop":"x","messages":[]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}],"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, _, err := translateRequest(body, "default")
		if err != nil {
			if _, ok := err.(*requestError); !ok {
				t.Fatalf("error %T %v, want a requestError", err, err)
			}
			return
		}
		if out.Model == "" || len(out.Input) == 0 || out.Store {
			t.Fatalf("translated %+v", out)
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatalf("marshal: %v", err)
		}
	})
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// FuzzDecodeAppend feeds arbitrary bodies to the append decoder: it never
// panics, every refusal is a client error (ErrInvalid or ErrTooLarge, so
// never a 500), and every accepted body is a valid request that survives a
// round trip through JSON unchanged.
func FuzzDecodeAppend(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":"hi"}],"tokenizer":"estimate","ttl_seconds":60}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`,
		`{"messages":[{"role":"user","content":"x","metadata":{"k":"v"},"created_at":"2024-01-02T03:04:05Z","seq":9,"tokens":-3}]}`,
		`{"messages":[{"role":"wizard","content":"x"}]}`,
		`{"messages":[]}`,
		`{"messages":[{"role":"user","content":"x"}],"extra":1}`,
		`{"messages":[{"role":"user","content":"x"}]} trailing`,
		`{"messages":[{"role":"user","content":"\u0000"}]}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"a\xffb\"}]}",
		`{"messages":[{"role":"user","content":"x","metadata":{"k":"v"},"created_at":"1969-12-31T23:59:59Z"}]}`,
		`{"messages":[{"role":"user","content":"\ud800"}]}`,
		`{"messages":[{"role":"user","content":"x"}],"ttl_seconds":-1}`,
		`null`, `[]`, `"x"`, ``, `{`,
	} {
		f.Add([]byte(seed))
	}
	limits := Limits{MaxMessages: 8, MaxContentBytes: 64}.withDefaults()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeAppend(body, limits)
		if err != nil {
			if !errors.Is(err, chatmem.ErrInvalid) && !errors.Is(err, chatmem.ErrTooLarge) {
				t.Fatalf("decodeAppend(%q) = %v, neither ErrInvalid nor ErrTooLarge", body, err)
			}
			if status, _ := classify(err); status >= 500 {
				t.Fatalf("decodeAppend(%q) error %v maps to %d", body, err, status)
			}
			return
		}
		if n := len(req.Messages); n == 0 || n > limits.MaxMessages {
			t.Fatalf("accepted %d messages", n)
		}
		cl := chatmem.Limits{MaxContentBytes: limits.MaxContentBytes}
		for i, m := range req.Messages {
			if err := m.Validate(cl); err != nil {
				t.Fatalf("accepted message %d that is invalid: %v", i, err)
			}
			if m.Seq != 0 || m.Tokens != 0 {
				t.Fatalf("accepted message %d keeps client seq %d / tokens %d", i, m.Seq, m.Tokens)
			}
		}
		if req.TTLSeconds < 0 || req.TTL() < 0 {
			t.Fatalf("accepted ttl_seconds %d", req.TTLSeconds)
		}
		// What was accepted encodes to a body that decodes to the same.
		enc, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode accepted request: %v", err)
		}
		again, err := decodeAppend(enc, limits)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		enc2, _ := json.Marshal(again)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the request:\n %s\n %s", enc, enc2)
		}
	})
}

// FuzzDecodeFacts feeds arbitrary bodies to the PATCH and PUT facts
// decoder: every refusal is a client error, and every accepted body is at
// most maxFactsPerRequest facts, each set by "app" with the fields the body
// gave, that encode back to a body decoding to the same facts.
func FuzzDecodeFacts(f *testing.F) {
	for _, seed := range []string{
		`{"facts":[{"key":"name","value":"Kavya"}]}`,
		`{"facts":[{"key":"order_id","value":"SE-10423","confidence":0.5,"source_seq":3}]}`,
		`{"facts":[]}`, `{"facts":null}`, `{}`, `{"facts":[{"key":"name","value":"x","set_by":"rules"}]}`,
		`{"facts":[{"key":"'; DROP TABLE facts; --","value":"x"}]}`, `{"facts":[{"key":"a","value":1}]}`,
		`{"facts":[]} {}`, `[]`, ``, `{"facts":[{"confidence":1e400}]}`,
	} {
		f.Add([]byte(seed))
	}
	s := &Server{limits: Limits{MaxBodyBytes: 1 << 16}.withDefaults()}
	f.Fuzz(func(t *testing.T, body []byte) {
		c := &call{w: httptest.NewRecorder(), r: httptest.NewRequest(http.MethodPatch, "/v1/conversations/c/facts", bytes.NewReader(body))}
		facts, err := s.readFacts(c)
		if err != nil {
			if status, _ := classify(err); status < 400 || status >= 500 {
				t.Fatalf("readFacts(%q) = %v, status %d", body, err, status)
			}
			return
		}
		if len(facts) > maxFactsPerRequest {
			t.Fatalf("accepted %d facts", len(facts))
		}
		in := FactsBody{Facts: make([]FactInput, len(facts))}
		for i, fact := range facts {
			if fact.SetBy != "app" || !fact.CreatedAt.IsZero() {
				t.Fatalf("fact %d = %+v: set_by or created_at came from the client", i, fact)
			}
			in.Facts[i] = FactInput{Key: fact.Key, Value: fact.Value, Confidence: fact.Confidence, SourceSeq: fact.SourceSeq}
		}
		enc, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("encode %+v: %v", in, err)
		}
		c = &call{w: httptest.NewRecorder(), r: httptest.NewRequest(http.MethodPatch, "/v1/conversations/c/facts", bytes.NewReader(enc))}
		again, err := s.readFacts(c)
		if err != nil || !reflect.DeepEqual(nonNil(again), nonNil(facts)) {
			t.Fatalf("re-decode of %s = %+v, %v; want %+v", enc, again, err, facts)
		}
	})
}

// FuzzHeaders checks the header parsers: If-Match takes back exactly the
// entity tags the server sends (and bare digits) and refuses the rest as
// client errors, and Idempotency-Key takes 1 to maxIdempotencyKeyLen printable ASCII
// characters and nothing else.
func FuzzHeaders(f *testing.F) {
	for _, s := range []string{`"5"`, `5`, `W/"5"`, `"-1"`, `"+5"`, `""`, `"`, `*`, ` 7 `, `"9223372036854775808"`, "k1", "é", "a\x00b", "req 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := parseIfMatch(v)
		switch {
		case err != nil:
			if !errors.Is(err, chatmem.ErrInvalid) {
				t.Fatalf("parseIfMatch(%q) = %v, not ErrInvalid", v, err)
			}
		case n < 0:
			t.Fatalf("parseIfMatch(%q) = %d", v, n)
		case strings.ContainsFunc(strings.Trim(v, `"`), func(r rune) bool { return r < '0' || r > '9' }):
			t.Fatalf("parseIfMatch(%q) = %d, want an error (only decimal digits)", v, n)
		default:
			if back, err := parseIfMatch(etag(n)); err != nil || back != n {
				t.Fatalf("parseIfMatch(etag(%d)) = %d, %v", n, back, err)
			}
		}
		printable := !strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r > '~' })
		if err := checkIdempotencyKey(v); (err == nil) != (v != "" && len(v) <= maxIdempotencyKeyLen && printable) {
			t.Fatalf("checkIdempotencyKey(%q) = %v", v, err)
		} else if err != nil && !errors.Is(err, chatmem.ErrInvalid) {
			t.Fatalf("checkIdempotencyKey(%q) = %v, not ErrInvalid", v, err)
		}
	})
}

// roundTripFunc is an http.RoundTripper in a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// FuzzProxyRequest sends arbitrary bodies through the chat proxy, with and
// without X-Chatmem-Conversation, to an in-process upstream that always
// answers. The proxy never fails with a 5xx of its own; a refusal is a 4xx
// in the OpenAI error shape that reached no upstream; without a
// conversation the upstream gets the body byte for byte; with one, it gets
// every field but messages as the client wrote it, the request's system
// messages first as written, then a window of valid chat messages ending
// with the turn, and the conversation holds a valid history.
func FuzzProxyRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","temperature":0.2,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":[{"type":"text","text":"x"}]},{"role":"user","content":"q"}]}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"},{"role":"user","content":"next"}]}`,
		`{"stream":false,"messages":[{"role":"user","content":"x","seq":9,"tokens":-1,"metadata":{"a":"b"}}]}`,
		`{"messages":[{"role":"tool","tool_call_id":"nope","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`,
		`{"messages":[]}`, `{"messages":{}}`, `{"stream":"yes","messages":[{"role":"user","content":"x"}]}`,
		`{"a":1,"a":2,"messages":[{"role":"user","content":"dup"}]}`, `[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed), true)
		f.Add([]byte(seed), false)
	}
	var upstreamBodies [][]byte
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(r.Body)
		upstreamBodies = append(upstreamBodies, b)
		reply := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"answer"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(reply)), Request: r}, nil
	})}
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		f.Fatal(err)
	}
	api, err := New(mem, Options{Limits: Limits{MaxMessages: 16, MaxContentBytes: 256},
		Upstream: &Upstream{BaseURL: "http://upstream.invalid/v1", HTTPClient: client}})
	if err != nil {
		f.Fatal(err)
	}
	n := 0
	f.Fuzz(func(t *testing.T, body []byte, withConversation bool) {
		n++
		id := fmt.Sprint("fz", n)
		upstreamBodies = nil
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if withConversation {
			req.Header.Set(headerConversation, id)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		resp := rec.Result()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			t.Fatalf("body %q: status %d %s", body, resp.StatusCode, out)
		}
		if resp.StatusCode != http.StatusOK {
			var e openAIErrorBody
			if err := json.Unmarshal(out, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == "" {
				t.Fatalf("body %q: %d %s is not an OpenAI error", body, resp.StatusCode, out)
			}
			if len(upstreamBodies) != 0 {
				t.Fatalf("body %q was refused (%d) after reaching the upstream", body, resp.StatusCode)
			}
			return
		}
		if len(upstreamBodies) != 1 {
			t.Fatalf("body %q: %d upstream requests", body, len(upstreamBodies))
		}
		sent := upstreamBodies[0]
		if !withConversation {
			if !bytes.Equal(sent, body) {
				t.Fatalf("forwarded %q as %q", body, sent)
			}
			return
		}
		var in, up map[string]json.RawMessage
		if json.Unmarshal(body, &in) != nil {
			t.Fatalf("accepted a body that is not a JSON object: %q", body)
		}
		if err := json.Unmarshal(sent, &up); err != nil {
			t.Fatalf("the upstream got %q: %v", sent, err)
		}
		for k, v := range in {
			if k != "messages" && !bytes.Equal(up[k], v) {
				t.Fatalf("field %s: client sent %s, upstream got %s", k, v, up[k])
			}
		}
		if len(up) != len(in) {
			t.Fatalf("client sent fields %v, upstream got %v", keys(in), keys(up))
		}
		var inMsgs, upMsgs []json.RawMessage
		if json.Unmarshal(in["messages"], &inMsgs) != nil || json.Unmarshal(up["messages"], &upMsgs) != nil {
			t.Fatalf("messages: %s -> %s", in["messages"], up["messages"])
		}
		var system, turn []json.RawMessage
		for _, m := range inMsgs {
			var head struct {
				Role string `json:"role"`
			}
			_ = json.Unmarshal(m, &head)
			if head.Role == "system" || head.Role == "developer" {
				system = append(system, m)
			} else {
				turn = append(turn, m)
			}
		}
		if len(upMsgs) < len(system) {
			t.Fatalf("upstream messages %s lack the request's system messages", up["messages"])
		}
		for i, m := range system {
			if !bytes.Equal(upMsgs[i], m) {
				t.Fatalf("system message %d sent as %s, want %s as written", i, upMsgs[i], m)
			}
		}
		var window []chatmem.Message
		for _, raw := range upMsgs[len(system):] {
			var m chatmem.Message
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("upstream message %s: %v", raw, err)
			}
			window = append(window, m)
		}
		if err := chatmem.ValidateHistory(nil, window, chatmem.Limits{}); err != nil {
			t.Fatalf("upstream window %s is not a valid history: %v", up["messages"], err)
		}
		stored, err := mem.Store().Range(t.Context(), chatmem.Key{Tenant: chatmem.DefaultTenant, ID: id}, 0, 0)
		if err != nil {
			t.Fatalf("Range(%s): %v", id, err)
		}
		if err := chatmem.ValidateHistory(nil, stored, chatmem.Limits{}); err != nil {
			t.Fatalf("stored history is not valid: %v", err)
		}
		if len(stored) != len(turn)+1 || stored[len(stored)-1].Content != "answer" {
			t.Fatalf("stored %d messages, want the %d of the turn and the reply", len(stored), len(turn))
		}
		// The window is the newest of the turn: all of it from its first
		// user message, as the budget holds it all.
		sentTurn := stored[:len(turn)]
		first := slices.IndexFunc(sentTurn, func(m chatmem.Message) bool { return m.Role == chatmem.RoleUser })
		if first < 0 {
			first = len(sentTurn)
		}
		if got, want := brief(window), brief(sentTurn[first:]); !slices.Equal(got, want) {
			t.Fatalf("window sent %q, want %q", got, want)
		}
	})
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"chatmem"
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

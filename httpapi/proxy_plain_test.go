package httpapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestPlainMessage: the direct decoding of a plain chat message gives
// what json.Unmarshal gives, and declines every other shape (escapes,
// other keys, a repeated key, other types, trailing bytes), which
// json.Unmarshal then decodes or refuses.
func TestPlainMessage(t *testing.T) {
	for _, c := range []struct {
		in    string
		plain bool
	}{
		{`{"role":"user","content":"Where is my order?"}`, true},
		{` { "content" : "héllo wörld" , "role" : "assistant" } `, true},
		{"{\n\t\"role\": \"user\",\r\n\"content\": \"\"}", true},
		{`{"role":"user","content":"a \"quoted\" word"}`, false},
		{`{"role":"user","content":"line\nbreak"}`, false},
		{`{"role":"user","content":null}`, false},
		{`{"role":"user","content":[{"type":"text","text":"hi"}]}`, false},
		{`{"role":"user","content":"hi","name":"kavya"}`, false},
		{`{"role":"user","role":"assistant","content":"hi"}`, false},
		{`{"Role":"user","content":"hi"}`, false},
		{`{"role":"user"}`, false},
		{`{"role":"user","content":"hi"} x`, false},
		{`{"role":"user","content":"hi",}`, false},
		{`{"role":"user" "content":"hi"}`, false},
		{`["role","user"]`, false},
		{"{\"role\":\"user\",\"content\":\"tab\there\"}", false},
		{"{\"role\":\"user\",\"content\":\"bad \xff\"}", false},
	} {
		got, ok := plainMessage([]byte(c.in))
		if ok != c.plain {
			t.Errorf("plainMessage(%s): ok = %v, want %v", c.in, ok, c.plain)
			continue
		}
		if !ok {
			continue
		}
		var want chatmem.Message
		if err := json.Unmarshal([]byte(c.in), &want); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", c.in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("plainMessage(%s) = %+v, json.Unmarshal gives %+v", c.in, got, want)
		}
	}
}

// FuzzPlainMessage: whatever plainMessage decodes, json.Unmarshal
// decodes the same.
func FuzzPlainMessage(f *testing.F) {
	f.Add(`{"role":"user","content":"hi"}`)
	f.Add(`{"content":"x","role":"tool"}`)
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := plainMessage([]byte(in))
		if !ok {
			return
		}
		var want chatmem.Message
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("plainMessage decoded %q, which json.Unmarshal refuses: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plainMessage(%q) = %+v, json.Unmarshal gives %+v", in, got, want)
		}
	})
}

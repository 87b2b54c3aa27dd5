package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
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

// TestScanChatRequest: the scan of a request body reads what the
// decoder's tokens read (the same fields, offsets and errors), and leaves
// every body it cannot scan to them.
func TestScanChatRequest(t *testing.T) {
	for _, body := range []string{
		`{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"user","content":"hi"}]}`,
		` { "messages" : [ {"role":"user","content":"a \"q\" ]}"} ] , "stream" : true , "n" : -1.5e3 } `,
		`{"stream":null,"messages":[],"metadata":{"conversation_id":"c1","x":"y"},"user":"u1","safety_identifier":"s1"}`,
		`{"safety_identifier":"s1","user":"u1","prompt_cache_key":"k","messages":{}}`,
		`{"user":7,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"a":[1,{"b":null}]}}}]}`,
		`{"stream":"yes","messages":[]}`,
		`{"stream":false,"stream":true}`,
		`{"messages":[],"messages":[]}`,
		`{"metadata":null,"metadata":{}}`,
		`{"a":1,"a":2,"messages":[{"role":"user","content":"dup"}]}`,
		`{}`, ` {} `, `[]`, `null`, `{`, ``, `{"messages":[]} {}`, `{"mess\u0061ges":[1]}`, `{"messages":[1],}`,
		`{"x":true,"y":false,"z":null,"messages":[{"role":"user","content":"\\"}]}`,
		`{"model":"a","model":7,"model":null,"messages":[]}`, `{"model":"gpt-\u00e9","model":"b\"c","messages":[]}`, `{"model":{"x":1}}`,
		`{"Model":"claude-opus","messages":[]}`, `{"model":"cheap","MODEL":"claude-opus","messages":[]}`,
	} {
		want, wantErr := decodeChatRequest([]byte(body))
		got, ok, err := scanChatRequest([]byte(body))
		if !ok {
			if json.Valid([]byte(body)) && wantErr == nil && len(body) > 0 && body[0] == '{' && !strings.Contains(body, `\u`) {
				t.Errorf("%s: not scanned", body)
			}
			continue
		}
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%s: scan error %v, decoder's %v", body, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		var named struct { // the model as json.Unmarshal reads it, which the usage ledger counts under
			Model string `json:"model"`
		}
		_ = json.Unmarshal([]byte(body), &named)
		if got.model != named.Model {
			t.Errorf("%s: model %q, json.Unmarshal reads %q", body, got.model, named.Model)
		}
		if !bytes.Equal(got.messages, want.messages) || got.start != want.start || got.end != want.end || got.stream != want.stream ||
			!bytes.Equal(got.metadata, want.metadata) || got.metaStart != want.metaStart || got.metaEnd != want.metaEnd ||
			got.user != want.user || got.cacheKey != want.cacheKey || got.model != want.model || !bytes.Equal(got.body, want.body) {
			t.Errorf("%s: scan read %+v, the decoder %+v", body, got, want)
		}
	}
}

// TestSplitArray: the elements found by splitArray are those
// json.Unmarshal finds, for arrays; anything else is left to it.
func TestSplitArray(t *testing.T) {
	for _, raw := range []string{
		`[{"role":"user","content":"a, ] }"}]`,
		` [ {"role":"user","content":"x"} , {"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":[1]}"}}]} , 3 , "s" , [1,[2]] , null , true ] `,
		`[]`, `[ ]`, `{}`, `null`, `"x"`, `[1 2]`, `[1,]`, `[1`,
	} {
		var want []json.RawMessage
		werr := json.Unmarshal([]byte(raw), &want)
		got, ok := splitArray([]byte(raw))
		if !ok {
			if werr == nil && len(want) > 0 {
				t.Errorf("%s: not split, json.Unmarshal finds %d elements", raw, len(want))
			}
			continue
		}
		if werr != nil || len(got) != len(want) {
			t.Errorf("%s: split into %d elements, json.Unmarshal %d (%v)", raw, len(got), len(want), werr)
			continue
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("%s: element %d is %s, json.Unmarshal's %s", raw, i, got[i], want[i])
			}
		}
	}
}

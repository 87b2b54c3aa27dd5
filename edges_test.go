package chatmem_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TestCheckJSONText checks that the text encoding/json would rewrite to
// U+FFFD is refused, and that everything else passes.
func TestCheckJSONText(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{`{"content":"héllo 🙂"}`, true},
		{`{"content":"\ud83d\ude42 and \u00e9 and \\ud800"}`, true}, // a pair, a BMP escape, an escaped backslash
		{`{"content":"a\\\\"}`, true},
		{"{\"content\":\"a\xffb\"}", false},
		{"{\"content\":\"\xc3\"}", false},         // truncated sequence
		{"{\"content\":\"\xed\xa0\x80\"}", false}, // a surrogate encoded in UTF-8
		{`{"content":"\ud800"}`, false},
		{`{"content":"\udc00x"}`, false},
		{`{"content":"\ud800\u0041"}`, false},
		{`{"content":"\ud800\\udc00"}`, false}, // the second escape is an escaped backslash
	} {
		err := chatmem.CheckJSONText([]byte(tt.in))
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("CheckJSONText(%q) = %v, want ok %v (ErrInvalid otherwise)", tt.in, err, tt.ok)
		}
		// What is accepted decodes without U+FFFD.
		if tt.ok {
			var v struct{ Content string }
			if err := json.Unmarshal([]byte(tt.in), &v); err != nil || strings.ContainsRune(v.Content, '\uFFFD') {
				t.Errorf("accepted %q decodes to %q, %v", tt.in, v.Content, err)
			}
		}
	}
}

// TestMessageUnmarshalRefusesInvalidUTF8 checks every string of a message:
// none is decoded into U+FFFD.
func TestMessageUnmarshalRefusesInvalidUTF8(t *testing.T) {
	for _, in := range []string{
		"{\"role\":\"user\",\"content\":\"a\xffb\"}",
		"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}",
		"{\"role\":\"user\",\"content\":\"hi\",\"name\":\"\xfe\"}",
		"{\"role\":\"user\",\"content\":\"hi\",\"metadata\":{\"\xff\":\"v\"}}",
		"{\"role\":\"user\",\"content\":\"hi\",\"metadata\":{\"k\":\"\xff\"}}",
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"\xff\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}",
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\xff\",\"arguments\":\"{}\"}}]}",
		"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\\\"\xff\\\"}\"}}]}",
		"{\"role\":\"tool\",\"content\":\"42\",\"tool_call_id\":\"c\xff\"}",
		`{"role":"user","content":"\udc00"}`,
	} {
		var m chatmem.Message
		err := json.Unmarshal([]byte(in), &m)
		if !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Unmarshal(%q) = %+v, %v; want ErrInvalid", in, m, err)
		}
	}
}

// TestValidateLimits checks that each part of a message is bounded, and
// that the error names the field and the limit.
func TestValidateLimits(t *testing.T) {
	l := chatmem.Limits{MaxContentBytes: 100, MaxMetadata: 4, MaxMetadataBytes: 50, MaxMetadataKeyBytes: 8, MaxNameBytes: 10, MaxArgumentsBytes: 20}
	user := func(mod func(*chatmem.Message)) chatmem.Message {
		m := chatmem.Message{Role: chatmem.RoleUser, Content: "hi"}
		mod(&m)
		return m
	}
	call := func(id, name, args string) chatmem.Message {
		return chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: id, Type: "function", Function: chatmem.FunctionCall{Name: name, Arguments: args}}}}
	}
	for _, tt := range []struct {
		name string
		m    chatmem.Message
		want []string // substrings of the error; nil: valid
	}{
		{"within every limit", user(func(m *chatmem.Message) {
			m.Name, m.Metadata = "0123456789", map[string]string{"k1234567": strings.Repeat("v", 42)}
		}), nil},
		{"content", user(func(m *chatmem.Message) { m.Content = strings.Repeat("x", 101) }), []string{"content", "101", "100"}},
		{"name", user(func(m *chatmem.Message) { m.Name = strings.Repeat("n", 11) }), []string{"name", "11", "10"}},
		{"metadata bytes", user(func(m *chatmem.Message) {
			m.Metadata = map[string]string{"a": strings.Repeat("v", 30), "b": strings.Repeat("v", 30)}
		}), []string{"metadata", "62", "50"}},
		{"metadata key", user(func(m *chatmem.Message) { m.Metadata = map[string]string{"123456789": "v"} }), []string{"metadata key", "9", "8"}},
		{"metadata entries", user(func(m *chatmem.Message) { m.Metadata = map[string]string{"a": "", "b": "", "c": "", "d": "", "e": ""} }), []string{"metadata", "5", "4"}},
		{"tool call id", call(strings.Repeat("i", 11), "f", "{}"), []string{"tool call 0 id", "10"}},
		{"function name", call("c", strings.Repeat("f", 11), "{}"), []string{"tool call 0 function.name", "10"}},
		{"arguments", call("c", "f", strings.Repeat("a", 21)), []string{"arguments", "21", "20"}},
		{"tool_call_id", chatmem.Message{Role: chatmem.RoleTool, Content: "42", ToolCallID: strings.Repeat("c", 11)}, []string{"tool_call_id", "10"}},
	} {
		err := tt.m.Validate(l)
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s: Validate = %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, chatmem.ErrTooLarge) {
			t.Errorf("%s: Validate = %v, want ErrTooLarge", tt.name, err)
			continue
		}
		for _, s := range tt.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not name %q", tt.name, err, s)
			}
		}
	}
	// The defaults bound metadata: 4 MB of it is refused (it used to be
	// stored and sent back by every context read, counted as 5 tokens).
	big := user(func(m *chatmem.Message) { m.Metadata = map[string]string{"blob": strings.Repeat("x", 4<<20)} })
	if err := big.Validate(chatmem.Limits{}); !errors.Is(err, chatmem.ErrTooLarge) {
		t.Errorf("4 MB of metadata under the default limits: Validate = %v, want ErrTooLarge", err)
	}
}

// TestValidateCreatedAt checks the one range of times every store keeps.
func TestValidateCreatedAt(t *testing.T) {
	for _, tt := range []struct {
		at time.Time
		ok bool
	}{
		{time.Time{}, true},
		{chatmem.MinTime, true},
		{chatmem.MaxTime.Add(-time.Microsecond), true},
		{chatmem.MinTime.Add(-time.Nanosecond), false},
		{chatmem.MaxTime, false},
		{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), false},
		{time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), false},
	} {
		m := chatmem.Message{Role: chatmem.RoleUser, Content: "hi", CreatedAt: tt.at}
		err := m.Validate(chatmem.Limits{})
		if (err == nil) != tt.ok || err != nil && (!errors.Is(err, chatmem.ErrInvalid) || !strings.Contains(err.Error(), "created_at")) {
			t.Errorf("Validate(created_at %v) = %v, want ok %v", tt.at, err, tt.ok)
		}
	}
}

// TestAppendEdges checks Memory.Append's own refusals and that they write
// nothing: an unknown tokenizer on an existing conversation, a time out of
// range; and that a given created_at is kept in UTC to the microsecond.
func TestAppendEdges(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "edges"}
	hi := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi"}}
	if _, err := mem.Append(ctx, key, hi, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := mem.Store().Range(ctx, key, 0, 0)

	_, err := mem.Append(ctx, key, hi, chatmem.AppendOptions{Tokenizer: "nope"})
	if !errors.Is(err, chatmem.ErrInvalid) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Append(tokenizer nope) to an existing conversation = %v, want ErrInvalid naming it", err)
	}
	old := []chatmem.Message{{Role: chatmem.RoleUser, Content: "old", CreatedAt: time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)}}
	if _, err := mem.Append(ctx, key, old, chatmem.AppendOptions{}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Append(created_at 1969) = %v, want ErrInvalid", err)
	}
	if after, _ := mem.Store().Range(ctx, key, 0, 0); len(after) != len(before) {
		t.Errorf("refused appends stored messages: %d, want %d", len(after), len(before))
	}

	zone := time.FixedZone("+02", 2*3600)
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, zone)
	res, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "dated", CreatedAt: at}}, chatmem.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2024, 5, 6, 5, 8, 9, 123456000, time.UTC)
	if got := res.Messages[0].CreatedAt; !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("created_at %v stored as %v, want %v", at, got, want)
	}
}

// TestAppendFingerprint checks that Memory.Append fingerprints an
// idempotent append: the same messages replay, others are refused.
func TestAppendFingerprint(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "fp"}
	first := []chatmem.Message{{Role: chatmem.RoleUser, Content: "order 1", Metadata: map[string]string{"a": "1", "b": "2"}}}
	if _, err := mem.Append(ctx, key, first, chatmem.AppendOptions{IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	again := []chatmem.Message{{Role: chatmem.RoleUser, Content: "order 1", Metadata: map[string]string{"b": "2", "a": "1"}}}
	res, err := mem.Append(ctx, key, again, chatmem.AppendOptions{IdempotencyKey: "k"})
	if err != nil || !res.Replayed {
		t.Errorf("retry with the same messages = replayed %v, %v; want a replay", res.Replayed, err)
	}
	_, err = mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "order 2"}}, chatmem.AppendOptions{IdempotencyKey: "k"})
	if !errors.Is(err, chatmem.ErrIdempotencyKeyReused) {
		t.Errorf("key reused with other messages = %v, want ErrIdempotencyKeyReused", err)
	}
	if conv, _ := mem.Store().Conversation(ctx, key); conv.LastSeq != 1 {
		t.Errorf("LastSeq = %d, want 1", conv.LastSeq)
	}
}

// TestSetFactsSourceSeq checks that a fact cannot name a message the
// conversation does not have, and that nothing is written then.
func TestSetFactsSourceSeq(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "facts"}
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "I am Ada"}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mem.SetFacts(ctx, key, []chatmem.Fact{{Key: "name", Value: "Ada", SourceSeq: 1}}); err != nil {
		t.Fatalf("SetFacts(source_seq 1) = %v", err)
	}
	err := mem.SetFacts(ctx, key, []chatmem.Fact{{Key: "city", Value: "Paris"}, {Key: "name", Value: "Bob", SourceSeq: 2}})
	if !errors.Is(err, chatmem.ErrInvalid) || !strings.Contains(err.Error(), "source_seq") {
		t.Errorf("SetFacts(source_seq 2 of 1) = %v, want ErrInvalid naming source_seq", err)
	}
	facts, err := mem.Facts(ctx, key)
	if err != nil || len(facts) != 1 || facts[0].Value != "Ada" {
		t.Errorf("facts after the refused set = %+v, %v; want only name=Ada", facts, err)
	}
}

// FuzzCheckJSONText checks that a JSON string CheckJSONText accepts
// decodes without U+FFFD unless the input wrote one itself, and that it
// refuses every string whose bytes are not valid UTF-8.
func FuzzCheckJSONText(f *testing.F) {
	for _, s := range []string{`"abc"`, `"\ud83d\ude42"`, `"\ud800"`, "\"\xff\"", `"\\ud800"`, `"\uFFFD"`, "\"\xef\xbf\xbd\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := chatmem.CheckJSONText(b)
		if err != nil {
			if !errors.Is(err, chatmem.ErrInvalid) {
				t.Fatalf("CheckJSONText(%q) = %v, not ErrInvalid", b, err)
			}
			return
		}
		var s string
		if json.Unmarshal(b, &s) != nil {
			return
		}
		wrote := strings.Contains(string(b), "\uFFFD") || strings.Contains(strings.ToLower(string(b)), `\ufffd`)
		if strings.ContainsRune(s, '\uFFFD') && !wrote {
			t.Fatalf("CheckJSONText accepted %q, which decodes to %q with U+FFFD", b, s)
		}
	})
}

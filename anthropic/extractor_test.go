package anthropic

import (
	"bytes"
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// conversation is a stored conversation: a system message, the user's
// facts in two user messages, and an order ID that only the assistant
// states.
func conversation() []chatmem.Message {
	return []chatmem.Message{
		{Seq: 1, Role: chatmem.RoleSystem, Content: "You are ShopBot."},
		{Seq: 2, Role: chatmem.RoleUser, Content: "Hi, I'm Kavya, writing from Pune."},
		{Seq: 3, Role: chatmem.RoleAssistant, Content: "Welcome! Your last order was SE-10423."},
		{Seq: 4, Role: chatmem.RoleUser, Content: "Actually my name is Kavya Rao. I wear size 38 shoes."},
	}
}

func answer(facts ...string) string {
	return `{"facts":[` + strings.Join(facts, ",") + `]}`
}

// The checks and the prompt are internal/llm's, tested there; here, one
// extraction over the wire, asked for as JSON text and answered in a code
// fence after a thinking block.
func TestExtractRequestAndAnswer(t *testing.T) {
	f := newFakeAnthropic(t)
	f.reply = func(int, messagesRequest) fakeReply {
		return fakeReply{thinking: "The user gave two names.", text: "```json\n" + answer(
			`{"key":"name","value":"Kavya Rao","source_seq":4,"confidence":0.95}`,
			`{"key":"name","value":" Kavya ","source_seq":2,"confidence":0.9}`,
			`{"key":"order_id","value":"SE-10423","source_seq":3,"confidence":1}`,
		) + "\n```"}
	}
	x := f.extractor(t, nil)
	facts, err := x.Extract(context.Background(), conversation())
	if err != nil {
		t.Fatal(err)
	}
	name := "anthropic:claude-test"
	want := []chatmem.Fact{
		{Key: "name", Value: "Kavya", SourceSeq: 2, SetBy: name, Confidence: 0.9},
		{Key: "name", Value: "Kavya Rao", SourceSeq: 4, SetBy: name, Confidence: 0.95},
	}
	if !reflect.DeepEqual(facts, want) || x.Name() != name {
		t.Errorf("Extract =\n%+v\nwant (by seq, trimmed, the assistant's order ID dropped)\n%+v; Name %q", facts, want, x.Name())
	}

	req, h := f.last(t)
	if h.Get("X-Api-Key") != "sk-ant-test" || req.Model != "claude-test" {
		t.Errorf("x-api-key %q, model %q", h.Get("X-Api-Key"), req.Model)
	}
	// JSON text: no forced tool call, which thinking models refuse, and no
	// output_config, which older models lack.
	if req.Temperature != nil || req.ToolChoice != nil || req.Tools != nil || req.OutputConfig != nil || len(req.Messages) != 1 {
		t.Errorf("temperature %v, tool_choice %s, tools %s, output_config %s, %d messages; want none, none, none, none, 1",
			req.Temperature, req.ToolChoice, req.Tools, req.OutputConfig, len(req.Messages))
	}
	if system, user := req.system(), req.user(); !strings.Contains(system, "- order_id:") || !strings.Contains(system, `{"facts":[]}`) ||
		!strings.Contains(user, "\n[seq 3] assistant: Welcome! Your last order was SE-10423.\n") || strings.Contains(user, "JSON only") {
		t.Errorf("system:\n%s\nuser message:\n%s\nwant the instructions and the transcript apart", system, user)
	}
}

// Keys, StrictKeys and Logger reach the extraction: the system field lists
// the keys, and facts under other keys are dropped and logged.
func TestExtractorOptions(t *testing.T) {
	f := newFakeAnthropic(t)
	f.reply = func(int, messagesRequest) fakeReply {
		return fakeReply{text: answer(
			`{"key":"shoe_size","value":"38","source_seq":4,"confidence":0.7}`,
			`{"key":"name","value":"Kavya","source_seq":2,"confidence":0.9}`,
			`{"key":"loyalty_tier","value":"gold","source_seq":4,"confidence":0.7}`,
		)}
	}
	var logs bytes.Buffer
	x := f.extractor(t, func(o *ExtractorOptions) {
		o.Keys = []FactKey{{Key: "shoe_size", Description: "the user's shoe size"}, {Key: "name"}}
		o.StrictKeys = true
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	facts, err := x.Extract(context.Background(), conversation())
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 2 || facts[0].Key != "name" || facts[1].Key != "shoe_size" {
		t.Errorf("Extract = %+v, want name and shoe_size only", facts)
	}
	if n := strings.Count(logs.String(), "anthropic extractor dropped a fact"); n != 1 || !strings.Contains(logs.String(), "key=loyalty_tier") {
		t.Errorf("%d drops logged, want loyalty_tier's:\n%s", n, logs.String())
	}
	req, _ := f.last(t)
	system := req.system()
	for _, want := range []string{"- shoe_size: the user's shoe size\n", "- name\n", "Use only these keys"} {
		if !strings.Contains(system, want) {
			t.Errorf("system lacks %q:\n%s", want, system)
		}
	}

	if n := len(DefaultKeys()); n != 6 {
		t.Errorf("DefaultKeys has %d keys, want 6", n)
	}
}

package openai

import (
	"bytes"
	"context"
	"encoding/json"
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
// extraction over the wire, with the facts schema as a strict
// response_format.
func TestExtractRequestAndAnswer(t *testing.T) {
	f := newFakeOpenAI(t)
	f.reply = func(int, chatRequest) fakeReply {
		return fakeReply{content: answer(
			`{"key":"name","value":"Kavya Rao","source_seq":4,"confidence":0.95}`,
			`{"key":"name","value":" Kavya ","source_seq":2,"confidence":0.9}`,
			`{"key":"order_id","value":"SE-10423","source_seq":3,"confidence":1}`,
		)}
	}
	x := f.extractor(t, nil)
	facts, err := x.Extract(context.Background(), conversation())
	if err != nil {
		t.Fatal(err)
	}
	name := "openai:gpt-test"
	want := []chatmem.Fact{
		{Key: "name", Value: "Kavya", SourceSeq: 2, SetBy: name, Confidence: 0.9},
		{Key: "name", Value: "Kavya Rao", SourceSeq: 4, SetBy: name, Confidence: 0.95},
	}
	if !reflect.DeepEqual(facts, want) || x.Name() != name {
		t.Errorf("Extract =\n%+v\nwant (by seq, trimmed, the assistant's order ID dropped)\n%+v; Name %q", facts, want, x.Name())
	}

	req, h := f.last(t)
	if h.Get("Authorization") != "Bearer sk-test" || req.Model != "gpt-test" {
		t.Errorf("Authorization %q, model %q", h.Get("Authorization"), req.Model)
	}
	if req.Temperature == nil || *req.Temperature != 0 {
		t.Errorf("temperature = %v, want 0", req.Temperature)
	}
	rf := req.ResponseFormat
	if rf == nil || rf.Type != "json_schema" || rf.JSONSchema == nil || !rf.JSONSchema.Strict || rf.JSONSchema.Name != "facts" {
		t.Fatalf("response_format = %+v, want a strict json_schema named facts", rf)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(rf.JSONSchema.Schema, &schema); err != nil || !reflect.DeepEqual(schema.Required, []string{"facts"}) {
		t.Errorf("schema %s (%v), want the facts schema", rf.JSONSchema.Schema, err)
	}
	if system, user := req.system(), req.user(); !strings.Contains(system, "- order_id:") || !strings.Contains(system, "JSON only") ||
		!strings.Contains(user, "\n[seq 3] assistant: Welcome! Your last order was SE-10423.\n") || strings.Contains(user, "JSON only") {
		t.Errorf("system message:\n%s\nuser message:\n%s\nwant the instructions and the transcript apart", system, user)
	}
}

// Keys, StrictKeys and Logger reach the extraction: the system message
// lists the keys, the schema allows only them, and facts under other keys
// are dropped and logged.
func TestExtractorOptions(t *testing.T) {
	f := newFakeOpenAI(t)
	f.reply = func(int, chatRequest) fakeReply {
		return fakeReply{content: answer(
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
	if n := strings.Count(logs.String(), "openai extractor dropped a fact"); n != 1 || !strings.Contains(logs.String(), "key=loyalty_tier") {
		t.Errorf("%d drops logged, want loyalty_tier's:\n%s", n, logs.String())
	}
	req, _ := f.last(t)
	system := req.system()
	for _, want := range []string{"- shoe_size: the user's shoe size\n", "- name\n", "Use only these keys"} {
		if !strings.Contains(system, want) {
			t.Errorf("system message lacks %q:\n%s", want, system)
		}
	}
	var schema struct {
		Properties struct {
			Facts struct {
				Items struct {
					Properties struct {
						Key struct {
							Enum []string `json:"enum"`
						} `json:"key"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"facts"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(req.ResponseFormat.JSONSchema.Schema, &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema.Properties.Facts.Items.Properties.Key.Enum; !reflect.DeepEqual(got, []string{"shoe_size", "name"}) {
		t.Errorf("schema key enum = %v, want [shoe_size name]", got)
	}

	if n := len(DefaultKeys()); n != 6 {
		t.Errorf("DefaultKeys has %d keys, want 6", n)
	}
}

package chatmem

import (
	"slices"
	"strings"
	"testing"
)

func TestTerms(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"What was the order ID I gave you?", []string{"order", "id", "gave"}},
		{"My order SE-10423 ships Tuesday; orders ordered", []string{"order", "se", "10423", "ship", "tuesday"}},
		{"Melanie's painting of a sunset", []string{"melani", "paint", "sunset"}},
		{"I’m going to the LGBTQ support group", []string{"go", "lgbtq", "support", "group"}},
		{"the a of and", nil},
		{"x 7 é 東京", []string{"7", "東京"}},
		{"", nil},
	} {
		if got := Terms(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("Terms(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestIndexTerms(t *testing.T) {
	if got := IndexTerms(Message{Role: RoleSystem, Content: "You help with orders"}); got != nil {
		t.Errorf("system message indexed under %q", got)
	}
	m := Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Type: "function",
		Function: FunctionCall{Name: "lookup_order", Arguments: `{"order_id":"SE-10423"}`}}}}
	if got, want := IndexTerms(m), []string{"lookup", "order", "id", "se", "10423"}; !slices.Equal(got, want) {
		t.Errorf("IndexTerms(tool call) = %q, want %q", got, want)
	}
	long := strings.Repeat("word ", 10) + func() string {
		var b strings.Builder
		for i := range 2 * MaxIndexTerms {
			b.WriteString("w")
			b.WriteString(strings.Repeat("x", i%7+1))
			b.WriteString(string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + " ")
		}
		return b.String()
	}()
	if got := IndexTerms(Message{Role: RoleUser, Content: long}); len(got) != MaxIndexTerms {
		t.Errorf("a long message has %d terms, want the cap %d", len(got), MaxIndexTerms)
	}
}

// BenchmarkIndexTerms indexes one turn's messages (a user message of about
// 100 characters and a reply of about 300): what every store's append
// computes for recall.
func BenchmarkIndexTerms(b *testing.B) {
	msgs := []Message{
		{Role: RoleUser, Content: "Where is my order SE-10423? It has not arrived yet and the tracking page has said in transit since Monday. (17)"},
		{Role: RoleAssistant, Content: "I am sorry about the wait. Order SE-10423 left our warehouse in Malmo on Monday and is with the carrier; " +
			"their last scan was at the Hamburg hub this morning, so it should reach you within two working days. " +
			"If it has not arrived by Thursday, tell me and I will open a claim with the carrier right away. (17)"},
	}
	b.ReportAllocs()
	cpu := cpuTime()
	for b.Loop() {
		for _, m := range msgs {
			IndexTerms(m)
		}
	}
	if cpu := cpuTime() - cpu; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

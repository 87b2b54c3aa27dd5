package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestWindowEveryPolicy: window serves every policy over its input, and
// never answers summary_buffer or recall with what token_budget sends.
func TestWindowEveryPolicy(t *testing.T) {
	var msgs []map[string]string
	msgs = append(msgs, map[string]string{"role": "user", "content": "Hi, I'm Kavya. Answer in Tamil please. My passport number is Z7781204."})
	for i := range 30 {
		msgs = append(msgs,
			map[string]string{"role": "assistant", "content": fmt.Sprintf("Order SE-%05d left the warehouse on %d May.", 10000+i, 1+i%28)},
			map[string]string{"role": "user", "content": fmt.Sprintf("Turn %d: my order SE-%05d has not arrived, can you check?", i, 10000+i)})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": "What was my passport number again?"})
	in, _ := json.Marshal(msgs)

	type out struct {
		Messages []struct{ Role, Content string }
		Tokens   int
		Summary  *struct {
			Text      string
			CoversSeq int64 `json:"covers_seq"`
		}
		Facts []struct{ Key, Value string }
	}
	get := func(args ...string) (out, string) {
		t.Helper()
		stdout, stderr, code := runCLI(t, string(in), append([]string{"window"}, args...)...)
		if code != 0 {
			t.Fatalf("window %v: exit %d: %s", args, code, stderr)
		}
		var o out
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatalf("window %v: %v in %q", args, err, stdout)
		}
		var b strings.Builder
		for _, m := range o.Messages {
			b.WriteString(m.Role + ": " + m.Content + "\n")
		}
		return o, b.String()
	}
	_, plain := get("--policy", "token_budget", "--budget", "200")
	sb, sbText := get("--policy", "summary_buffer", "--budget", "200")
	if sb.Summary == nil || !strings.Contains(sbText, "Summary of messages 1-") || sbText == plain {
		t.Errorf("summary_buffer sent no summary:\n%s", sbText)
	}
	if sb.Tokens > 200 {
		t.Errorf("summary_buffer tokens = %d, over 200", sb.Tokens)
	}
	_, recall := get("--policy", "recall", "--budget", "200")
	if !strings.Contains(recall, "Z7781204") || strings.Contains(plain, "Z7781204") {
		t.Errorf("recall did not bring back the passport turn:\n%s", recall)
	}
	for _, policy := range []string{"all", "last_turns", "token_budget", "summary_buffer", "recall"} {
		o, text := get("--policy", policy, "--budget", "200", "--turns", "2", "--facts")
		facts := make(map[string]string)
		for _, f := range o.Facts {
			facts[f.Key] = f.Value
		}
		if facts["name"] != "Kavya" || facts["language"] != "ta" || !strings.Contains(text, "User facts:") {
			t.Errorf("%s --facts: facts %v, window\n%s", policy, facts, text)
		}
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"slices"
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

// TestWindowDefaultInvocation: a newcomer's first command, with no flags,
// prints a window (token_budget at the proxy's 4000 tokens); a budget or
// turns a policy cannot use is an error naming the flag and the help.
func TestWindowDefaultInvocation(t *testing.T) {
	out, errOut, code := runCLI(t, "", "window", "../../testdata/seed.json")
	var got output
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got.Messages) != 5 || got.Tokens != 63 || got.Dropped != 0 {
		t.Errorf("chatmem window testdata/seed.json: exit %d, stdout %q, stderr %q; want the 5 messages (63 tokens)", code, out, errOut)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--budget", "0"}, "chatmem: window: --policy token_budget needs --budget of at least 1; run chatmem window --help\n"},
		{[]string{"--policy", "recall", "--budget", "0"}, "--policy recall needs --budget of at least 1; run chatmem window --help"},
		{[]string{"--policy", "last_turns", "--turns", "0"}, "--policy last_turns needs --turns of at least 1; run chatmem window --help"},
		{[]string{"--budget=abc"}, `window: --budget: "abc" is not a whole number`},
		{[]string{"../../testdata/seed.json", "other.json"}, `window: takes at most one FILE (got ["../../testdata/seed.json" "other.json"]); run chatmem window --help`},
		{[]string{"--bugdet", "40"}, "unknown flag --bugdet (did you mean --budget?); run chatmem window --help"},
	} {
		args := append([]string{"window"}, tt.args...)
		if !slices.Contains(tt.args, "../../testdata/seed.json") {
			args = append(args, "../../testdata/seed.json")
		}
		out, errOut, code := runCLI(t, "", args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("chatmem %q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", args, code, out, errOut, tt.want)
		}
	}
}

// TestWindowFlagsAfterFile: flags may follow the file, and a boolean flag
// takes true or false after it as the help's other flags take values.
func TestWindowFlagsAfterFile(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		facts bool
	}{
		{[]string{"--budget", "40", "--facts", "true", "../../testdata/seed.json"}, true},
		{[]string{"--budget", "40", "../../testdata/seed.json", "--facts"}, true},
		{[]string{"../../testdata/seed.json", "--budget", "40", "--facts=true"}, true},
		{[]string{"--facts", "false", "--budget", "40", "../../testdata/seed.json"}, false},
		{[]string{"--budget", "40", "--", "../../testdata/seed.json"}, false},
	} {
		out, errOut, code := runCLI(t, "", append([]string{"window"}, tt.args...)...)
		var got struct {
			Messages []map[string]any
			Facts    []struct{ Key, Value string }
		}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Errorf("chatmem window %q: exit %d, stdout %q, stderr %q", tt.args, code, out, errOut)
			continue
		}
		if hasName := len(got.Facts) > 0 && got.Facts[0].Value == "Kavya"; hasName != tt.facts {
			t.Errorf("chatmem window %q: facts %v; want the name fact: %t", tt.args, got.Facts, tt.facts)
		}
	}
}

// TestWindowSummaryBufferSmallBudget: at budget 40 on the seed,
// summary_buffer's summary keeps what the last message ("Add the DryFit
// ones to my cart please.") carries on, the running socks the user asked
// about, as the token_budget window at 40 does; not only the first
// message's name and order.
func TestWindowSummaryBufferSmallBudget(t *testing.T) {
	args := []string{"window", "--policy", "summary_buffer", "--budget", "40", "../../testdata/seed.json"}
	out, errOut, code := runCLI(t, "", args...)
	var got struct {
		Messages []struct{ Role, Content string }
		Tokens   int
		Summary  *struct{ Text string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got.Messages) == 0 {
		t.Fatalf("chatmem %q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
	}
	if got.Summary == nil || !strings.Contains(got.Summary.Text, "user: Do you have running socks?") {
		t.Errorf("chatmem %q: the summary lacks the running socks the user asked about:\n%s", args, out)
	}
	if last := got.Messages[len(got.Messages)-1]; last.Content != "Add the DryFit ones to my cart please." || got.Tokens > 40 {
		t.Errorf("chatmem %q: last message %q, %d tokens; want the last user message within 40", args, last.Content, got.Tokens)
	}
}

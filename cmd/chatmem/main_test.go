package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
)

// runCLI runs the command in-process and returns stdout, stderr and the
// exit code main would use.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	code := exitCode(err, &stderr)
	return stdout.String(), stderr.String(), code
}

func TestDemoPrintsTheSeedExactly(t *testing.T) {
	out, errOut, code := runCLI(t, "", "demo")
	want := `budget 100: keeps 5 messages (63 tokens), first: "Hi, I'm Kavya. My order SE-104"
budget  40: keeps 3 messages (36 tokens), first: 'Ok. Also, do you have running '
budget  25: keeps 1 messages (9 tokens), first: 'Add the DryFit ones to my cart'
`
	if out != want || code != 0 {
		t.Errorf("demo = %q (exit %d, stderr %q), want %q", out, code, errOut, want)
	}
}

const seedJSON = `[
 {"role":"user","content":"Hi, I'm Kavya. My order SE-10423 hasn't arrived."},
 {"role":"assistant","content":"Sorry Kavya! It is out for delivery and should arrive by 8 pm."},
 {"role":"user","content":"Ok. Also, do you have running socks?"},
 {"role":"assistant","content":"Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199."},
 {"role":"user","content":"Add the DryFit ones to my cart please."}
]`

type output struct {
	Messages []map[string]any `json:"messages"`
	Tokens   int              `json:"tokens"`
	Dropped  int              `json:"dropped"`
}

func TestWindow(t *testing.T) {
	tools := `[
 {"role":"system","content":"Be brief."},
 {"role":"user","content":"Where is SE-10423?"},
 {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"track","arguments":"{\"order\":\"SE-10423\"}"}},{"id":"c2","type":"function","function":{"name":"eta","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"c1","content":"out for delivery"},
 {"role":"tool","tool_call_id":"c2","content":"8 pm"},
 {"role":"assistant","content":"It arrives by 8 pm."}
]`
	tests := []struct {
		name    string
		stdin   string
		args    []string
		n       int // messages
		tokens  int
		dropped int
	}{
		{"seed 40", seedJSON, []string{"--budget", "40"}, 3, 36, 2},
		{"seed 100 from stdin dash", seedJSON, []string{"--budget", "100", "-"}, 5, 63, 0},
		{"last turns", seedJSON, []string{"--policy", "last_turns", "--turns", "1"}, 1, 9, 4},
		{"all", seedJSON, []string{"--policy", "all"}, 5, 63, 0},
		// Be brief. = 2, Where is SE-10423? = 4, the call message = 1 (empty
		// content: the seed's max(1, ...)) + track 1 + its arguments 5 + eta 1
		// + {} 1, results 4 + 1, answer 4: 24.
		{"tool unit kept with its results", tools, []string{"--budget", "100"}, 6, 24, 0},
		{"o200k counts framing", seedJSON, []string{"--budget", "1000", "--tokenizer", "o200k_base"}, 5, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tt.stdin, append([]string{"window"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got output
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output %q: %v", out, err)
			}
			if len(got.Messages) != tt.n || (tt.tokens != 0 && got.Tokens != tt.tokens) || got.Dropped != tt.dropped {
				t.Errorf("window %v = %d msgs, %d tokens, %d dropped; want %d, %d, %d", tt.args, len(got.Messages), got.Tokens, got.Dropped, tt.n, tt.tokens, tt.dropped)
			}
			for _, m := range got.Messages {
				if _, ok := m["seq"]; ok {
					t.Errorf("message carries internal field seq: %v", m)
				}
			}
		})
	}
	// Tool calls and IDs survive as they came in.
	out, _, _ := runCLI(t, tools, "window", "--budget", "100")
	var got output
	json.Unmarshal([]byte(out), &got)
	calls, _ := got.Messages[2]["tool_calls"].([]any)
	if len(calls) != 2 || got.Messages[3]["tool_call_id"] != "c1" || got.Messages[2]["content"] != nil {
		t.Errorf("tool messages = %v", got.Messages[2:4])
	}
	// o200k: 5 messages x 3 framing + role tokens + content + 3 reply priming > 63.
	out, _, _ = runCLI(t, seedJSON, "window", "--budget", "1000", "--tokenizer", "o200k_base")
	json.Unmarshal([]byte(out), &got)
	if got.Tokens <= 5*3+3 {
		t.Errorf("o200k tokens = %d, want more than the framing alone", got.Tokens)
	}
}

func TestWindowErrors(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		msg   string
	}{
		{"invalid JSON", "nope", []string{"--budget", "40"}, 2, "not a JSON array"},
		{"not an array", `{"role":"user"}`, []string{"--budget", "40"}, 2, "not a JSON array"},
		{"unknown role", `[{"role":"robot","content":"x"}]`, []string{"--budget", "40"}, 2, "unknown role"},
		{"empty content", `[{"role":"user","content":""}]`, []string{"--budget", "40"}, 2, "empty content"},
		{"orphan tool result", `[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c1","content":"x"}]`, []string{"--budget", "40"}, 2, "tool message answers"},
		{"image part", `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]`, []string{"--budget", "40"}, 2, "only text parts"},
		{"unknown policy", seedJSON, []string{"--policy", "everything", "--budget", "40"}, 2, `window: --policy: "everything" is unknown: want one of all, `},
		{"budget zero", seedJSON, []string{"--budget", "0"}, 2, "window: --policy token_budget needs --budget of at least 1; run chatmem window --help"},
		{"negative budget", seedJSON, []string{"--budget", "-3"}, 2, "--budget: -3 is out of range: want a whole number from 0 to"},
		{"unknown tokenizer", seedJSON, []string{"--budget", "40", "--tokenizer", "gpt2"}, 2, "unknown tokenizer"},
		{"bad flag", seedJSON, []string{"--bogus"}, 2, "chatmem: window: unknown flag --bogus; run chatmem window --help\n"},
		{"missing file", "", []string{"--budget", "40", "/nonexistent.json"}, 2, "no such file"},
		{"budget too small", seedJSON, []string{"--budget", "8"}, 1, "budget too small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tt.stdin, append([]string{"window"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.msg) || out != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d and %q", code, errOut, out, tt.code, tt.msg)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, cmd := range commands() {
		_, errOut, code := runCLI(t, "", cmd.name, "--help")
		if code != 0 || !strings.Contains(errOut, "Example:") {
			t.Errorf("%s --help: exit %d, %q", cmd.name, code, errOut)
		}
	}
	if _, _, code := runCLI(t, "", "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
}

// TestReadmeWindow runs the README's window command on testdata/seed.json,
// which holds the seed's messages, and gets the README's answer.
func TestReadmeWindow(t *testing.T) {
	b, err := os.ReadFile("../../testdata/seed.json")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []chatmem.Message
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatal(err)
	}
	want := seed.History()
	if len(msgs) != len(want) {
		t.Fatalf("testdata/seed.json holds %d messages, the seed %d", len(msgs), len(want))
	}
	for i := range msgs {
		if msgs[i].Role != want[i].Role || msgs[i].Content != want[i].Content {
			t.Errorf("testdata/seed.json message %d = %s %q, the seed's %s %q", i, msgs[i].Role, msgs[i].Content, want[i].Role, want[i].Content)
		}
	}
	out, errOut, code := runCLI(t, "", "window", "--policy", "token_budget", "--budget", "40", "../../testdata/seed.json")
	var got output
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got.Messages) != 3 || got.Tokens != 36 || got.Dropped != 2 {
		t.Errorf("window --budget 40 testdata/seed.json: exit %d, %q, %q; want 3 messages, 36 tokens, 2 dropped", code, out, errOut)
	}
}

// TestUsageErrorsNameTheHelp: every usage error (exit 2) says where the
// command's help is, those the command writes itself too.
func TestUsageErrorsNameTheHelp(t *testing.T) {
	for _, args := range [][]string{
		{"window", "--budget", "40", "/nonexistent.json"},
		{"migrate", "--from", "memory:", "--to", "memory:"},
		{"export", "--store", "memory:", "--tenant", "a/b"},
		{"purge", "--store", "memory:", "--tenant", "a/b"},
		{"import", "--store", "nosuch:x", "-"},
	} {
		_, errOut, code := runCLI(t, "[]", args...)
		if want := "; run chatmem " + args[0] + " --help\n"; code != 2 || !strings.HasSuffix(errOut, want) || strings.Count(errOut, "--help") != 1 {
			t.Errorf("chatmem %q: exit %d, stderr %q; want exit 2 and one line ending %q", args, code, errOut, want)
		}
	}
}

package oneshot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/tokenizer"
)

// chat is a long support conversation whose first turn holds the user's
// name, address and the language asked for, and whose turn 7 holds a
// passport number asked about again at the end.
func chat() []chatmem.Message {
	msgs := []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "Hi, I'm Kavya. Please answer in Tamil. Deliver to 14 Lake Road, Pune 411001, not my home."},
		{Role: chatmem.RoleAssistant, Content: "Noted, Kavya: deliveries go to 14 Lake Road, Pune 411001."},
	}
	for i := range 40 {
		u := fmt.Sprintf("Turn %d: my order SE-%05d for Rs %d has not arrived, can you check?", i, 10000+i, 100+i)
		if i == 7 {
			u = "My passport number for the visa form is Z7781204, keep it handy."
		}
		msgs = append(msgs,
			chatmem.Message{Role: chatmem.RoleUser, Content: u},
			chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("Order SE-%05d left the warehouse on %d May.", 10000+i, 1+i%28)})
	}
	return append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: "What was my passport number for the visa form again?"})
}

func window(t *testing.T, msgs []chatmem.Message, p chatmem.Policy) chatmem.Window {
	t.Helper()
	w, err := Window(context.Background(), msgs, p, Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatalf("Window(%+v): %v", p, err)
	}
	return w
}

func text(w chatmem.Window) string {
	var b strings.Builder
	for _, m := range w.Messages {
		b.WriteString(m.Content + "\n")
	}
	return b.String()
}

// TestWindowSummaryBuffer: summary_buffer sends a summary of what its
// window leaves out, within the budget and with no gap, at every budget.
func TestWindowSummaryBuffer(t *testing.T) {
	for _, budget := range []int{128, 256, 512} {
		w := window(t, chat(), chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: budget})
		if w.Summary == nil {
			t.Fatalf("budget %d: no summary; window %q", budget, text(w))
		}
		if w.Tokens > budget {
			t.Errorf("budget %d: %d tokens", budget, w.Tokens)
		}
		var first int64
		for _, m := range w.Messages {
			if m.Seq > 0 && m.Role != chatmem.RoleSystem {
				first = m.Seq
				break
			}
		}
		if first != w.Summary.CoversSeq+1 {
			t.Errorf("budget %d: summary covers 1-%d, window starts at %d", budget, w.Summary.CoversSeq, first)
		}
		plain := window(t, chat(), chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: budget})
		if text(plain) == text(w) {
			t.Errorf("budget %d: summary_buffer sent what token_budget sends", budget)
		}
	}
}

// TestWindowRecall: recall brings back the older turn the newest user
// message asks about, which token_budget leaves out.
func TestWindowRecall(t *testing.T) {
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 300}
	w := window(t, chat(), p)
	if !strings.Contains(text(w), "Z7781204") {
		t.Errorf("recall window lacks the passport turn:\n%s", text(w))
	}
	plain := window(t, chat(), chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 300})
	if strings.Contains(text(plain), "Z7781204") {
		t.Fatalf("token_budget at 300 should not reach the passport turn")
	}
}

// TestWindowFacts: with Facts, the rule extractor's facts of the user
// messages are pinned, under any policy.
func TestWindowFacts(t *testing.T) {
	for _, kind := range chatmem.Policies {
		p := chatmem.Policy{Kind: kind, Budget: 400, Turns: 2, Facts: true}
		w := window(t, chat(), p)
		got := make(map[string]string)
		for _, f := range w.Facts {
			got[f.Key] = f.Value
		}
		if got["name"] != "Kavya" || got["language"] != "ta" || got["address"] != "14 Lake Road, Pune 411001" {
			t.Errorf("%s with facts: facts %v", kind, got)
		}
		if !strings.Contains(text(w), "User facts:") {
			t.Errorf("%s with facts: no facts message in %q", kind, text(w))
		}
	}
}

// TestWindowPlainPoliciesAsApply: without facts, all, last_turns and
// token_budget select exactly what chatmem.Apply does (the seed's figures).
func TestWindowPlainPoliciesAsApply(t *testing.T) {
	for _, tt := range []struct {
		p      chatmem.Policy
		n, tok int
	}{
		{chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 40}, 3, 36},
		{chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 25}, 1, 9},
		{chatmem.Policy{Kind: chatmem.PolicyAll}, 5, 63},
		{chatmem.Policy{Kind: chatmem.PolicyLastTurns, Turns: 1}, 1, 9},
	} {
		w := window(t, seed.History(), tt.p)
		if len(w.Messages) != tt.n || w.Tokens != tt.tok {
			t.Errorf("Window(%+v) = %d msgs, %d tokens; want %d, %d", tt.p, len(w.Messages), w.Tokens, tt.n, tt.tok)
		}
	}
}

func TestWindowErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Window(ctx, seed.History(), chatmem.Policy{Kind: "everything", Budget: 10}, Options{Counter: tokenizer.Estimate{}}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("unknown policy: %v, want ErrInvalid", err)
	}
	if _, err := Window(ctx, seed.History(), chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 8}, Options{Counter: tokenizer.Estimate{}}); !errors.Is(err, chatmem.ErrBudgetTooSmall) {
		t.Errorf("budget 8: %v, want ErrBudgetTooSmall", err)
	}
	if _, err := Window(ctx, nil, chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 10}, Options{Counter: tokenizer.Estimate{}}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("no messages: %v, want ErrInvalid", err)
	}
	if _, err := Window(ctx, seed.History(), chatmem.Policy{Kind: chatmem.PolicyAll}, Options{}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("no counter: %v, want ErrInvalid", err)
	}
}

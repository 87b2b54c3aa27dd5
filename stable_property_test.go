package chatmem_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestCacheStableProperties checks, over random support chats (users and
// replies of random lengths, tool calls with one or two results, facts
// that change between turns, a user's earlier conversation to recall
// from), that every cache-stable request made turn by turn through
// Memory.Turn keeps the window's invariants: within the budget, starting
// on a user message, tool units whole; and that between two drop steps
// (the window's first stored message and its summary unchanged) the
// stable part of each request, everything before the facts block, the
// recalled turns and the newest turn, is a byte-identical prefix of the
// next request. It also checks that the window moves in steps, not every
// turn.
func TestCacheStableProperties(t *testing.T) {
	cases := []struct {
		name  string
		p     chatmem.Policy
		facts bool
		user  bool
		sum   bool
	}{
		{name: "token_budget", p: chatmem.Policy{Kind: chatmem.PolicyTokenBudget}},
		{name: "token_budget+facts", p: chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Facts: true}, facts: true},
		{name: "summary_buffer", p: chatmem.Policy{Kind: chatmem.PolicySummaryBuffer}, sum: true},
		{name: "summary_buffer+facts", p: chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Facts: true}, facts: true, sum: true},
		{name: "summary_buffer+recall", p: chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Recall: true}, sum: true},
		{name: "recall", p: chatmem.Policy{Kind: chatmem.PolicyRecall}},
		{name: "recall+facts", p: chatmem.Policy{Kind: chatmem.PolicyRecall, Facts: true}, facts: true},
		{name: "recall+user", p: chatmem.Policy{Kind: chatmem.PolicyRecall, Scope: chatmem.ScopeUser}, user: true},
		{name: "recall+user+facts", p: chatmem.Policy{Kind: chatmem.PolicyRecall, Scope: chatmem.ScopeUser, Facts: true}, facts: true, user: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check := func(seed uint64) bool {
				r := rand.New(rand.NewPCG(seed, 36))
				p := c.p
				p.Cache = chatmem.CacheStable
				p.Budget = 400 + r.IntN(1200)
				p.LowWater = []int{0, 30, 50, 80}[r.IntN(4)]
				if err := stableRun(t, r, p, c.facts, c.user, c.sum); err != nil {
					t.Errorf("seed %d, %+v: %v", seed, p, err)
					return false
				}
				return true
			}
			if err := quick.Check(check, &quick.Config{MaxCount: 6}); err != nil {
				t.Error(err)
			}
		})
	}
}

// stableRun plays one random chat under p and checks every request.
func stableRun(t *testing.T, r *rand.Rand, p chatmem.Policy, facts, user, sum bool) error {
	ctx := t.Context()
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	if sum {
		opts.Summarizer, opts.Sync = offline.NewSummarizer(offline.Options{}), true
	}
	mem, err := chatmem.New(memstore.New(), opts)
	if err != nil {
		return err
	}
	ao := chatmem.AppendOptions{}
	if user {
		ao.User = "u1"
		old := chatmem.Key{Tenant: "t", ID: "earlier"}
		for i := range 30 {
			if _, err := mem.Append(ctx, old, []chatmem.Message{
				{Role: chatmem.RoleUser, Content: words(r, 5+r.IntN(30)) + fmt.Sprintf(" order SE-%d", i)},
				{Role: chatmem.RoleAssistant, Content: words(r, 10+r.IntN(60))},
			}, ao); err != nil {
				return err
			}
		}
	}
	key := chatmem.Key{Tenant: "t", ID: "chat"}
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleSystem, Content: "You are ShopBot. " + words(r, 20)}}, ao); err != nil {
		return err
	}
	var prev chatmem.Window
	var prevStart, prevCovers int64
	moves, total := 0, 0
	for turn := range 70 {
		if facts && r.IntN(6) == 0 {
			if err := mem.SetFacts(ctx, key, []chatmem.Fact{{Key: "order_id", Value: fmt.Sprintf("SE-%d", r.IntN(1000))}}); err != nil {
				return err
			}
		}
		q := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d: %s order SE-%d", turn, words(r, 3+r.IntN(40)), r.IntN(30))}
		_, w, err := mem.Turn(ctx, key, []chatmem.Message{q}, ao, p, chatmem.ContextOptions{})
		if err != nil {
			return fmt.Errorf("turn %d: %w", turn, err)
		}
		if err := stableInvariants(w, p.Budget); err != nil {
			return fmt.Errorf("turn %d: %w (window %s)", turn, err, roles(w.Messages))
		}
		start, covers := stableStart(w), int64(0)
		if w.Summary != nil {
			covers = w.Summary.CoversSeq
		}
		if prev.Messages != nil {
			if start == prevStart && covers == prevCovers {
				stable := stablePart(prev.Messages)
				if len(w.Messages) < len(stable) || render(w.Messages[:len(stable)]) != render(stable) {
					return fmt.Errorf("turn %d: the start stayed at seq %d, but the previous request's stable part %s is not a prefix of %s", turn, start, roles(stable), roles(w.Messages))
				}
			} else {
				moves++
			}
		}
		prev, prevStart, prevCovers = w, start, covers
		reply := []chatmem.Message{}
		if r.IntN(5) == 0 {
			n := 1 + r.IntN(2)
			call := chatmem.Message{Role: chatmem.RoleAssistant}
			var results []chatmem.Message
			for i := range n {
				id := fmt.Sprintf("call_%d_%d", turn, i)
				call.ToolCalls = append(call.ToolCalls, chatmem.ToolCall{ID: id, Type: "function", Function: chatmem.FunctionCall{Name: "order_status", Arguments: "{}"}})
				results = append(results, chatmem.Message{Role: chatmem.RoleTool, ToolCallID: id, Content: words(r, 5+r.IntN(60))})
			}
			reply = append(append(reply, call), results...)
		}
		reply = append(reply, chatmem.Message{Role: chatmem.RoleAssistant, Content: words(r, 10+r.IntN(150))})
		res, err := mem.Append(ctx, key, reply, ao)
		if err != nil {
			return err
		}
		for _, m := range append(res.Messages, q) {
			total += m.Tokens
		}
		_ = res
	}
	t.Logf("budget %d low %d: %d moves over %d tokens, last window %d tokens, %d summary, %d recalled", p.Budget, p.LowWater, moves, total, prev.Tokens, prev.Parts.Summary, prev.Parts.Recalled)
	// Steps, not slides: a window that moved every turn would move ~70 times.
	if limit := 2*total/max(p.Budget*(100-max(p.LowWater, 60))/100/2, 1) + 4; moves > limit && !sum {
		return fmt.Errorf("the window moved %d times over %d tokens, want at most %d", moves, total, limit)
	}
	return nil
}

// stableInvariants checks w against budget: within it, the first message
// after the system messages a user message, tool units whole.
func stableInvariants(w chatmem.Window, budget int) error {
	sum := 0
	for _, m := range w.Messages {
		sum += m.Tokens
	}
	if w.Tokens > budget || sum > w.Tokens {
		return fmt.Errorf("%d tokens (messages %d), budget %d", w.Tokens, sum, budget)
	}
	// Made-up and recalled messages follow the stable part: after the
	// first of them, only they come until the newest turn.
	for i, m := range w.Messages {
		if k := m.Metadata[chatmem.MetaKey]; k == chatmem.MetaFacts || k == chatmem.MetaRecalled {
			for _, n := range w.Messages[i:] {
				if n.Metadata[chatmem.MetaKey] == "" {
					if n.Role != chatmem.RoleUser {
						return fmt.Errorf("%s #%d between the recalled turns and the newest turn", n.Role, n.Seq)
					}
					break
				}
			}
			break
		}
	}
	first := true
	open := map[string]bool{}
	for i, m := range w.Messages {
		if m.Role == chatmem.RoleSystem {
			continue
		}
		if first && m.Role != chatmem.RoleUser {
			return fmt.Errorf("starts with %s at %d", m.Role, i)
		}
		first = false
		if m.Role == chatmem.RoleTool {
			if !open[m.ToolCallID] {
				return fmt.Errorf("tool result %s at %d without its call", m.ToolCallID, i)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			return fmt.Errorf("tool calls %v without their results before %d", open, i)
		}
		for _, tc := range m.ToolCalls {
			open[tc.ID] = true
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("tool calls %v without their results at the end", open)
	}
	return nil
}

// stableStart is the seq of w's first stored message of the conversation
// (not made up, not recalled).
func stableStart(w chatmem.Window) int64 {
	for _, m := range w.Messages {
		if m.Role != chatmem.RoleSystem && m.Metadata[chatmem.MetaKey] == "" {
			return m.Seq
		}
	}
	return 0
}

// stablePart is the front of msgs before the facts block, the recalled
// turns and the newest turn.
func stablePart(msgs []chatmem.Message) []chatmem.Message {
	newest := len(msgs)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == chatmem.RoleUser && msgs[i].Metadata[chatmem.MetaKey] == "" {
			newest = i
			break
		}
	}
	for i, m := range msgs[:newest] {
		if k := m.Metadata[chatmem.MetaKey]; k == chatmem.MetaFacts || k == chatmem.MetaRecalled {
			return msgs[:i]
		}
	}
	return msgs[:newest]
}

// render is what a provider would see of msgs.
func render(msgs []chatmem.Message) string {
	type wire struct {
		Role       chatmem.Role       `json:"role"`
		Name       string             `json:"name,omitempty"`
		Content    string             `json:"content"`
		ToolCalls  []chatmem.ToolCall `json:"tool_calls,omitempty"`
		ToolCallID string             `json:"tool_call_id,omitempty"`
	}
	out := make([]wire, len(msgs))
	for i, m := range msgs {
		out[i] = wire{m.Role, m.Name, m.Content, m.ToolCalls, m.ToolCallID}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func roles(msgs []chatmem.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		k := m.Metadata[chatmem.MetaKey]
		if k != "" {
			k = ":" + k
		}
		fmt.Fprintf(&b, "%s%s#%d ", m.Role, k, m.Seq)
	}
	return b.String()
}

var vocab = strings.Fields("order parcel courier refund invoice address Pune Chennai Friday delayed shipped warehouse payment card replace size colour blue return label ticket")

func words(r *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = vocab[r.IntN(len(vocab))]
	}
	return strings.Join(w, " ")
}

package chatmem

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// stableChat is a support chat of n turns under a pinned system prompt:
// user messages of 10 to 120 tokens, replies of 20 to 300, and every
// seventh turn a tool call with its result, all with Seq and Tokens set.
func stableChat(n int) []Message {
	r := rand.New(rand.NewPCG(7, 11))
	msgs := []Message{{Seq: 1, Role: RoleSystem, Content: "You are ShopBot.", Tokens: 40}}
	add := func(m Message) {
		m.Seq = int64(len(msgs) + 1)
		msgs = append(msgs, m)
	}
	for i := range n {
		add(Message{Role: RoleUser, Content: fmt.Sprintf("question %d", i), Tokens: 10 + r.IntN(110)})
		if i%7 == 6 {
			id := fmt.Sprintf("call_%d", i)
			add(Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: id, Type: "function", Function: FunctionCall{Name: "order_status", Arguments: "{}"}}}, Tokens: 30})
			add(Message{Role: RoleTool, ToolCallID: id, Content: "shipped", Tokens: 15 + r.IntN(60)})
		}
		add(Message{Role: RoleAssistant, Content: fmt.Sprintf("answer %d", i), Tokens: 20 + r.IntN(280)})
	}
	return msgs
}

// TestCacheStable runs a 300-turn chat, each request being the
// conversation up to a user message, under token_budget with and without
// CacheStable. The stable window keeps every invariant of the plain one
// (within the budget, starting on a user message, ending on the newest,
// tool calls whole) and is a suffix of it; its start moves only in steps,
// each to about the low-water mark, so most requests repeat the previous
// request's messages as their prefix: the share a prompt cache serves,
// against the plain window's, which keeps its start only when a turn is
// short enough. At the default low-water mark (a step of 1,024 tokens,
// about four of these long turns): stable 71% of the tokens, plain 22%.
func TestCacheStable(t *testing.T) {
	const budget = 4000
	chat := stableChat(300)
	plainP := Policy{Kind: PolicyTokenBudget, Budget: budget}
	stableP := Policy{Kind: PolicyTokenBudget, Budget: budget, Cache: CacheStable}
	var prevPlain, prevStable []Message
	var plainShare, stableShare float64
	requests, moves := 0, 0
	for end := range chat {
		if chat[end].Role != RoleUser {
			continue
		}
		msgs := chat[:end+1]
		plain, err := Apply(plainP, msgs)
		if err != nil {
			t.Fatalf("plain at seq %d: %v", msgs[end].Seq, err)
		}
		stable, err := Apply(stableP, msgs)
		if err != nil {
			t.Fatalf("stable at seq %d: %v", msgs[end].Seq, err)
		}
		what := fmt.Sprintf("request at seq %d", msgs[end].Seq)
		checkStableWindow(t, what, stable, plain, msgs, budget)
		if prevStable != nil && plain.Dropped > 0 { // the steady state: the conversation is over the budget
			requests++
			plainShare += prefixShare(prevPlain, plain.Messages)
			share := prefixShare(prevStable, stable.Messages)
			stableShare += share
			if stable.Messages[1].Seq != prevStable[1].Seq {
				moves++
				if stable.Parts.Recent > budget*(stableP.lowWater()+15)/100 {
					t.Errorf("%s: the window moved to %d recent tokens, want about %d%% of %d", what, stable.Parts.Recent, stableP.lowWater(), budget)
				}
			} else if share*float64(stable.Tokens) < float64(tokensOf(prevStable)) {
				t.Errorf("%s: the start stayed at seq %d but the previous request is not the prefix", what, stable.Messages[1].Seq)
			}
		}
		prevPlain, prevStable = plain.Messages, stable.Messages
	}
	plainShare /= float64(requests)
	stableShare /= float64(requests)
	t.Logf("%d requests: prefix repeated from the previous request: plain %.0f%% of the tokens, stable %.0f%%; the stable window moved %d times",
		requests, 100*plainShare, 100*stableShare, moves)
	if stableShare < 0.7 || stableShare < 3*plainShare {
		t.Errorf("cacheable share: stable %.2f, plain %.2f; want stable >= 0.7 and at least 3x plain", stableShare, plainShare)
	}
	// The start moves about once per (budget - low water) tokens of chat.
	if total, step := tokensOf(chat[1:]), int(stableP.stableStep()); moves == 0 || moves > total/step+1 {
		t.Errorf("the stable window moved %d times over %d tokens, want 1 to %d", moves, total, total/step+1)
	}
}

// checkStableWindow checks stable, the cache-stable form of plain, for the
// request msgs under budget.
func checkStableWindow(t *testing.T, what string, stable, plain Window, msgs []Message, budget int) {
	t.Helper()
	n := len(stable.Messages)
	if stable.Tokens > budget || stable.Tokens != tokensOf(stable.Messages) {
		t.Fatalf("%s: %d tokens (messages hold %d), budget %d", what, stable.Tokens, tokensOf(stable.Messages), budget)
	}
	if n < 2 || stable.Messages[0].Role != RoleSystem || stable.Messages[1].Role != RoleUser || stable.Messages[n-1].Seq != msgs[len(msgs)-1].Seq {
		t.Fatalf("%s: window %v, want the system prompt, then a user message first, the newest last", what, seqs(stable.Messages))
	}
	off := len(plain.Messages) - n
	if off < 0 || stable.Messages[1].Seq != plain.Messages[off+1].Seq || stable.Dropped != plain.Dropped+off {
		t.Fatalf("%s: stable %v (dropped %d) is not a suffix of plain %v (dropped %d)", what, seqs(stable.Messages), stable.Dropped, seqs(plain.Messages), plain.Dropped)
	}
	for i, m := range stable.Messages {
		if m.Role == RoleTool && len(stable.Messages[i-1].ToolCalls) == 0 && stable.Messages[i-1].Role != RoleTool {
			t.Fatalf("%s: tool result at seq %d without its call", what, m.Seq)
		}
	}
}

// prefixShare is the share of cur's tokens in the messages it repeats
// from prev, from the start: what a prompt cache could serve.
func prefixShare(prev, cur []Message) float64 {
	same := 0
	for i := 0; i < len(prev) && i < len(cur) && prev[i].Seq == cur[i].Seq; i++ {
		same += cur[i].Tokens
	}
	return float64(same) / float64(tokensOf(cur))
}

func tokensOf(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += m.Tokens
	}
	return n
}

func seqs(msgs []Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

// TestCacheStableValidate: the cache mode and its low-water mark are
// checked with the policy.
func TestCacheStableValidate(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Kind: PolicyLastTurns, Turns: 3, Cache: CacheStable}, "not of last_turns"},
		{Policy{Kind: PolicyAll, Cache: CacheStable}, "not of all"},
		{Policy{Kind: PolicyTokenBudget, Budget: 100, Cache: "sticky"}, `unknown cache mode "sticky"`},
		{Policy{Kind: PolicyTokenBudget, Budget: 100, Cache: CacheStable, LowWater: 96}, "low_water must be from 1 to 95"},
		{Policy{Kind: PolicyTokenBudget, Budget: 100, LowWater: 50}, "low_water is an option of cache=stable"},
	} {
		err := c.p.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalid holding %q", c.p, err, c.want)
		}
	}
	for _, p := range []Policy{
		{Kind: PolicyTokenBudget, Budget: 100, Cache: CacheStable},
		{Kind: PolicySummaryBuffer, Budget: 100, Cache: CacheStable, LowWater: 50},
		{Kind: PolicyTokenBudget, Budget: 100, Cache: CacheStable, LowWater: 95},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", p, err)
		}
	}
}

package chatmem

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// msg returns a counted message; tokens are given directly, as stores keep them.
func msg(role Role, content string, tokens int) Message {
	return Message{Role: role, Content: content, Tokens: tokens}
}

func call(tokens int, ids ...string) Message {
	m := Message{Role: RoleAssistant, Tokens: tokens}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: "lookup", Arguments: "{}"}})
	}
	return m
}

func result(id string, tokens int) Message {
	return Message{Role: RoleTool, ToolCallID: id, Content: "ok", Tokens: tokens}
}

// seedHistory is the seed's conversation with the seed estimator's counts.
func seedHistory() []Message {
	return []Message{
		msg(RoleUser, "Hi, I'm Kavya. My order SE-10423 hasn't arrived.", 12),
		msg(RoleAssistant, "Sorry Kavya! It is out for delivery and should arrive by 8 pm.", 15),
		msg(RoleUser, "Ok. Also, do you have running socks?", 9),
		msg(RoleAssistant, "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.", 18),
		msg(RoleUser, "Add the DryFit ones to my cart please.", 9),
	}
}

func contents(w Window) []string {
	out := make([]string, len(w.Messages))
	for i, m := range w.Messages {
		out[i] = m.Content
		if m.Role == RoleTool {
			out[i] = "tool:" + m.ToolCallID
		} else if len(m.ToolCalls) > 0 {
			out[i] = fmt.Sprintf("call:%d", len(m.ToolCalls))
		}
	}
	return out
}

func TestApply(t *testing.T) {
	sys := msg(RoleSystem, "You are a shop assistant.", 6)
	tests := []struct {
		name    string
		policy  Policy
		history []Message
		want    []string // contents of the window, in order
		tokens  int
		dropped int
		err     error
	}{
		{"seed budget 100", Policy{Kind: PolicyTokenBudget, Budget: 100}, seedHistory(),
			[]string{"Hi, I'm Kavya. My order SE-10423 hasn't arrived.", "Sorry Kavya! It is out for delivery and should arrive by 8 pm.", "Ok. Also, do you have running socks?", "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.", "Add the DryFit ones to my cart please."}, 63, 0, nil},
		{"seed budget 40", Policy{Kind: PolicyTokenBudget, Budget: 40}, seedHistory(),
			[]string{"Ok. Also, do you have running socks?", "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.", "Add the DryFit ones to my cart please."}, 36, 2, nil},
		{"seed budget 25", Policy{Kind: PolicyTokenBudget, Budget: 25}, seedHistory(),
			[]string{"Add the DryFit ones to my cart please."}, 9, 4, nil},
		{"seed budget 9 fits exactly", Policy{Kind: PolicyTokenBudget, Budget: 9}, seedHistory(),
			[]string{"Add the DryFit ones to my cart please."}, 9, 4, nil},
		{"seed budget 8 too small", Policy{Kind: PolicyTokenBudget, Budget: 8}, seedHistory(), nil, 0, 0, ErrBudgetTooSmall},
		// 15+9+18+9 = 51 fits 55, so the suffix starts with the assistant
		// message; it is dropped and its tokens are not reported (the seed's
		// sample would report 51).
		{"orphan assistant dropped and not counted", Policy{Kind: PolicyTokenBudget, Budget: 55}, seedHistory(),
			[]string{"Ok. Also, do you have running socks?", "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.", "Add the DryFit ones to my cart please."}, 36, 2, nil},
		{"stop at first misfit, do not skip", Policy{Kind: PolicyTokenBudget, Budget: 30},
			[]Message{msg(RoleUser, "a", 1), msg(RoleAssistant, "big", 50), msg(RoleUser, "b", 5), msg(RoleAssistant, "c", 5)},
			[]string{"b", "c"}, 10, 2, nil},
		{"pinned system counted", Policy{Kind: PolicyTokenBudget, Budget: 40}, append([]Message{sys}, seedHistory()...),
			[]string{"You are a shop assistant.", "Add the DryFit ones to my cart please."}, 15, 4, nil},
		{"pinned system from the middle goes first", Policy{Kind: PolicyTokenBudget, Budget: 100},
			[]Message{msg(RoleUser, "u1", 1), msg(RoleSystem, "s", 2), msg(RoleUser, "u2", 1)},
			[]string{"s", "u1", "u2"}, 4, 0, nil},
		{"system alone over budget", Policy{Kind: PolicyTokenBudget, Budget: 5}, append([]Message{sys}, seedHistory()...), nil, 0, 0, ErrBudgetTooSmall},
		{"tool unit kept whole", Policy{Kind: PolicyTokenBudget, Budget: 20},
			[]Message{msg(RoleUser, "q", 2), call(3, "c1", "c2"), result("c1", 2), result("c2", 2), msg(RoleAssistant, "done", 2)},
			[]string{"q", "call:2", "tool:c1", "tool:c2", "done"}, 11, 0, nil},
		{"tool unit dropped whole", Policy{Kind: PolicyTokenBudget, Budget: 8},
			[]Message{msg(RoleUser, "q", 2), call(3, "c1", "c2"), result("c1", 2), result("c2", 2), msg(RoleUser, "next", 2), msg(RoleAssistant, "done", 2)},
			[]string{"next", "done"}, 4, 4, nil},
		{"call without results never sent", Policy{Kind: PolicyTokenBudget, Budget: 100},
			[]Message{msg(RoleUser, "q", 2), call(3, "c1"), msg(RoleUser, "never mind", 2)},
			[]string{"q", "never mind"}, 4, 1, nil},
		{"call missing one parallel result never sent", Policy{Kind: PolicyTokenBudget, Budget: 100},
			[]Message{msg(RoleUser, "q", 2), call(3, "c1", "c2"), result("c1", 2), msg(RoleUser, "next", 2)},
			[]string{"q", "next"}, 4, 2, nil},
		{"result whose call was cut off is dropped", Policy{Kind: PolicyTokenBudget, Budget: 100},
			[]Message{result("c0", 2), msg(RoleUser, "q", 2)},
			[]string{"q"}, 2, 1, nil},
		{"unicode counts as stored", Policy{Kind: PolicyTokenBudget, Budget: 3},
			[]Message{msg(RoleUser, "こんにちは世界", 1), msg(RoleAssistant, "héllo wörld!", 3), msg(RoleUser, "🙂🙂🙂🙂", 1)},
			[]string{"🙂🙂🙂🙂"}, 1, 2, nil},
		{"no user message: pinned only", Policy{Kind: PolicyTokenBudget, Budget: 100},
			[]Message{sys, msg(RoleAssistant, "Welcome!", 2)},
			[]string{"You are a shop assistant."}, 6, 1, nil},
		{"last_turns 2", Policy{Kind: PolicyLastTurns, Turns: 2}, seedHistory(),
			[]string{"Ok. Also, do you have running socks?", "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.", "Add the DryFit ones to my cart please."}, 36, 2, nil},
		{"last_turns more than there are", Policy{Kind: PolicyLastTurns, Turns: 10}, seedHistory(),
			contents(Window{Messages: seedHistory()}), 63, 0, nil},
		{"last_turns capped by budget", Policy{Kind: PolicyLastTurns, Turns: 3, Budget: 40}, seedHistory(),
			[]string{"Ok. Also, do you have running socks?", "Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.", "Add the DryFit ones to my cart please."}, 36, 2, nil},
		{"last_turns counts tool units inside a turn", Policy{Kind: PolicyLastTurns, Turns: 1},
			[]Message{msg(RoleUser, "a", 1), msg(RoleUser, "q", 2), call(3, "c1"), result("c1", 2), msg(RoleAssistant, "done", 2)},
			[]string{"q", "call:1", "tool:c1", "done"}, 9, 1, nil},
		{"all sends everything and ignores budget", Policy{Kind: PolicyAll, Budget: 1}, append([]Message{msg(RoleAssistant, "Welcome!", 2)}, seedHistory()...),
			append([]string{"Welcome!"}, contents(Window{Messages: seedHistory()})...), 65, 0, nil},
		{"overhead counts against budget", Policy{Kind: PolicyTokenBudget, Budget: 40, Overhead: 5}, seedHistory(),
			[]string{"Add the DryFit ones to my cart please."}, 14, 4, nil},
		{"empty history", Policy{Kind: PolicyTokenBudget, Budget: 10}, nil, []string{}, 0, 0, nil},
		{"unknown policy", Policy{Kind: "everything"}, seedHistory(), nil, 0, 0, ErrInvalid},
		{"budget 0", Policy{Kind: PolicyTokenBudget}, seedHistory(), nil, 0, 0, ErrInvalid},
		{"negative budget", Policy{Kind: PolicyTokenBudget, Budget: -1}, seedHistory(), nil, 0, 0, ErrInvalid},
		{"turns 0", Policy{Kind: PolicyLastTurns}, seedHistory(), nil, 0, 0, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Apply(tt.policy, tt.history)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("Apply(%+v) error = %v, want %v", tt.policy, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply(%+v) error = %v", tt.policy, err)
			}
			if got := contents(w); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Apply(%+v) = %q, want %q", tt.policy, got, tt.want)
			}
			if w.Tokens != tt.tokens || w.Dropped != tt.dropped {
				t.Errorf("Apply(%+v) = %d tokens, %d dropped; want %d, %d", tt.policy, w.Tokens, w.Dropped, tt.tokens, tt.dropped)
			}
			if sum := w.Parts.System + w.Parts.Facts + w.Parts.Summary + w.Parts.Recent + w.Parts.Overhead; sum != w.Tokens {
				t.Errorf("parts %+v sum to %d, want %d", w.Parts, sum, w.Tokens)
			}
		})
	}
}

func TestApplyBudgetTooSmallSaysWhy(t *testing.T) {
	_, err := TokenBudget(seedHistory(), 8)
	if err == nil || err.Error() != "budget too small: budget 8 leaves 8 tokens after the pinned system messages and overhead, and the newest user message with what follows needs 9" {
		t.Errorf("error = %v", err)
	}
}

// randomHistory builds a valid-or-not history of n messages from rng: user
// and assistant messages, system messages, tool units (sometimes broken).
func randomHistory(rng *rand.Rand, n int) []Message {
	var h []Message
	next := 0
	for len(h) < n {
		tokens := 1 + rng.IntN(20)
		switch r := rng.IntN(10); {
		case r < 4:
			h = append(h, msg(RoleUser, "u", tokens))
		case r < 7:
			h = append(h, msg(RoleAssistant, "a", tokens))
		case r < 8:
			h = append(h, msg(RoleSystem, "s", tokens))
		default:
			k := 1 + rng.IntN(3)
			ids := make([]string, k)
			for i := range ids {
				next++
				ids[i] = fmt.Sprint("c", next)
			}
			h = append(h, call(tokens, ids...))
			answered := k
			if rng.IntN(6) == 0 {
				answered = rng.IntN(k) // broken unit: some results missing
			}
			for _, i := range rng.Perm(k)[:answered] {
				h = append(h, result(ids[i], 1+rng.IntN(5)))
			}
		}
	}
	for i := range h {
		h[i].Seq = int64(i + 1)
	}
	return h
}

// checkWindow holds the window invariants of DESIGN.md for any history.
func checkWindow(t *testing.T, h []Message, p Policy, w Window, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrBudgetTooSmall) {
			t.Fatalf("Apply(%+v) error = %v", p, err)
		}
		return
	}
	sum := 0
	var lastSeq int64
	calls := map[string]int{}   // call ID -> index in window
	results := map[string]int{} // call ID -> count
	firstNonSystem := true
	for i, m := range w.Messages {
		sum += m.Tokens
		if m.Role == RoleSystem {
			continue
		}
		if m.Seq <= lastSeq {
			t.Fatalf("order broken at %d: seq %d after %d", i, m.Seq, lastSeq)
		}
		lastSeq = m.Seq
		if firstNonSystem && m.Role != RoleUser && p.Kind != PolicyAll {
			t.Fatalf("window starts with %s, want user", m.Role)
		}
		firstNonSystem = false
		for _, c := range m.ToolCalls {
			calls[c.ID] = i
		}
		if m.Role == RoleTool {
			if _, ok := calls[m.ToolCallID]; !ok {
				t.Fatalf("tool result %s without its call", m.ToolCallID)
			}
			results[m.ToolCallID]++
		}
	}
	for id := range calls {
		if results[id] != 1 {
			t.Fatalf("call %s has %d results in the window, want 1", id, results[id])
		}
	}
	if sum+p.Overhead != w.Tokens {
		t.Fatalf("tokens = %d, want the sum %d", w.Tokens, sum+p.Overhead)
	}
	if p.Kind == PolicyTokenBudget && w.Tokens > p.Budget {
		t.Fatalf("tokens %d over budget %d", w.Tokens, p.Budget)
	}
	if w.Dropped != len(h)-len(w.Messages) {
		t.Fatalf("dropped = %d, want %d", w.Dropped, len(h)-len(w.Messages))
	}
	if p.Kind == PolicyTokenBudget {
		// Longest: the unit just before the window's start, if it is a
		// sendable unit, must not fit with the window, or else the window
		// must already start at the earliest user message such a run has.
		if longer := extendable(h, w, p); longer {
			t.Fatalf("window %v is not the longest that fits %d", contents(w), p.Budget)
		}
	}
}

// extendable reports whether a longer valid window than w fits the budget,
// found by brute force over every start position.
func extendable(h []Message, w Window, p Policy) bool {
	us := units(nonSystem(h))
	sys := 0
	for _, m := range h {
		if m.Role == RoleSystem {
			sys += m.Tokens
		}
	}
	best := 0
	for s := len(us) - 1; s >= 0; s-- {
		tokens, n := 0, 0
		for _, u := range us[s:] {
			if u.valid {
				tokens += u.tokens
				n += u.end - u.start
			}
		}
		if sys+tokens+p.Overhead > p.Budget {
			break // contiguous: an older start only adds tokens
		}
		if us[s].valid && us[s].user {
			best = n
		}
	}
	return best > len(w.Messages)-countSystem(w.Messages)
}

// units splits ns (no system messages) into all its units, oldest first.
func units(ns []Message) []unit {
	var out []unit
	for pos := len(ns); pos > 0; {
		u := prevUnit(ns, pos)
		out = append([]unit{u}, out...)
		pos = u.start
	}
	return out
}

func nonSystem(h []Message) []Message {
	var out []Message
	for _, m := range h {
		if m.Role != RoleSystem {
			out = append(out, m)
		}
	}
	return out
}

func countSystem(ms []Message) int {
	n := 0
	for _, m := range ms {
		if m.Role == RoleSystem {
			n++
		}
	}
	return n
}

func TestApplyInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		h := randomHistory(rng, rng.IntN(40))
		p := Policy{Kind: Policies[rng.IntN(len(Policies))], Budget: 1 + rng.IntN(150), Turns: 1 + rng.IntN(5), Overhead: rng.IntN(4)}
		w, err := Apply(p, h)
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkWindow(t, h, p, w, err) })
	}
}

func FuzzApply(f *testing.F) {
	f.Add(uint64(1), 10, 40, 2, uint8(2))
	f.Add(uint64(7), 30, 5, 1, uint8(1))
	f.Fuzz(func(t *testing.T, seed uint64, n, budget, turns int, kind uint8) {
		if n < 0 || n > 200 {
			return
		}
		h := randomHistory(rand.New(rand.NewPCG(seed, 0)), n)
		p := Policy{Kind: Policies[int(kind)%len(Policies)], Budget: budget, Turns: turns}
		w, err := Apply(p, h)
		if p.Validate() != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("invalid policy %+v: error = %v", p, err)
			}
			return
		}
		checkWindow(t, h, p, w, err)
	})
}

// BenchmarkTokenBudget measures the window over histories whose counts are
// known. The walk stops where the window ends, so 100,000 messages cost
// about what 1,000 do.
func BenchmarkTokenBudget(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		h := make([]Message, n)
		for i := range h {
			role := RoleUser
			if i%2 == 1 {
				role = RoleAssistant
			}
			h[i] = Message{Seq: int64(i + 1), Role: role, Content: "x", Tokens: 40}
		}
		p := Policy{Kind: PolicyTokenBudget, Budget: 4000}
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Select(p, nil, h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

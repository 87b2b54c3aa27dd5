package chatmem

import (
	"fmt"
	"strings"
)

// PolicyKind names a context policy.
type PolicyKind string

// The policies. See DESIGN.md for the seed strategies they come from.
const (
	// PolicyAll sends every message. It reports the tokens so the cost is
	// visible; it ignores Budget.
	PolicyAll PolicyKind = "all"
	// PolicyLastTurns sends the last Turns turns; a turn starts at a user
	// message and runs to the next one. A Budget, if given, caps it further.
	PolicyLastTurns PolicyKind = "last_turns"
	// PolicyTokenBudget sends the newest messages that fit Budget tokens.
	PolicyTokenBudget PolicyKind = "token_budget"
)

// Policies lists the policy kinds in the order help texts show them.
var Policies = []PolicyKind{PolicyAll, PolicyLastTurns, PolicyTokenBudget}

// Policy says what to send. The zero value is invalid; see Validate.
type Policy struct {
	Kind   PolicyKind
	Budget int // tokens for the whole request: pinned, window and overhead
	Turns  int // for PolicyLastTurns
	// Overhead is the tokens the chat format adds once per request (see
	// RequestOverhead). It counts against Budget and is reported in Tokens.
	Overhead int
}

// Validate checks that the policy is known and its parameters are in range.
// It wraps ErrInvalid.
func (p Policy) Validate() error {
	if p.Budget < 0 || p.Turns < 0 || p.Overhead < 0 {
		return fmt.Errorf("%w: budget and turns must not be negative (budget=%d turns=%d)", ErrInvalid, p.Budget, p.Turns)
	}
	switch p.Kind {
	case PolicyAll:
	case PolicyLastTurns:
		if p.Turns < 1 {
			return fmt.Errorf("%w: last_turns needs turns >= 1", ErrInvalid)
		}
	case PolicyTokenBudget:
		if p.Budget < 1 {
			return fmt.Errorf("%w: token_budget needs budget >= 1", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: unknown policy %q (want %s)", ErrInvalid, p.Kind, joinKinds())
	}
	return nil
}

func joinKinds() string {
	s := make([]string, len(Policies))
	for i, k := range Policies {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Window is what a policy selected: the messages to send, in order (pinned
// system messages first), their tokens and how many messages were left out.
type Window struct {
	Messages []Message `json:"messages"`
	// Tokens is the sum over Messages plus the request overhead: the messages
	// actually returned, never a dropped one.
	Tokens int `json:"tokens"`
	// Dropped counts the conversation's messages not in Messages.
	Dropped int   `json:"dropped"`
	Parts   Parts `json:"parts"`
}

// Parts splits Window.Tokens by where the tokens come from.
type Parts struct {
	System   int `json:"system"`
	Recent   int `json:"recent"`
	Overhead int `json:"overhead"`
}

// unit is a run of messages kept or dropped together: one message, or an
// assistant message with tool calls and the tool messages that answer all
// of them. ns[start:end] are its messages.
type unit struct {
	start, end int
	tokens     int
	user       bool // starts with a user message
	valid      bool // sendable: not a call missing results, nor a result missing its call
}

// units splits the non-system messages ns into units, in order. It walks
// from the end, as a tool result can only be matched to its call from there.
func units(ns []Message) []unit {
	var out []unit
	for i := len(ns) - 1; i >= 0; {
		m := ns[i]
		switch {
		case m.Role == RoleTool:
			j := i
			for j >= 0 && ns[j].Role == RoleTool {
				j--
			}
			if j >= 0 && len(ns[j].ToolCalls) > 0 {
				out = append(out, unit{start: j, end: i + 1, valid: answersAll(ns[j], ns[j+1:i+1])})
				i = j - 1
			} else {
				out = append(out, unit{start: j + 1, end: i + 1}) // results whose call is gone
				i = j
			}
		case len(m.ToolCalls) > 0:
			out = append(out, unit{start: i, end: i + 1}) // calls with no results
			i--
		default:
			out = append(out, unit{start: i, end: i + 1, valid: true, user: m.Role == RoleUser})
			i--
		}
		u := &out[len(out)-1]
		for _, m := range ns[u.start:u.end] {
			u.tokens += m.Tokens
		}
	}
	for l, r := 0, len(out)-1; l < r; l, r = l+1, r-1 {
		out[l], out[r] = out[r], out[l]
	}
	return out
}

// answersAll reports whether results answer every call of call exactly once
// and nothing else.
func answersAll(call Message, results []Message) bool {
	if len(results) != len(call.ToolCalls) {
		return false
	}
	want := make(map[string]bool, len(call.ToolCalls))
	for _, c := range call.ToolCalls {
		want[c.ID] = true
	}
	for _, r := range results {
		if !want[r.ToolCallID] {
			return false
		}
		delete(want, r.ToolCallID)
	}
	return true
}

// Apply runs policy p over msgs, a conversation's messages in order with
// their Tokens set (or the newest part of them, as a Store's Tail returns).
//
// System messages are pinned: all of them are sent first, in order, and
// counted against the budget. The rest is cut into units (a message, or an
// assistant tool-call message with all its results); units that cannot be
// sent (a call missing results, a result missing its call) are never sent.
// For PolicyTokenBudget, Apply keeps the longest contiguous run of newest
// units that fits the budget left after the pinned messages and overhead,
// stopping at the first unit that does not fit, then drops leading units
// until the window starts with a user message.
//
// If msgs has a user message but no window starting with one fits, Apply
// returns ErrBudgetTooSmall. Window.Dropped is counted over msgs; Memory
// corrects it to the whole conversation.
func Apply(p Policy, msgs []Message) (Window, error) {
	if err := p.Validate(); err != nil {
		return Window{}, err
	}
	var pinned, ns []Message
	var w Window
	for _, m := range msgs {
		if m.Role == RoleSystem {
			pinned = append(pinned, m)
			w.Parts.System += m.Tokens
		} else {
			ns = append(ns, m)
		}
	}
	w.Parts.Overhead = p.Overhead
	avail := -1 // no token limit
	if p.Kind != PolicyAll && p.Budget > 0 {
		avail = p.Budget - w.Parts.System - p.Overhead
		if avail < 0 {
			return Window{}, fmt.Errorf("%w: budget %d is below the %d tokens of the pinned system messages and request overhead", ErrBudgetTooSmall, p.Budget, w.Parts.System+p.Overhead)
		}
	}

	us := units(ns)
	first := 0 // index of the oldest candidate unit
	if p.Kind == PolicyLastTurns {
		first = len(us)
		for turns := 0; first > 0 && turns < p.Turns; {
			first--
			if us[first].valid && us[first].user {
				turns++
			}
		}
	}
	// Walk back from the newest unit while it fits.
	start, used := len(us), 0
	for start > first {
		u := us[start-1]
		if u.valid {
			if avail >= 0 && used+u.tokens > avail {
				break
			}
			used += u.tokens
		}
		start--
	}
	// The window starts with a user message (PolicyAll sends as stored).
	if p.Kind != PolicyAll {
		for start < len(us) && !(us[start].valid && us[start].user) {
			if us[start].valid {
				used -= us[start].tokens
			}
			start++
		}
	}
	if start == len(us) && p.Kind != PolicyAll {
		if need, ok := newestUserTokens(us); ok {
			return Window{}, fmt.Errorf("%w: budget %d leaves %d tokens after the pinned system messages and overhead, and the newest user message with what follows needs %d", ErrBudgetTooSmall, p.Budget, avail, need)
		}
	}

	w.Messages = make([]Message, 0, len(pinned)+len(ns))
	w.Messages = append(w.Messages, pinned...)
	for _, u := range us[start:] {
		if u.valid {
			w.Messages = append(w.Messages, ns[u.start:u.end]...)
		}
	}
	w.Parts.Recent = used
	w.Tokens = w.Parts.System + w.Parts.Recent + w.Parts.Overhead
	w.Dropped = len(msgs) - len(w.Messages)
	return w, nil
}

// newestUserTokens returns the tokens from the newest valid user unit to the
// end, the least a window can hold.
func newestUserTokens(us []unit) (int, bool) {
	need := 0
	for i := len(us) - 1; i >= 0; i-- {
		if us[i].valid {
			need += us[i].tokens
			if us[i].user {
				return need, true
			}
		}
	}
	return 0, false
}

// TokenBudget is Apply with PolicyTokenBudget: the seed's token-budget
// window, made exact (see Apply).
func TokenBudget(msgs []Message, budget int) (Window, error) {
	return Apply(Policy{Kind: PolicyTokenBudget, Budget: budget}, msgs)
}

// LastTurns is Apply with PolicyLastTurns and no token cap.
func LastTurns(msgs []Message, turns int) (Window, error) {
	return Apply(Policy{Kind: PolicyLastTurns, Turns: turns}, msgs)
}

// All is Apply with PolicyAll.
func All(msgs []Message) (Window, error) {
	return Apply(Policy{Kind: PolicyAll}, msgs)
}

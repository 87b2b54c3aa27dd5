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
	// PolicySummaryBuffer sends the rolling summary of older messages plus
	// the newest messages after it that fit Budget (see Memory.Context).
	// Over a plain list of messages (Apply, Select) it is PolicyTokenBudget.
	PolicySummaryBuffer PolicyKind = "summary_buffer"
	// PolicyRecall sends a short window of the newest messages (Recent
	// tokens) and, in the rest of Budget, the older messages most relevant
	// to the newest user message, found in the store's search index (see
	// Memory.Context). Over a plain list of messages (Apply, Select) it is
	// PolicyTokenBudget.
	PolicyRecall PolicyKind = "recall"
)

// Policies lists the policy kinds in the order help texts show them.
var Policies = []PolicyKind{PolicyAll, PolicyLastTurns, PolicyTokenBudget, PolicySummaryBuffer, PolicyRecall}

// The defaults every surface applies to a request that leaves a policy
// parameter out: REST's context read, MCP's get_context, the chat proxy
// (whose server settings start from them) and the CLI's window. A request
// that names no policy gets DefaultPolicy; a budgeted policy without a
// budget gets DefaultBudget; last_turns without turns gets DefaultTurns.
const (
	DefaultPolicy = PolicyTokenBudget
	DefaultBudget = 4000
	DefaultTurns  = 10
)

// Policy says what to send. The zero value is invalid; see Validate.
type Policy struct {
	Kind   PolicyKind
	Budget int // tokens for the whole request: pinned, window and overhead
	Turns  int // for PolicyLastTurns
	// Facts adds the conversation's facts as a pinned system message,
	// counted in the budget (Memory.Context).
	Facts bool
	// Overhead is the tokens the chat format adds once per request (see
	// RequestOverhead). It counts against Budget and is reported in Tokens.
	Overhead int
	// Recall adds recalled older messages to PolicySummaryBuffer (the
	// summary and its window get Recent tokens, recall the rest of
	// Budget); PolicyRecall always recalls.
	Recall bool
	// Recent is the tokens of Budget the recent part may take before
	// recall gets the rest: PolicyRecall's window of newest messages
	// (default Budget/10), or PolicySummaryBuffer's summary and window with
	// Recall (default Budget/2). The newest user message always has room.
	Recent int
	// Scope is where recall looks for older messages: "" or
	// ScopeConversation, the conversation's own history; ScopeUser, the
	// history of every conversation of the conversation's user, this one
	// included, each recalled message marked with its conversation and
	// date (see Memory.Context). A conversation without a user, or a store
	// that keeps no index of users (UserSearcher), recalls from its own
	// history. Only policies that recall take it.
	Scope string
	// Cache is "" (the window slides by a turn each turn) or CacheStable
	// (its front stays the same from request to request, so a provider's
	// prompt cache serves it; see CacheStable for the window's layout).
	// token_budget, summary_buffer and recall take it, with or without
	// facts and recall's user scope; under summary_buffer, a window that
	// sends a summary moves when the summary is refreshed.
	Cache string
	// LowWater is the percent of Budget a CacheStable window drops to when
	// it must move: 1 to 95, or 0 for the default (see CacheStable: a step
	// of 1,024 tokens at most, DefaultLowWater percent for small budgets).
	LowWater int
}

// recalls reports whether p adds recalled messages.
func (p Policy) recalls() bool {
	return p.Kind == PolicyRecall || p.Kind == PolicySummaryBuffer && p.Recall
}

// recentBudget is the Recent tokens p's recent part gets.
func (p Policy) recentBudget() int {
	switch {
	case p.Recent > 0:
		return min(p.Recent, p.Budget)
	case p.Cache == CacheStable:
		// Recalled turns change with every question and are sent after
		// the stable part: they get a quarter, so that most of the
		// request is the part a prompt cache serves.
		return max(p.Budget*stableRecentPercent/100, min(p.Budget, 1))
	case p.Kind == PolicyRecall:
		return max(p.Budget/defaultRecentShare, min(p.Budget, 1))
	}
	return max(p.Budget/2, min(p.Budget, 1)) // a budget of 1 is not 0
}

// Validate checks that the policy is known and its parameters are in range.
// It wraps ErrInvalid.
func (p Policy) Validate() error {
	if p.Budget < 0 || p.Turns < 0 || p.Overhead < 0 || p.Recent < 0 {
		return fmt.Errorf("%w: budget, turns and recent must not be negative (budget=%d turns=%d recent=%d)", ErrInvalid, p.Budget, p.Turns, p.Recent)
	}
	if p.Recall && p.Kind != PolicySummaryBuffer && p.Kind != PolicyRecall {
		return fmt.Errorf("%w: recall is an option of summary_buffer (and what recall does), not of %s", ErrInvalid, p.Kind)
	}
	switch p.Cache {
	case "":
		if p.LowWater != 0 {
			return fmt.Errorf("%w: low_water is an option of cache=%s", ErrInvalid, CacheStable)
		}
	case CacheStable:
		if p.Kind != PolicyTokenBudget && p.Kind != PolicySummaryBuffer && p.Kind != PolicyRecall {
			return fmt.Errorf("%w: cache=%s is an option of token_budget, summary_buffer and recall, not of %s", ErrInvalid, CacheStable, policyLabel(p))
		}
		if p.LowWater < 0 || p.LowWater > 95 {
			return fmt.Errorf("%w: low_water must be from 1 to 95 percent of the budget (or 0 for %d), got %d", ErrInvalid, DefaultLowWater, p.LowWater)
		}
	default:
		return fmt.Errorf("%w: unknown cache mode %q (want %s, or none)", ErrInvalid, p.Cache, CacheStable)
	}
	switch p.Scope {
	case "", ScopeConversation:
	case ScopeUser:
		if !p.recalls() {
			return fmt.Errorf("%w: scope %s is an option of recall (and of summary_buffer with recall), not of %s", ErrInvalid, p.Scope, p.Kind)
		}
	default:
		return fmt.Errorf("%w: unknown recall scope %q (want %s or %s)", ErrInvalid, p.Scope, ScopeConversation, ScopeUser)
	}
	switch p.Kind {
	case PolicyAll:
	case PolicyLastTurns:
		if p.Turns < 1 {
			return fmt.Errorf("%w: last_turns needs turns >= 1", ErrInvalid)
		}
	case PolicyTokenBudget, PolicySummaryBuffer, PolicyRecall:
		if p.Budget < 1 {
			return fmt.Errorf("%w: %s needs budget >= 1", ErrInvalid, p.Kind)
		}
	default:
		return fmt.Errorf("%w: unknown policy %q (want %s)", ErrInvalid, p.Kind, joinKinds())
	}
	return nil
}

// policyLabel names p's kind, "summary_buffer with recall" for that.
func policyLabel(p Policy) string {
	if p.Kind == PolicySummaryBuffer && p.Recall {
		return "summary_buffer with recall"
	}
	return string(p.Kind)
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
	// Summary is the summary sent, if any (PolicySummaryBuffer).
	Summary *Summary `json:"summary"`
	// Facts are the facts sent, if any (Policy.Facts).
	Facts []Fact `json:"facts"`
	// Reserved is what ContextOptions.Reserve took off the budget, not
	// part of Tokens: Tokens + Reserved is what the request holds.
	Reserved int `json:"reserved,omitempty"`
	// Receipt explains the window (ContextOptions.Receipt), nil unless
	// asked for.
	Receipt *Receipt `json:"receipt,omitempty"`
}

// Parts splits Window.Tokens by where the tokens come from.
type Parts struct {
	System   int `json:"system"`
	Facts    int `json:"facts"`
	Summary  int `json:"summary"`
	Recent   int `json:"recent"`
	Recalled int `json:"recalled"`
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

// prevUnit returns the unit of ns that ends just before end. Units are found
// from the end because a tool result can only be matched to its call from
// there: walking back over tool messages leads to the call they answer.
func prevUnit(ns []Message, end int) unit {
	i := end - 1
	var u unit
	switch m := &ns[i]; {
	case m.Role == RoleTool:
		j := i
		for j >= 0 && ns[j].Role == RoleTool {
			j--
		}
		if j >= 0 && len(ns[j].ToolCalls) > 0 {
			u = unit{start: j, end: end, valid: answersAll(ns[j], ns[j+1:end])}
		} else {
			u = unit{start: j + 1, end: end} // results whose call is gone
		}
	case len(m.ToolCalls) > 0:
		u = unit{start: i, end: end} // calls with no results
	default:
		u = unit{start: i, end: end, valid: true, user: m.Role == RoleUser}
	}
	for j := u.start; j < u.end; j++ {
		u.tokens += ns[j].Tokens
	}
	return u
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
// their Tokens set. It separates the system messages (one pass over msgs)
// and calls Select; Window.Dropped is counted over msgs.
func Apply(p Policy, msgs []Message) (Window, error) {
	pinned, recent := splitPinned(msgs)
	return Select(p, pinned, recent)
}

// splitPinned returns the system messages of msgs and the others, in order.
// Without system messages, recent is msgs itself, not a copy: a turn's
// window of a hundred messages is not copied for nothing.
func splitPinned(msgs []Message) (pinned, recent []Message) {
	n := 0
	for _, m := range msgs {
		if m.Role == RoleSystem {
			n++
		}
	}
	if n == 0 {
		return nil, msgs
	}
	pinned, recent = make([]Message, 0, n), make([]Message, 0, len(msgs)-n)
	for _, m := range msgs {
		if m.Role == RoleSystem {
			pinned = append(pinned, m)
		} else {
			recent = append(recent, m)
		}
	}
	return pinned, recent
}

// Select runs policy p over a conversation's system messages (pinned) and
// its other messages (recent: all of them, or the newest part of them, as a
// Store's Tail returns), both in order with their Tokens set. System
// messages found in recent are skipped.
//
// The pinned messages are all sent first, in order, and counted against the
// budget. The rest is cut into units (a message, or an assistant tool-call
// message with all its results), walking back from the newest; a unit that
// cannot be sent (a call missing results, a result missing its call) is never
// sent. For PolicyTokenBudget, Select keeps the longest contiguous run of
// newest units that fits the budget left after the pinned messages and the
// overhead, stopping at the first unit that does not fit, then drops leading
// units until the window starts with a user message. PolicyLastTurns stops
// after the Turns-th user message (and at the budget, if one is given).
// The walk goes back only as far as the window reaches, so a policy costs
// O(window), not O(history); PolicyAll walks everything.
//
// If recent has a user message but no window starting with one fits, Select
// returns ErrBudgetTooSmall. Window.Dropped counts the messages of pinned and
// recent not sent; Memory corrects it to the whole conversation.
//
// With Cache CacheStable, the window is anchored to the tokens of recent
// (see CacheStable): give Select the whole conversation, as Apply does.
// Memory anchors it to the conversation's stored total instead, so a tail
// is enough there.
func Select(p Policy, pinned, recent []Message) (Window, error) {
	w, err := selectWindow(p, pinned, recent, false)
	if err != nil || p.Cache != CacheStable {
		return w, err
	}
	var total int64
	for _, m := range recent {
		if m.Role != RoleSystem {
			total += int64(m.Tokens)
		}
	}
	return stabilize(p, w, total), nil
}

// selectWindow is Select. With share, the window's Messages may be a part
// of recent rather than a copy (when no pinned message goes first and
// every message it keeps is sendable): for a caller that owns recent and
// changes it no more, as Memory.Context its freshly read tail, so that a
// turn's window is not copied twice.
//
// It is over 80 lines on purpose: the walk's units live in buf, an array
// on the stack, which a helper returning them would move to the heap, and
// the per-turn path allocates nothing here but the window.
func selectWindow(p Policy, pinned, recent []Message, share bool) (Window, error) {
	if err := p.Validate(); err != nil {
		return Window{}, err
	}
	var w Window
	for _, m := range pinned {
		w.Parts.System += m.Tokens
	}
	w.Parts.Overhead = p.Overhead
	avail := -1 // no token limit
	if p.Kind != PolicyAll && p.Budget > 0 {
		avail = p.Budget - w.Parts.System - p.Overhead
		if avail < 0 {
			return Window{}, fmt.Errorf("%w: budget %d is below the %d tokens of the pinned system messages and request overhead", ErrBudgetTooSmall, p.Budget, w.Parts.System+p.Overhead)
		}
	}

	if start, used, ok := plainWalk(p, recent, avail); ok {
		if share && len(pinned) == 0 {
			w.Messages = recent[start:len(recent):len(recent)] // an append by the caller copies
		} else {
			w.Messages = make([]Message, 0, len(pinned)+len(recent)-start)
			w.Messages = append(append(w.Messages, pinned...), recent[start:]...)
		}
		w.Parts.Recent = used
		w.Tokens = w.Parts.System + w.Parts.Recent + w.Parts.Overhead
		w.Dropped = len(pinned) + len(recent) - len(w.Messages)
		return w, nil
	}
	// Walk back from the newest unit while it fits, newest first. A
	// window of up to len(buf) units walks without allocating.
	var buf [128]unit
	walked := buf[:0]
	used, turns := 0, 0
	for pos := len(recent); pos > 0; {
		if recent[pos-1].Role == RoleSystem {
			pos--
			continue
		}
		u := prevUnit(recent, pos)
		if u.valid {
			if avail >= 0 && used+u.tokens > avail {
				break
			}
			used += u.tokens
		}
		walked = append(walked, u)
		pos = u.start
		if p.Kind == PolicyLastTurns && u.valid && u.user {
			if turns++; turns == p.Turns {
				break
			}
		}
	}
	// The window starts with a user message (PolicyAll sends as stored).
	first := len(walked) - 1 // oldest walked unit
	if p.Kind != PolicyAll {
		for ; first >= 0 && !(walked[first].valid && walked[first].user); first-- {
			if walked[first].valid {
				used -= walked[first].tokens
			}
		}
		if first < 0 {
			if need, ok := newestUserNeed(recent); ok {
				return Window{}, fmt.Errorf("%w: budget %d leaves %d tokens after the pinned system messages and overhead, and the newest user message with what follows needs %d", ErrBudgetTooSmall, p.Budget, avail, need)
			}
		}
	}

	if start, end, ok := contiguous(walked[:first+1]); share && ok && len(pinned) == 0 {
		w.Messages = recent[start:end:end] // an append by the caller copies
	} else {
		w.Messages = make([]Message, 0, len(pinned)+len(walked))
		w.Messages = append(w.Messages, pinned...)
		for i := first; i >= 0; i-- {
			if u := walked[i]; u.valid {
				w.Messages = append(w.Messages, recent[u.start:u.end]...)
			}
		}
	}
	w.Parts.Recent = used
	w.Tokens = w.Parts.System + w.Parts.Recent + w.Parts.Overhead
	w.Dropped = len(pinned) + len(recent) - len(w.Messages)
	return w, nil
}

// plainWalk is Select's walk for the common case, a window of plain
// messages (no system message, no tool call, no tool result): each is a
// sendable unit of its own, so the walk keeps no record of them. It
// returns where the window starts in recent (it runs to the end) and its
// tokens; ok is false, and the general walk decides, when the walk meets
// a message that is not plain or finds no user message to start on.
func plainWalk(p Policy, recent []Message, avail int) (start, used int, ok bool) {
	if len(recent) == 0 {
		return 0, 0, false
	}
	start, turns := len(recent), 0
	for start > 0 {
		m := &recent[start-1]
		if m.Role == RoleSystem || m.Role == RoleTool || len(m.ToolCalls) > 0 {
			return 0, 0, false
		}
		if avail >= 0 && used+m.Tokens > avail {
			break
		}
		used += m.Tokens
		start--
		if p.Kind == PolicyLastTurns && m.Role == RoleUser {
			if turns++; turns == p.Turns {
				break
			}
		}
	}
	if p.Kind != PolicyAll {
		for start < len(recent) && recent[start].Role != RoleUser {
			used -= recent[start].Tokens
			start++
		}
		if start == len(recent) {
			return 0, 0, false
		}
	}
	return start, used, true
}

// contiguous reports whether walked (units newest first) is not empty, all
// sendable, and one run of messages with no gap: recent[start:end].
func contiguous(walked []unit) (start, end int, ok bool) {
	if len(walked) == 0 {
		return 0, 0, false
	}
	for i, u := range walked {
		if !u.valid || (i > 0 && walked[i-1].start != u.end) {
			return 0, 0, false
		}
	}
	return walked[len(walked)-1].start, walked[0].end, true
}

// newestUserNeed returns the tokens from the newest sendable user message to
// the end of recent: the least a window can hold. ok is false when recent has
// no user message. It is only called once a window came out empty, so its
// walk (to the newest user message) is on the error path.
func newestUserNeed(recent []Message) (need int, ok bool) {
	for pos := len(recent); pos > 0; {
		if recent[pos-1].Role == RoleSystem {
			pos--
			continue
		}
		u := prevUnit(recent, pos)
		if u.valid {
			need += u.tokens
			if u.user {
				return need, true
			}
		}
		pos = u.start
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

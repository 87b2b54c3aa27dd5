package chatmem

import (
	"cmp"
	"context"
)

// CacheStable is the Policy.Cache mode that keeps the front of a budgeted
// window byte-identical from one request to the next, so that a
// provider's prompt cache (OpenAI's automatic prefix cache, Anthropic's
// cache_control breakpoints, Gemini's implicit cache) serves it at a
// fraction of the input price.
//
// A plain token_budget window slides by a turn every turn: its first
// message changes with each request, and nothing after the system prompt
// is ever cached. A cache-stable window keeps its first message while the
// conversation still fits the budget from there; when the next request
// would not fit, it drops in one step to its low-water mark (LowWater
// percent of the budget; by default 1,024 tokens below the budget, see
// defaultStableStep), still starting on a user message, tool calls kept
// whole with their results, and stays there again for the turns that
// follow.
//
// Where the window starts is a function of the stored conversation alone,
// with no state kept between requests: the start moves at fixed points of
// the conversation's running token count (every step: the budget less
// its low-water mark),
// so every replica, and a restarted process, sends the same window. The
// window never exceeds the budget, and it is never longer than the plain
// window of the same policy: it is that window with older turns left out.
//
// A cache-stable request is laid out so that what changes from request to
// request comes last:
//
//	pinned system messages
//	summary (summary_buffer)           stable part: a prefix of the next
//	older turns, from the window start  request until the window moves
//	facts block (Policy.Facts)
//	recalled turns (recall)            volatile part
//	the newest turn
//
// The facts block goes after the stable part, so that a fact learned or
// changed rewrites only the tail of the request. Recalled turns (which
// follow the question) go just before the newest turn, and recall
// searches the history before the window's start, within the budget
// less the recent part's (Policy.Recent; stableRecentPercent of the
// budget by default), whatever room the stable part leaves: what the
// part that changes from request to request may take is bounded. The
// room recall leaves unused is not given back to older turns (that would
// move the start).
// Upstreams that hoist every system message to the front of the prompt
// (Anthropic's Messages API) put the facts block in the system prompt,
// where a change of facts rewrites the prefix.
const CacheStable = "stable"

// stableRecentPercent is the share of the budget the recent part of a
// cache-stable recall window gets by default: recall gets the rest.
const stableRecentPercent = 75

// DefaultLowWater is the low-water mark, in percent of the budget, of a
// cache-stable window whose budget is too small for a provider to cache
// (under stableCacheMin plus a step): when Policy.LowWater is 0, larger
// budgets move by defaultStableStep tokens instead (see stableStep). It
// stays the mark a cache-stable summary_buffer window's summary is
// extended down to (its step is the summary's extension, and a larger
// one costs less there: on LoCoMo at 4,096 tokens, the default step's
// 75% mark would extend it as often as the plain window does).
const DefaultLowWater = 60

// defaultStableStep is the most tokens a cache-stable window moves its
// start by when Policy.LowWater is 0, and stableCacheMin the tokens it
// keeps at least after a step: the providers' least cacheable prefix
// (1,024 tokens, OpenAI's and Anthropic's) and one of OpenAI's 128-token
// steps, so that the request after a step is served from the cache at
// once.
//
// A step sends the whole window again uncached, once per step's worth
// of new turns, so its cost per request is the window over the turns
// between steps: a larger step costs less, and leaves the window shorter
// on average by half a step, which is what it recalls less. Keeping the
// step at a fixed size, rather than a share of the budget, bounds what a
// window gives up (about 512 tokens on average) at every budget, while
// the share of the budget it costs falls as the budget grows. On LoCoMo
// (docs/evaluation.md), this costs under a quarter of the plain window
// under both providers' caches at 2,048 and 4,096 tokens, at an evidence
// recall under 0.03 lower.
const (
	defaultStableStep = 1024
	stableCacheMin    = 1024 + 128
)

// stableStep is how many tokens a cache-stable window under p moves its
// start by: the budget less its low-water mark (at least 1). It depends on
// p alone, not on what else the request holds (facts, a summary), so that
// a change of those does not move the start needlessly. With LowWater 0
// it is defaultStableStep, less what would leave the window under
// stableCacheMin after a step; a budget too small for that (under about
// 1,500 tokens, where a window is seldom cached at all) drops to
// DefaultLowWater percent.
func (p Policy) stableStep() int64 {
	b := int64(p.Budget)
	if p.LowWater != 0 {
		return max(b-b*int64(p.LowWater)/100, 1)
	}
	if b-stableCacheMin >= b/4 {
		return min(defaultStableStep, b-stableCacheMin)
	}
	return max(b-b*DefaultLowWater/100, 1)
}

// lowWater is p's low-water mark in percent of the budget: LowWater, or
// what the default step leaves (see stableStep).
func (p Policy) lowWater() int {
	if p.LowWater != 0 || p.Budget <= 0 {
		return cmp.Or(p.LowWater, DefaultLowWater)
	}
	return int(100 - 100*p.stableStep()/int64(p.Budget))
}

// stableLimit returns the most tokens a cache-stable window's recent part
// may hold when the conversation's messages (system messages aside) hold
// total tokens and avail are left for the recent part: total less the
// fewest whole steps that bring it within avail. While total grows by
// less than a step, the limit's start (total - limit) stays put.
func (p Policy) stableLimit(total int64, avail int) int {
	if avail < 0 || total <= int64(avail) {
		return avail
	}
	step := p.stableStep()
	k := (total - int64(avail) + step - 1) / step
	return int(total - k*step)
}

// stabilize trims w, a window selected under p from a conversation whose
// non-system messages hold total tokens, to its cache-stable form: its
// recent part (after the pinned system messages) loses whole units from
// the front until it holds at most p.stableLimit tokens, then starts on a
// user message. The recent part must run to the conversation's newest
// message, as Select's does; w is returned as it is when p is not
// cache-stable or already fits.
func stabilize(p Policy, w Window, total int64) Window {
	if p.Cache != CacheStable || p.Budget <= 0 {
		return w
	}
	avail := p.Budget - w.Parts.System - w.Parts.Facts - w.Parts.Summary - w.Parts.Recalled - w.Parts.Overhead
	limit := p.stableLimit(total, avail)
	if w.Parts.Recent <= limit {
		return w
	}
	first := 0
	for first < len(w.Messages) && w.Messages[first].Role == RoleSystem {
		first++
	}
	cut, recent := first, w.Parts.Recent
	for cut < len(w.Messages) && (recent > limit || w.Messages[cut].Role != RoleUser) {
		end := cut + 1
		if len(w.Messages[cut].ToolCalls) > 0 {
			for end < len(w.Messages) && w.Messages[end].Role == RoleTool {
				end++
			}
		}
		for _, m := range w.Messages[cut:end] {
			recent -= m.Tokens
		}
		cut = end
	}
	if cut == len(w.Messages) {
		return w // nothing of it starts a window within the limit: keep the plain one
	}
	msgs := make([]Message, 0, first+len(w.Messages)-cut)
	msgs = append(append(msgs, w.Messages[:first]...), w.Messages[cut:]...)
	w.Dropped += len(w.Messages) - len(msgs)
	w.Tokens -= w.Parts.Recent - recent
	w.Parts.Recent = recent
	w.Messages = msgs
	return w
}

// layoutStable moves w's facts block and recalled turns (if any) after
// the stable part of a cache-stable window, just before its newest turn
// (from its last user message on), in that order (see CacheStable). The
// other messages keep their order.
func layoutStable(w Window) Window {
	var moved, rest []Message
	for _, m := range w.Messages {
		if k := m.Metadata[MetaKey]; k == MetaFacts || k == MetaRecalled {
			moved = append(moved, m)
		} else {
			rest = append(rest, m)
		}
	}
	if len(moved) == 0 {
		return w
	}
	newest := len(rest)
	for i := len(rest) - 1; i >= 0; i-- {
		if rest[i].Role == RoleUser {
			newest = i
			break
		}
	}
	out := make([]Message, 0, len(w.Messages))
	out = append(append(append(out, rest[:newest]...), moved...), rest[newest:]...)
	w.Messages = out
	return w
}

// StableLen returns how many of w's leading messages are its stable part
// (see CacheStable): those before its facts block, its recalled turns and
// its newest turn (from its last user message on), whichever comes first.
// In a cache-stable window they repeat, byte for byte, at the front of
// the next request until the window moves.
func (w Window) StableLen() int {
	end := len(w.Messages)
	for i := len(w.Messages) - 1; i >= 0; i-- {
		if m := w.Messages[i]; m.Role == RoleUser && m.Metadata[MetaKey] == "" {
			end = i
			break
		}
	}
	for i, m := range w.Messages[:end] {
		if k := m.Metadata[MetaKey]; k == MetaFacts || k == MetaRecalled {
			return i
		}
	}
	return end
}

type cachePrefixKey struct{}

// WithCachePrefix returns ctx carrying n, the number of leading messages
// of the request made with it that are the stable part of a cache-stable
// window (Window.StableLen, with any messages sent before the window): an
// upstream transport that marks cache breakpoints (Anthropic's) marks one
// at their end.
func WithCachePrefix(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, cachePrefixKey{}, n)
}

// CachePrefix returns the n WithCachePrefix put in ctx.
func CachePrefix(ctx context.Context) (n int, ok bool) {
	n, ok = ctx.Value(cachePrefixKey{}).(int)
	return n, ok
}

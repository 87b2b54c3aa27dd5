package redis

import (
	"math"
	"sync/atomic"

	"github.com/chatmem/chatmem"
)

// tailHint guesses how many of the newest messages a TailQuery selects,
// so that Tail and AppendTail can read them in the round trip of their
// script (see Store.Tail). It learns two rates from the runs they
// returned, on any conversation of the store: messages per token
// (non-system tokens) and messages per user message (before it learned
// any, AppendTail guesses with the cold rates, guessCold). A guess too large costs the reading of the
// surplus; one too small, a second round trip; a wrong guess never changes
// what Tail returns.
type tailHint struct {
	perToken, perTurn atomic.Uint64 // float64 bits; 0: nothing learned yet
}

const (
	// guessMargin and guessSlack widen the estimate, so that runs a little
	// longer than the learned rates predict still fit.
	guessMargin = 1.25
	guessSlack  = 8
	// maxGuess caps the guess: a longer run is read in two round trips,
	// whose extra cost is small beside reading it.
	maxGuess = 1000
)

// coldPerToken and coldPerTurn are the rates guessCold assumes before
// any were learned: messages of 32 tokens, and turns of 4 messages (a
// question, a tool call, its result and an answer). Chats' messages are
// longer on average, so the guess reads more than the run holds, which
// costs less than the second round trip of a guess that falls short.
const (
	coldPerToken = 1.0 / 32
	coldPerTurn  = 4
)

// guess returns how many of the newest messages to read for q, or 0 for
// none (no estimate, or one over maxGuess).
func (h *tailHint) guess(q chatmem.TailQuery) int64 {
	return estimate(q, math.Float64frombits(h.perToken.Load()), math.Float64frombits(h.perTurn.Load()))
}

// guessCold is guess, with the cold rates for the rates not learned yet:
// for AppendTail, whose alternative to a guess is to pass the messages
// through Lua (see Store.AppendTail), not a second round trip.
func (h *tailHint) guessCold(q chatmem.TailQuery) int64 {
	perToken, perTurn := math.Float64frombits(h.perToken.Load()), math.Float64frombits(h.perTurn.Load())
	if perToken == 0 {
		perToken = coldPerToken
	}
	if perTurn == 0 {
		perTurn = coldPerTurn
	}
	return estimate(q, perToken, perTurn)
}

// estimate returns how many of the newest messages q selects at the rates
// given (0: unknown), with a margin, or 0 for no estimate or one over
// maxGuess.
func estimate(q chatmem.TailQuery, perToken, perTurn float64) int64 {
	// The run is the shorter of the two a query sets, so either estimate
	// bounds it.
	est := math.Inf(1)
	if q.Tokens > 0 && perToken > 0 {
		est = float64(q.Tokens) * perToken
	}
	if q.Turns > 0 && perTurn > 0 {
		est = min(est, float64(q.Turns)*perTurn)
	}
	n := math.Ceil(est*guessMargin) + guessSlack
	if n > maxGuess {
		return 0
	}
	return int64(n)
}

// learn updates the rates with a run Tail returned.
func (h *tailHint) learn(msgs []chatmem.Message) {
	var tokens, users int
	for _, m := range msgs {
		switch m.Role {
		case chatmem.RoleSystem:
			continue
		case chatmem.RoleUser:
			users++
		}
		tokens += m.Tokens
	}
	n := float64(len(msgs))
	if tokens > 0 {
		update(&h.perToken, n/float64(tokens))
	}
	if users > 0 {
		update(&h.perTurn, n/float64(users))
	}
}

// update moves a rate a quarter of the way to sample (all the way for the
// first sample). Concurrent updates may overwrite each other, which a hint
// can afford.
func update(rate *atomic.Uint64, sample float64) {
	old := math.Float64frombits(rate.Load())
	if old > 0 {
		sample = old + (sample-old)/4
	}
	rate.Store(math.Float64bits(sample))
}

// seed sets the rates that nothing was learned for yet from a
// conversation's totals, as an append returns them: a process's first
// Tail then reads its window in one round trip too.
func (h *tailHint) seed(conv chatmem.Conversation) {
	if n := float64(conv.LastSeq); conv.Tokens > 0 && h.perToken.Load() == 0 {
		h.perToken.CompareAndSwap(0, math.Float64bits(n/float64(conv.Tokens)))
	}
	if n := float64(conv.LastSeq); conv.Turns > 0 && h.perTurn.Load() == 0 {
		h.perTurn.CompareAndSwap(0, math.Float64bits(n/float64(conv.Turns)))
	}
}

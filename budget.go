package chatmem

import (
	"context"
	"sync"
)

// When SummaryOptions leaves Trigger unset, a conversation's summary follows
// the budget its summary_buffer context reads leave for the summary and the
// messages after it (the budget less the pinned messages, the facts and the
// request overhead; see assembly.summaryBudget): it is extended once the
// messages after it pass autoTriggerPercent of that budget, until about
// autoTargetPercent remain, and it is kept within autoSummaryPercent, so
// that the summary and the messages after it fit together with room to
// spare (5%) for the newest turn.
//
// The summary gets the larger share: it stands for everything older, the
// messages after it only for the last few turns. On LoCoMo (docs/
// evaluation.md) answer presence at 2,048 tokens rose with the summary's
// share, 0.558 at 60/35/30, 0.580 at 45/20/45, 0.608 at these values and
// 0.621 at 35/15/60; these keep a recent window of 20-40% of the budget (a
// few turns even at small budgets) and summarize every 20% of it.
const (
	autoTriggerPercent = 40
	autoTargetPercent  = 20
	autoSummaryPercent = 55
)

// BoundedSummarizer is a Summarizer that can keep a summary within a number
// of tokens. Memory calls SummarizeWithin, when the summarizer has it, with
// the share of the budget a summary may take (see SummaryOptions); a
// summary counted over that share is asked for again with a smaller bound.
type BoundedSummarizer interface {
	Summarizer
	// SummarizeWithin is Summarize with the summary kept within about
	// maxTokens tokens (maxTokens >= 1).
	SummarizeWithin(ctx context.Context, prev string, msgs []Message, maxTokens int) (string, error)
}

// summaryBudgets remembers, per conversation, the smallest budget its
// summary_buffer context reads have used in this process: a summary made
// for it fits every budget the conversation is read with. It is bounded;
// a conversation it forgets goes back to the fixed defaults until its next
// read.
type summaryBudgets struct {
	mu sync.Mutex
	m  map[Key]int
}

// note records budget for key and reports whether the remembered budget
// changed.
func (b *summaryBudgets) note(key Key, budget int) bool {
	if budget < 1 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.m[key]; ok && old <= budget {
		return false
	}
	if b.m == nil || len(b.m) >= derivedCacheEntries {
		b.m = make(map[Key]int) // bounded: a forgotten budget is noted again at the next read
	}
	b.m[key] = budget
	return true
}

func (b *summaryBudgets) get(key Key) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.m[key]
	return n, ok
}

// summaryBounds returns when key's summary is extended (once more than
// trigger tokens follow it), how far (until about target remain), and the
// tokens the summary itself may take (0: no bound). They are the
// SummaryOptions when set, else they follow the conversation's remembered
// budget, else the defaults (2000 and 1000, no bound).
func (m *Memory) summaryBounds(key Key) (trigger, target, limit int) {
	if m.autoSummary {
		if b, ok := m.budgets.get(key); ok {
			return max(b*autoTriggerPercent/100, 2), max(b*autoTargetPercent/100, 1), max(b*autoSummaryPercent/100, 1)
		}
	}
	return m.sumOpts.Trigger, m.sumOpts.Target, 0
}

// noteSummaryBudget remembers the budget a summary_buffer read of key used;
// when that changes what summarizing does, the estimate that lets appends
// skip the check is dropped, so the next job looks again.
func (m *Memory) noteSummaryBudget(key Key, budget int) {
	if m.autoSummary && m.summarizer != nil && m.budgets.note(key, budget) {
		m.worker.setUnsummarized(key, 0, false)
	}
}

// summaryBudget is the budget a summary_buffer read leaves for the summary
// and the messages after it: the policy's budget less the pinned system
// messages, the facts block and the request overhead, so that a long system
// prompt does not push the summary out of the window.
func (a assembly) summaryBudget() int {
	b := a.p.Budget - a.p.Overhead
	for _, m := range a.pinned {
		b -= m.Tokens
	}
	if a.facts != nil {
		b -= a.facts.msg.Tokens
	}
	return b
}

// Package oneshot assembles the window a policy sends for a list of
// messages that no store keeps, as `chatmem window` does: the messages are
// held in memory for the one call, with the offline summarizer for
// summary_buffer, the in-memory search index for recall and the rule
// extractor for facts. Nothing calls a model and nothing is written to disk.
package oneshot

import (
	"context"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
)

// Options configure Window. Counter is required.
type Options struct {
	Counter chatmem.Counter
	// Now stamps messages given without a time (recall's markers show it).
	// Nil: time.Now.
	Now func() time.Time
}

// key is the one conversation Window holds.
var key = chatmem.Key{Tenant: "oneshot", ID: "input"}

// Window returns what p sends for msgs, oldest first, as Memory.Context
// would for a conversation holding exactly msgs: all, last_turns and
// token_budget select from the counted messages (chatmem.Apply);
// summary_buffer sends the offline summary of what its window leaves out,
// following p.Budget as an unset SummaryOptions does; recall sends the
// newest messages and the older ones most relevant to the newest user
// message; p.Facts adds what the rule extractor finds in the user messages.
// msgs must be a valid history (chatmem.ValidateHistory). It wraps
// chatmem.ErrInvalid for a bad policy and chatmem.ErrBudgetTooSmall.
func Window(ctx context.Context, msgs []chatmem.Message, p chatmem.Policy, opts Options) (chatmem.Window, error) {
	if opts.Counter == nil {
		return chatmem.Window{}, fmt.Errorf("%w: oneshot.Window needs a counter", chatmem.ErrInvalid)
	}
	if err := p.Validate(); err != nil {
		return chatmem.Window{}, err
	}
	if p.Kind != chatmem.PolicySummaryBuffer && p.Kind != chatmem.PolicyRecall && !p.Facts {
		counted := make([]chatmem.Message, len(msgs))
		for i, m := range msgs {
			var err error
			if m.Tokens, err = opts.Counter.Count(ctx, m); err != nil {
				return chatmem.Window{}, fmt.Errorf("count message %d: %w", i, err)
			}
			counted[i] = m
		}
		if o, ok := opts.Counter.(chatmem.RequestOverhead); ok {
			p.Overhead = o.RequestOverhead()
		}
		return chatmem.Apply(p, counted)
	}
	if len(msgs) == 0 {
		return chatmem.Window{}, fmt.Errorf("%w: %s needs at least one message", chatmem.ErrInvalid, p.Kind)
	}
	store := memstore.New()
	limits := chatmem.Limits{MaxBatch: -1, MaxContentBytes: -1, MaxToolCalls: -1, MaxMetadata: -1}
	// The messages go in with the extractor only, so that the summarizer
	// first runs at the read, which tells it the budget to follow.
	writer := chatmem.Options{Counter: opts.Counter, Limits: limits, Now: opts.Now, Sync: true}
	if p.Facts {
		writer.Extractors = []chatmem.Extractor{offline.DefaultExtractor()}
	}
	w, err := chatmem.New(store, writer)
	if err != nil {
		return chatmem.Window{}, err
	}
	if _, err := w.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		return chatmem.Window{}, err
	}
	reader := chatmem.Options{Counter: opts.Counter, Limits: limits, Now: opts.Now, Sync: true}
	if p.Kind == chatmem.PolicySummaryBuffer {
		reader.Summarizer = offline.NewSummarizer(offline.Options{})
	}
	r, err := chatmem.New(store, reader)
	if err != nil {
		return chatmem.Window{}, err
	}
	return r.Context(ctx, key, p, chatmem.ContextOptions{})
}

package chatmem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// RebuildError says why a receipt's window cannot be rebuilt as it was
// sent: each of Problems names a run of messages or a block, and what
// became of it. It wraps ErrNotFound when something is gone (rewound,
// purged) and ErrConflict when something is there but other than it was
// (written again after a rewind, redacted, a summary redone, facts
// changed, or a part chatmem does not keep).
type RebuildError struct {
	Problems []string
	missing  bool
}

func (e *RebuildError) Error() string {
	return "the window cannot be rebuilt: " + strings.Join(e.Problems, "; ")
}

func (e *RebuildError) Unwrap() error {
	if e.missing {
		return ErrNotFound
	}
	return ErrConflict
}

// Rebuild returns the messages the window of r, a receipt of key's
// conversation, sent, in the order it sent them, read again from the
// store: the stored messages of each run of r.Sent, the facts block
// and the summary's message made again from the facts and summary kept
// now. Each run is checked against its digest, so what it returns is what
// was sent, or a *RebuildError naming every run that is missing or
// changed. Recalled messages carry markers made when they were recalled,
// which are not kept: a window that recalled cannot be rebuilt. It costs
// one range read per run (a window has a few), and a read of the facts or
// summary if the window sent them. It wraps ErrNotFound for a conversation
// that does not exist.
func (m *Memory) Rebuild(ctx context.Context, key Key, r Receipt) ([]Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("rebuild in %s: %w", key, err)
	}
	counter, err := m.Counter(conv.Tokenizer)
	if err != nil {
		return nil, err
	}
	var out []Message
	rerr := &RebuildError{}
	problem := func(missing bool, format string, args ...any) {
		rerr.Problems = append(rerr.Problems, fmt.Sprintf(format, args...))
		rerr.missing = rerr.missing || missing
	}
	for _, sp := range r.Sent {
		var msgs []Message
		switch sp.Part {
		case PartFacts:
			f, err := m.factsMessage(ctx, key, conv.User, counter)
			if err != nil {
				return nil, err
			}
			if f == nil {
				problem(true, "the facts block: no facts are kept now (deleted since, or taken back by a rewind)")
				continue
			}
			msgs = []Message{f.msg}
		case PartSummary:
			s, err := m.Summary(ctx, key)
			switch {
			case errors.Is(err, ErrNotFound):
				problem(true, "the summary of messages 1-%d: no summary is kept now (taken back by a rewind)", coversOf(r))
				continue
			case err != nil:
				return nil, err
			case s.CoversSeq != coversOf(r):
				problem(false, "the summary of messages 1-%d: the summary kept now covers 1-%d (redone since)", coversOf(r), s.CoversSeq)
				continue
			}
			msgs = []Message{summaryAsMessage(s)}
		case PartRecalled:
			problem(false, "recalled messages %s: recall's markers are not kept, so recalled messages cannot be sent again as they were", spanName(sp))
			continue
		default:
			if sp.From < 1 || sp.To < sp.From {
				problem(false, "run %q %d-%d: not a range of messages", sp.Part, sp.From, sp.To)
				continue
			}
			if sp.To > conv.LastSeq {
				problem(true, "messages %s: not stored (the conversation ends at %d: rewound since)", spanName(sp), conv.LastSeq)
				continue
			}
			msgs, err = m.store.Range(ctx, key, sp.From-1, int(sp.To-sp.From+1))
			if err != nil {
				return nil, fmt.Errorf("rebuild in %s: %w", key, err)
			}
			if int64(len(msgs)) != sp.To-sp.From+1 {
				problem(true, "messages %s: only %d of them are stored", spanName(sp), len(msgs))
				continue
			}
		}
		if h := spanHash(msgs); h != sp.Hash {
			problem(false, "%s: changed since it was sent (written again after a rewind, redacted, or edited)", partName(sp))
			continue
		}
		out = append(out, msgs...)
	}
	if len(rerr.Problems) > 0 {
		return nil, rerr
	}
	return out, nil
}

func coversOf(r Receipt) int64 {
	if r.Summary == nil {
		return 0
	}
	return r.Summary.CoversSeq
}

// spanHash is SentSpans' digest of a run's messages.
func spanHash(msgs []Message) string {
	h := sha256.New()
	var buf []byte
	for _, msg := range msgs {
		buf = hashMessage(h, buf, msg)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func spanName(sp SentSpan) string {
	s := fmt.Sprintf("%d-%d", sp.From, sp.To)
	if sp.From == sp.To {
		s = fmt.Sprint(sp.From)
	}
	if sp.Conversation != "" {
		s += " of conversation " + sp.Conversation
	}
	return s
}

func partName(sp SentSpan) string {
	switch sp.Part {
	case PartFacts:
		return "the facts block"
	case PartSummary:
		return "the summary's message"
	}
	return "messages " + spanName(sp)
}

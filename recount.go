package chatmem

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// recountPage is how many messages Recount reads per Range call.
const recountPage = 1000

// maxRecountRetries bounds how often Recount tries again after appends
// arrived between its read and its write.
const maxRecountRetries = 3

// Recount counts every message of the conversation with the named
// tokenizer and stores the counts, the running totals and the tokenizer's
// name in place of the old ones, so that later context reads with that
// tokenizer use stored counts instead of counting on the fly (see
// ContextOptions.Tokenizer). It returns the conversation as it is
// afterwards.
//
// It reads and counts the whole conversation (with Range, 1000 messages at
// a time) and rewrites every message's count: a maintenance operation for
// a conversation that changes model, not for the request path. Appends
// that arrive meanwhile make the store refuse the write (ErrConflict);
// Recount then counts just the new messages and tries again, up to 3
// times, before it returns the ErrConflict.
//
// The stored summary keeps the Tokens counted when it was written, under
// the old tokenizer, until the next summary is written with the new one.
//
// It wraps ErrInvalid for a bad key, an unknown tokenizer or a store that
// does not implement Recounter, and returns ErrNotFound for a missing
// conversation, or the counter's error.
func (m *Memory) Recount(ctx context.Context, key Key, tokenizer string) (Conversation, error) {
	if err := key.Validate(); err != nil {
		return Conversation{}, err
	}
	rc := m.caps.recounter
	if rc == nil {
		return Conversation{}, fmt.Errorf("%w: this store cannot recount", ErrInvalid)
	}
	counter, err := m.Counter(tokenizer)
	if err != nil {
		return Conversation{}, err
	}
	var (
		tokens  []int     // the counts of seqs 1..len(tokens), kept across attempts
		created time.Time // the CreatedAt of the conversation they were counted in
	)
	for attempt := 0; ; attempt++ {
		conv, err := m.store.Conversation(ctx, key)
		if err != nil {
			return Conversation{}, fmt.Errorf("recount %s: %w", key, err)
		}
		if !conv.CreatedAt.Equal(created) || int64(len(tokens)) > conv.LastSeq {
			// Deleted and started again since the last attempt: its
			// messages are others.
			tokens, created = nil, conv.CreatedAt
		}
		if tokens, err = m.countFrom(ctx, key, counter, tokens, conv.LastSeq); err != nil {
			if errors.Is(err, ErrConflict) && attempt < maxRecountRetries {
				tokens = nil
				continue
			}
			return Conversation{}, fmt.Errorf("recount %s: %w", key, err)
		}
		err = rc.Recount(ctx, key, counter.Name(), conv.LastSeq, tokens)
		m.tails.drop(key)
		if errors.Is(err, ErrConflict) && attempt < maxRecountRetries {
			continue
		}
		if err != nil {
			return Conversation{}, fmt.Errorf("recount %s: %w", key, err)
		}
		if conv, err = m.store.Conversation(ctx, key); err != nil {
			return Conversation{}, fmt.Errorf("recount %s: %w", key, err)
		}
		return conv, nil
	}
}

// countFrom returns tokens extended with the counts of the messages after
// them up to seq last. Messages never change once stored, so the counts of
// an earlier attempt stand. It returns ErrConflict if the conversation no
// longer has last messages (deleted and started again meanwhile).
func (m *Memory) countFrom(ctx context.Context, key Key, c Counter, tokens []int, last int64) ([]int, error) {
	if cap(tokens) < int(last) {
		tokens = append(make([]int, 0, last), tokens...)
	}
	for after := int64(len(tokens)); after < last; {
		page, err := m.store.Range(ctx, key, after, int(min(recountPage, last-after)))
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return nil, fmt.Errorf("%w: the conversation ends at seq %d, not %d", ErrConflict, after, last)
		}
		for _, msg := range page {
			if msg.Seq != after+1 {
				return nil, fmt.Errorf("%w: read seq %d where %d belongs", ErrConflict, msg.Seq, after+1)
			}
			n, err := c.Count(ctx, msg)
			if err != nil {
				return nil, fmt.Errorf("count message %d: %w", msg.Seq, err)
			}
			tokens = append(tokens, n)
			after++
		}
	}
	return tokens, nil
}

// ValidateRecount checks the arguments of Recounter.Recount that need no
// stored state: a tokenizer name, lastSeq counts and no negative count. It
// wraps ErrInvalid. Stores call it before they read anything.
func ValidateRecount(tokenizer string, lastSeq int64, tokens []int) error {
	if tokenizer == "" {
		return fmt.Errorf("%w: recount needs a tokenizer name", ErrInvalid)
	}
	if int64(len(tokens)) != lastSeq {
		return fmt.Errorf("%w: %d counts for last seq %d", ErrInvalid, len(tokens), lastSeq)
	}
	for i, n := range tokens {
		if n < 0 {
			return fmt.Errorf("%w: negative count %d for seq %d", ErrInvalid, n, i+1)
		}
	}
	return nil
}

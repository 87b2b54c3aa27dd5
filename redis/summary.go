package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var (
	_ chatmem.SummaryStore     = (*Store)(nil)
	_ chatmem.GenerationWriter = (*Store)(nil)
)

// Summary returns the conversation's summary, kept in its summary hash
// (covers_seq, text, tokens, summarizer, created_at). It wraps
// chatmem.ErrNotFound if the conversation does not exist or has no summary.
func (s *Store) Summary(ctx context.Context, key chatmem.Key) (chatmem.Summary, error) {
	if err := key.Validate(); err != nil {
		return chatmem.Summary{}, err
	}
	v, err := s.readHash(ctx, key, kSummary, "")
	if err != nil {
		return chatmem.Summary{}, fmt.Errorf("redis: summary of %s: %w", key, err)
	}
	f := hashFields(v)
	if f["covers_seq"] == "" {
		return chatmem.Summary{}, fmt.Errorf("%w: conversation %s has no summary", chatmem.ErrNotFound, key)
	}
	sum := chatmem.Summary{Text: f["text"], Summarizer: f["summarizer"]}
	var errs [3]error
	sum.CoversSeq, errs[0] = strconv.ParseInt(f["covers_seq"], 10, 64)
	sum.Tokens, errs[1] = strconv.Atoi(f["tokens"])
	var created int64
	created, errs[2] = strconv.ParseInt(f["created_at"], 10, 64)
	for _, err := range errs {
		if err != nil {
			return chatmem.Summary{}, fmt.Errorf("redis: summary of %s: %w", key, err)
		}
	}
	sum.CreatedAt = time.Unix(0, created).UTC()
	return sum, nil
}

// PutSummary stores sum if the stored summary covers exactly prev, with one
// script; see chatmem.SummaryStore. Errors come in the order the memory
// store gives them: ErrInvalid for what sum and prev are wrong about on
// their own, ErrNotFound, ErrConflict, and ErrInvalid for a CoversSeq past
// the last message. A zero CreatedAt means the store's clock.
func (s *Store) PutSummary(ctx context.Context, key chatmem.Key, sum chatmem.Summary, prev int64) error {
	return s.putSummary(ctx, key, nil, sum, prev)
}

// PutSummaryOf is PutSummary for the conversation created at created only
// (see chatmem.GenerationWriter): the script compares created, in Unix
// nanoseconds as meta keeps it, with meta's created_at before it writes,
// so another conversation at key, or none, wraps chatmem.ErrNotFound and
// nothing is written. The errors of what sum and prev are wrong about on
// their own come first.
func (s *Store) PutSummaryOf(ctx context.Context, key chatmem.Key, created time.Time, sum chatmem.Summary, prev int64) error {
	return s.putSummary(ctx, key, &created, sum, prev)
}

// putSummary is PutSummary, and PutSummaryOf when created is not nil.
func (s *Store) putSummary(ctx context.Context, key chatmem.Key, created *time.Time, sum chatmem.Summary, prev int64) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := storekit.CheckSummary(sum, prev); err != nil {
		return err
	}
	if sum.Tokens < 0 {
		return fmt.Errorf("%w: summary has %d tokens", chatmem.ErrInvalid, sum.Tokens)
	}
	gen, ok := generation(created)
	if !ok {
		return notFound(key)
	}
	if sum.CreatedAt.IsZero() {
		sum.CreatedAt = s.now()
	}
	reply, err := s.run(ctx, putSummaryScript, s.keysAt(key, kMeta, kSummary), nanos(s.now()), prev,
		sum.CoversSeq, sum.Text, sum.Tokens, sum.Summarizer, nanos(sum.CreatedAt), gen)
	if err != nil {
		return fmt.Errorf("redis: put summary of %s: %w", key, err)
	}
	switch r := reply.(type) {
	case int64:
		if r < 0 {
			return notFound(key)
		}
		return nil
	case []any:
		code, _ := r[0].(int64)
		n, _ := r[1].(int64)
		if code == 1 {
			return fmt.Errorf("%w: the summary of %s covers seq %d, not %d", chatmem.ErrConflict, key, n, prev)
		}
		if err := storekit.CheckSummaryWithin(sum.CoversSeq, n); err != nil {
			return fmt.Errorf("summary of %s: %w", key, err)
		}
	}
	return fmt.Errorf("redis: put summary of %s: unexpected script reply %v", key, reply)
}

// readHash reads one field of a conversation's hash at position k, or all
// of them for an empty field, with readScript: ErrNotFound if the
// conversation does not exist.
func (s *Store) readHash(ctx context.Context, key chatmem.Key, k int, field string) (any, error) {
	reply, err := s.run(ctx, readScript, s.keysAt(key, kMeta, k), nanos(s.now()), field)
	if err != nil {
		return nil, err
	}
	r, ok := reply.([]any)
	if !ok || len(r) == 0 {
		return nil, fmt.Errorf("unexpected script reply %v", reply)
	}
	if code, _ := r[0].(int64); code < 0 || len(r) < 2 {
		return nil, notFound(key)
	}
	return r[1], nil
}

// hashFields turns HGETALL's flat field-value list in a script reply into
// a map.
func hashFields(v any) map[string]string {
	list, _ := v.([]any)
	fields := make(map[string]string, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		k, _ := list[i].(string)
		val, _ := list[i+1].(string)
		fields[k] = val
	}
	return fields
}

// generation returns the scripts' argument for created: empty for any
// conversation, else created in Unix nanoseconds, as meta's created_at
// holds it. ok is false for a time that no conversation's created_at can
// hold (not after 1970, or past 2262), which no conversation matches.
func generation(created *time.Time) (arg string, ok bool) {
	switch {
	case created == nil:
		return "", true
	case !created.After(time.Unix(0, 0)) || created.After(maxTime):
		return "", false
	}
	return nanos(*created), true
}

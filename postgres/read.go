package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// Conversation returns the conversation's metadata, or wraps
// chatmem.ErrNotFound if it does not exist or has expired.
func (s *Store) Conversation(ctx context.Context, key chatmem.Key) (chatmem.Conversation, error) {
	op := "postgres: conversation " + key.String()
	if err := key.Validate(); err != nil {
		return chatmem.Conversation{}, fmt.Errorf("%s: %w", op, err)
	}
	c := chatmem.Conversation{Key: key}
	var expires *time.Time
	err := s.pool.QueryRow(ctx, s.q.conversation, key.Tenant, key.ID, s.now()).Scan(
		&c.Tokenizer, &c.LastSeq, &c.Tokens, &c.SystemTokens, &c.Turns, &c.CreatedAt, &c.UpdatedAt, &expires, &c.User, &c.Revision)
	if err != nil {
		return chatmem.Conversation{}, wrap(ctx, op, err)
	}
	if expires != nil {
		c.ExpiresAt = *expires
	}
	return utcConversation(c), nil
}

// List returns the tenant's live conversations ordered by ID (byte order),
// one page at a time (storekit.PageLimit).
func (s *Store) List(ctx context.Context, tenant string, page chatmem.PageRequest) (chatmem.Page, error) {
	op := "postgres: list " + tenant
	if err := storekit.CheckTenant(tenant); err != nil {
		return chatmem.Page{}, fmt.Errorf("%s: %w", op, err)
	}
	return s.page(ctx, op, tenant, page, s.q.list)
}

// page reads one page of live conversations, ordered by ID, with sql, whose
// parameters are the tenant, the ID to start after, now, the page size
// plus one, and then args; the page size is storekit.PageLimit's.
func (s *Store) page(ctx context.Context, op, tenant string, page chatmem.PageRequest, sql string, args ...any) (chatmem.Page, error) {
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.Page{}, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, sql, append([]any{tenant, page.After, s.now(), limit + 1}, args...)...)
	if err != nil {
		return chatmem.Page{}, wrap(ctx, op, err)
	}
	defer rows.Close()
	var out chatmem.Page
	for rows.Next() {
		c := chatmem.Conversation{Key: chatmem.Key{Tenant: tenant}}
		var expires *time.Time
		if err := rows.Scan(&c.Key.ID, &c.Tokenizer, &c.LastSeq, &c.Tokens, &c.SystemTokens, &c.Turns,
			&c.CreatedAt, &c.UpdatedAt, &expires, &c.User, &c.Revision); err != nil {
			return chatmem.Page{}, wrap(ctx, op, err)
		}
		if expires != nil {
			c.ExpiresAt = *expires
		}
		out.Conversations = append(out.Conversations, utcConversation(c))
	}
	if err := rows.Err(); err != nil {
		return chatmem.Page{}, wrap(ctx, op, err)
	}
	if len(out.Conversations) > limit {
		out.Conversations = out.Conversations[:limit]
		out.Next = out.Conversations[limit-1].Key.ID
	}
	return out, nil
}

// Tail returns the newest messages selected by q, oldest first, with one
// statement: a primary-key range read whose start comes from at most two
// index probes (see the tail query). Its cost follows the window, not the
// conversation.
func (s *Store) Tail(ctx context.Context, key chatmem.Key, q chatmem.TailQuery) ([]chatmem.Message, error) {
	op := "postgres: tail of " + key.String()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if q.Tokens <= 0 && q.Turns <= 0 {
		return s.none(ctx, op, key)
	}
	return s.read(ctx, op, key, s.q.tail, tailArgs(key, s.now(), q)...)
}

// tailArgs are the tail query's parameters: the window q of the
// conversation as it is at now.
func tailArgs(key chatmem.Key, now time.Time, q chatmem.TailQuery) []any {
	return []any{key.Tenant, key.ID, now, max(q.Tokens, 0), max(q.Turns, 0)}
}

// Range returns up to limit messages with Seq > after, oldest first
// (limit <= 0: all of them).
func (s *Store) Range(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.Message, error) {
	op := "postgres: range of " + key.String()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	var lim *int // NULL: no limit
	if limit > 0 {
		lim = &limit
	}
	return s.read(ctx, op, key, s.q.rangeAfter, key.Tenant, key.ID, s.now(), after, lim)
}

// ConversationSince returns the conversation's metadata and up to limit of
// its messages with Seq > after, oldest first, with one statement, so both
// are of one snapshot: a probe of the conversation's row joined to one
// primary-key range of its messages (see chatmem.SinceReader). It wraps
// chatmem.ErrNotFound if the conversation does not exist or has expired.
func (s *Store) ConversationSince(ctx context.Context, key chatmem.Key, after int64, limit int) (chatmem.Conversation, []chatmem.Message, error) {
	op := "postgres: conversation since " + key.String()
	if err := key.Validate(); err != nil {
		return chatmem.Conversation{}, nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := storekit.CheckLimit(limit); err != nil {
		return chatmem.Conversation{}, nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.pool.Query(ctx, s.q.conversationSince, key.Tenant, key.ID, s.now(), after, limit)
	if err != nil {
		return chatmem.Conversation{}, nil, wrap(ctx, op, err)
	}
	defer rows.Close()
	c := chatmem.Conversation{Key: key}
	var (
		expires *time.Time
		r       nullMessageRow
	)
	// Every row repeats the conversation's columns: the first row's are
	// scanned, the others' skipped (nil targets).
	conv := []any{&c.Tokenizer, &c.LastSeq, &c.Tokens, &c.SystemTokens, &c.Turns, &c.CreatedAt, &c.UpdatedAt, &expires, &c.User, &c.Revision}
	dest := append(conv, r.dest()...)
	found := false
	msgs := []chatmem.Message{}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return chatmem.Conversation{}, nil, wrap(ctx, op, err)
		}
		if !found {
			found = true
			clear(dest[:len(conv)])
		}
		m, ok, err := r.message()
		if err != nil {
			return chatmem.Conversation{}, nil, wrap(ctx, op, err)
		}
		if ok {
			msgs = append(msgs, m)
		}
	}
	if err := rows.Err(); err != nil {
		return chatmem.Conversation{}, nil, wrap(ctx, op, err)
	}
	if !found {
		return chatmem.Conversation{}, nil, fmt.Errorf("%s: %w", op, chatmem.ErrNotFound)
	}
	if expires != nil {
		c.ExpiresAt = *expires
	}
	// The statement's plan returns the range in order (see the query); a
	// plan that did not would cost a sort here, not wrong answers.
	bySeq := func(a, b chatmem.Message) int { return cmp.Compare(a.Seq, b.Seq) }
	if !slices.IsSortedFunc(msgs, bySeq) {
		slices.SortFunc(msgs, bySeq)
	}
	return utcConversation(c), msgs, nil
}

// System returns the conversation's system messages, oldest first, from
// the partial index on them.
func (s *Store) System(ctx context.Context, key chatmem.Key) ([]chatmem.Message, error) {
	op := "postgres: system messages of " + key.String()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return s.read(ctx, op, key, s.q.system, systemArgs(key, s.now())...)
}

// systemArgs are the system query's parameters: the conversation as it is
// at now.
func systemArgs(key chatmem.Key, now time.Time) []any {
	return []any{key.Tenant, key.ID, now}
}

// read runs a message query that returns nothing for a missing or expired
// conversation. Only when it returns nothing does read ask which it was, so
// the common case is one statement.
func (s *Store) read(ctx context.Context, op string, key chatmem.Key, sql string, args ...any) ([]chatmem.Message, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	msgs, err := scanMessages(rows)
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	if len(msgs) == 0 {
		return s.none(ctx, op, key)
	}
	return msgs, nil
}

// none returns an empty result if the conversation exists, and wraps
// chatmem.ErrNotFound otherwise.
func (s *Store) none(ctx context.Context, op string, key chatmem.Key) ([]chatmem.Message, error) {
	if err := s.live(ctx, op, key); err != nil {
		return nil, err
	}
	return []chatmem.Message{}, nil
}

// live returns nil if the conversation exists and has not expired, and
// wraps chatmem.ErrNotFound otherwise.
func (s *Store) live(ctx context.Context, op string, key chatmem.Key) error {
	var seq int64
	if err := s.pool.QueryRow(ctx, s.q.conversation, key.Tenant, key.ID, s.now()).Scan(nil, &seq, nil, nil, nil, nil, nil, nil, nil, nil); err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

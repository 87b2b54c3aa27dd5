package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// Tail returns the newest messages selected by q, oldest first: the longest
// run of newest messages whose non-system tokens fit q.Tokens, the messages
// from the q.Turns-th newest user message on, or the shorter of the two. It
// reads in one snapshot the conversation row and what tailMessages reads,
// so its cost follows the size of the result, not the length of the
// conversation. It returns chatmem.ErrNotFound for a conversation that does
// not exist or has expired.
func (s *Store) Tail(ctx context.Context, key chatmem.Key, q chatmem.TailQuery) ([]chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	now := s.now()
	var out []chatmem.Message
	err := s.read(ctx, func(t tx) error {
		conv, err := liveConversation(t, key, now)
		if err != nil {
			return err
		}
		out, err = tailMessages(t, conv, q)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// tailMessages reads in t the newest messages of conv selected by q, as
// Tail returns them; conv is the conversation's row as t sees it (its
// totals place the run). It finds where the run starts (one walk back
// along the covering index messages_seq, over the run) and reads the run
// (an index range). Tail calls it in a read transaction, AppendTail in
// the append's write transaction, after the append.
func tailMessages(t tx, conv chatmem.Conversation, q chatmem.TailQuery) ([]chatmem.Message, error) {
	if q.CheckSelects() != nil {
		return []chatmem.Message{}, nil
	}
	key := conv.Key
	var minTokens, minTurn int64 // the run's bounds (0: none)
	if q.Tokens > 0 && conv.Tokens > int64(q.Tokens) {
		minTokens = conv.Tokens - int64(q.Tokens)
	}
	if turn := conv.Turns - int64(q.Turns) + 1; q.Turns > 0 && turn >= 1 {
		minTurn = turn
	}
	var before int64 // the newest message before the run (0: none)
	if minTokens > 0 || minTurn > 0 {
		err := t.row(selectTailStart, key.Tenant, key.ID, minTokens, minTurn).Scan(&before)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
	}
	return queryMessages(t, selectRange, key.Tenant, key.ID, before, -1)
}

// Range returns up to limit messages with Seq > after, oldest first (limit
// <= 0: all of them). It returns chatmem.ErrNotFound for a conversation that
// does not exist or has expired.
func (s *Store) Range(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = -1
	}
	return s.readMessages(ctx, key, selectRange, key.Tenant, key.ID, after, limit)
}

// ConversationSince returns the conversation's metadata and up to limit of
// its messages with Seq > after, oldest first, with one statement (the
// conversation row joined to one index range of its messages), so both
// are of one snapshot without a transaction of their own. It returns
// chatmem.ErrNotFound for a conversation that does not exist or has
// expired.
func (s *Store) ConversationSince(ctx context.Context, key chatmem.Key, after int64, limit int) (chatmem.Conversation, []chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return chatmem.Conversation{}, nil, err
	}
	if err := storekit.CheckLimit(limit); err != nil {
		return chatmem.Conversation{}, nil, err
	}
	conv, msgs, err := s.conversationSince(ctx, key, after, limit)
	if err != nil {
		return chatmem.Conversation{}, nil, translate(ctx, err)
	}
	return conv, msgs, nil
}

func (s *Store) conversationSince(ctx context.Context, key chatmem.Key, after int64, limit int) (chatmem.Conversation, []chatmem.Message, error) {
	rows, err := s.r.query(ctx, selectConversationSince, key.Tenant, key.ID, clampedNanos(s.now()), after, limit)
	if err != nil {
		return chatmem.Conversation{}, nil, err
	}
	defer rows.Close()
	var (
		conv                                           conversationRow
		seq, tokens, msgCreated                        sql.NullInt64
		role, content, name, toolCalls, toolCallID, md sql.NullString
	)
	dest := append(conv.dest(), &seq, &role, &content, &name, &toolCalls, &toolCallID, &tokens, &msgCreated, &md)
	found := false
	msgs := []chatmem.Message{}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return chatmem.Conversation{}, nil, err
		}
		found = true
		if !seq.Valid {
			continue // the conversation has no message after after
		}
		m := chatmem.Message{Seq: seq.Int64, Content: content.String, Name: name.String, ToolCallID: toolCallID.String, Tokens: int(tokens.Int64)}
		if err := decodeMessage(&m, role.String, msgCreated.Int64, toolCalls, md); err != nil {
			return chatmem.Conversation{}, nil, err
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return chatmem.Conversation{}, nil, err
	}
	if !found {
		return chatmem.Conversation{}, nil, notFound(key)
	}
	// SQLite returns the subquery's rows in its order here (one
	// conversation row, the range read after it); a plan that did not
	// would cost a sort, not a wrong answer.
	bySeq := func(a, b chatmem.Message) int { return cmp.Compare(a.Seq, b.Seq) }
	if !slices.IsSortedFunc(msgs, bySeq) {
		slices.SortFunc(msgs, bySeq)
	}
	return conv.conversation(), msgs, nil
}

// System returns the conversation's system messages, oldest first. It
// returns chatmem.ErrNotFound for a conversation that does not exist or has
// expired.
func (s *Store) System(ctx context.Context, key chatmem.Key) ([]chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return s.readMessages(ctx, key, selectSystem, key.Tenant, key.ID)
}

// readMessages runs query in the snapshot in which the conversation is
// live.
func (s *Store) readMessages(ctx context.Context, key chatmem.Key, query string, args ...any) ([]chatmem.Message, error) {
	now := s.now()
	var out []chatmem.Message
	err := s.read(ctx, func(t tx) error {
		if _, err := liveConversation(t, key, now); err != nil {
			return err
		}
		var err error
		out, err = queryMessages(t, query, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// queryMessages runs query, which selects messageCols, and decodes the rows.
func queryMessages(t tx, query string, args ...any) ([]chatmem.Message, error) {
	rows, err := t.query(query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	msgs := []chatmem.Message{}
	for rows.Next() {
		var (
			m                   chatmem.Message
			role                string
			created             int64
			toolCalls, metadata sql.NullString
		)
		if err := rows.Scan(&m.Seq, &role, &m.Content, &m.Name, &toolCalls, &m.ToolCallID, &m.Tokens, &created, &metadata); err != nil {
			return nil, err
		}
		if err := decodeMessage(&m, role, created, toolCalls, metadata); err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

// decodeMessage sets m's fields that are not stored as they are: the role,
// the creation time, and the tool calls and metadata from their JSON.
func decodeMessage(m *chatmem.Message, role string, created int64, toolCalls, metadata sql.NullString) error {
	m.Role = chatmem.Role(role)
	m.CreatedAt = fromNanos(created)
	if toolCalls.Valid {
		if err := json.Unmarshal([]byte(toolCalls.String), &m.ToolCalls); err != nil {
			return fmt.Errorf("sqlite: message %d: decode tool calls: %w", m.Seq, err)
		}
	}
	if metadata.Valid {
		if err := json.Unmarshal([]byte(metadata.String), &m.Metadata); err != nil {
			return fmt.Errorf("sqlite: message %d: decode metadata: %w", m.Seq, err)
		}
	}
	return nil
}

package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// batch is an append's messages as the column arrays insertMessages
// unnests, plus the messages as Append returns them.
type batch struct {
	msgs                                        []chatmem.Message
	seq, tokens, cum, turn                      []int64
	role, name, toolCalls, toolCallID, metadata []string
	content                                     [][]byte
	createdAt                                   []time.Time
}

// encodeBatch checks that msgs can be stored as they are and encodes them
// (their index terms are not: IndexPending computes them). Sequence
// numbers and running totals are filled in by number, once the
// conversation's row is locked. A message that PostgreSQL cannot hold wraps
// chatmem.ErrInvalid.
func encodeBatch(msgs []chatmem.Message, now time.Time) (*batch, error) {
	n := len(msgs)
	// The columns of one type share an array: an append is two per turn.
	ints, strs := make([]int64, 4*n), make([]string, 5*n)
	b := &batch{
		msgs: make([]chatmem.Message, n),
		seq:  ints[:n:n], tokens: ints[n : 2*n : 2*n], cum: ints[2*n : 3*n : 3*n], turn: ints[3*n:],
		role: strs[:n:n], name: strs[n : 2*n : 2*n], toolCalls: strs[2*n : 3*n : 3*n],
		toolCallID: strs[3*n : 4*n : 4*n], metadata: strs[4*n:],
		content: make([][]byte, n), createdAt: make([]time.Time, n),
	}
	for i, m := range msgs {
		if err := storable(m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		m = m.Clone()
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		m.CreatedAt = dbTime(m.CreatedAt)
		b.msgs[i] = m
		b.role[i], b.name[i], b.toolCallID[i] = string(m.Role), m.Name, m.ToolCallID
		b.content[i] = []byte(m.Content)
		b.tokens[i] = int64(m.Tokens)
		b.createdAt[i] = m.CreatedAt
		if m.ToolCalls != nil {
			j, err := json.Marshal(m.ToolCalls)
			if err != nil {
				return nil, fmt.Errorf("message %d: tool calls: %w", i, err)
			}
			b.toolCalls[i] = string(j)
		}
		if m.Metadata != nil {
			j, err := json.Marshal(m.Metadata)
			if err != nil {
				return nil, fmt.Errorf("message %d: metadata: %w", i, err)
			}
			b.metadata[i] = string(j)
		}
	}
	return b, nil
}

// storable reports what the columns cannot hold: an unknown role (the
// indexes key on it), negative tokens (the running total must not go
// back), and NUL or invalid UTF-8 outside content (text and jsonb refuse
// them; encoding/json would silently replace invalid UTF-8).
func storable(m chatmem.Message) error {
	if err := storekit.CheckMessage(m); err != nil {
		return err
	}
	text := storableText
	if err := text("name", m.Name); err != nil {
		return err
	}
	if err := text("tool_call_id", m.ToolCallID); err != nil {
		return err
	}
	for _, c := range m.ToolCalls {
		for _, f := range []string{c.ID, c.Type, c.Function.Name, c.Function.Arguments} {
			if err := text("a tool call", f); err != nil {
				return err
			}
		}
	}
	for k, v := range m.Metadata {
		if err := text("a metadata key", k); err != nil {
			return err
		}
		if err := text("a metadata value", v); err != nil {
			return err
		}
	}
	return nil
}

// storableText reports, wrapping chatmem.ErrInvalid, a string that a text
// or jsonb column cannot hold: invalid UTF-8 (encoding/json would silently
// replace it) or NUL. field names it in the error.
func storableText(field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", chatmem.ErrInvalid, field)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s contains a NUL character, which PostgreSQL cannot store in text", chatmem.ErrInvalid, field)
	}
	return nil
}

// number assigns the batch the sequence numbers after conv.LastSeq, with
// the running totals, and advances conv's totals past it. It returns the
// messages as stored.
func (b *batch) number(conv *chatmem.Conversation) []chatmem.Message {
	for i := range b.msgs {
		m := &b.msgs[i]
		conv.LastSeq++
		m.Seq = conv.LastSeq
		switch m.Role {
		case chatmem.RoleSystem:
			conv.SystemTokens += int64(m.Tokens)
		case chatmem.RoleUser:
			conv.Turns++
			conv.Tokens += int64(m.Tokens)
		default:
			conv.Tokens += int64(m.Tokens)
		}
		b.seq[i], b.cum[i], b.turn[i] = m.Seq, conv.Tokens, conv.Turns
	}
	return b.msgs
}

// scanMessages reads rows of messageColumns.
func scanMessages(rows pgx.Rows) ([]chatmem.Message, error) {
	defer rows.Close()
	var msgs []chatmem.Message
	// The scan targets are reused from row to row, so that each row costs
	// no allocation beyond its own strings.
	var r messageRow
	dest := r.dest()
	for rows.Next() {
		r.m = chatmem.Message{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		m, err := r.message()
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

// messageRow holds the scan targets of one row of messageColumns.
type messageRow struct {
	m                            chatmem.Message
	tokens                       int64
	content, toolCalls, metadata []byte
}

// dest returns the scan targets of messageColumns, in their order.
func (r *messageRow) dest() []any {
	return []any{&r.m.Seq, &r.m.Role, &r.content, &r.m.Name, &r.toolCalls, &r.m.ToolCallID, &r.tokens, &r.m.CreatedAt, &r.metadata}
}

// message decodes the row scanned into r: the content, the token count,
// CreatedAt in UTC, and the tool calls and metadata from their JSON.
func (r *messageRow) message() (chatmem.Message, error) {
	m := r.m
	m.Content = string(r.content)
	m.Tokens = int(r.tokens)
	m.CreatedAt = m.CreatedAt.UTC()
	if r.toolCalls != nil {
		if err := json.Unmarshal(r.toolCalls, &m.ToolCalls); err != nil {
			return chatmem.Message{}, fmt.Errorf("message %d: tool calls: %w", m.Seq, err)
		}
	}
	if r.metadata != nil {
		if err := json.Unmarshal(r.metadata, &m.Metadata); err != nil {
			return chatmem.Message{}, fmt.Errorf("message %d: metadata: %w", m.Seq, err)
		}
	}
	return m, nil
}

// nullMessageRow holds the scan targets of messageColumns from the outer
// side of a join, where a row may have no message: every column is
// nullable, and a NULL seq means no message.
type nullMessageRow struct {
	seq, tokens            pgtype.Int8
	role, name, toolCallID pgtype.Text
	createdAt              pgtype.Timestamptz
	r                      messageRow // content, tool calls and metadata scan as for messageRow
}

// dest returns the scan targets of messageColumns, in their order.
func (n *nullMessageRow) dest() []any {
	return []any{&n.seq, &n.role, &n.r.content, &n.name, &n.r.toolCalls, &n.toolCallID, &n.tokens, &n.createdAt, &n.r.metadata}
}

// message decodes the row scanned into n as messageRow.message does. It
// reports false if the row has no message.
func (n *nullMessageRow) message() (chatmem.Message, bool, error) {
	if !n.seq.Valid {
		return chatmem.Message{}, false, nil
	}
	n.r.m = chatmem.Message{
		Seq: n.seq.Int64, Role: chatmem.Role(n.role.String), Name: n.name.String,
		ToolCallID: n.toolCallID.String, CreatedAt: n.createdAt.Time,
	}
	n.r.tokens = n.tokens.Int64
	m, err := n.r.message()
	return m, true, err
}

// dbTime is t as PostgreSQL keeps it: microseconds, in UTC, with no
// monotonic clock reading.
func dbTime(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// utcConversation returns c with its times in UTC, as reads return them.
func utcConversation(c chatmem.Conversation) chatmem.Conversation {
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	if !c.ExpiresAt.IsZero() {
		c.ExpiresAt = c.ExpiresAt.UTC()
	}
	return c
}

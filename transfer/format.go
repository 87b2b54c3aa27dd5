// Package transfer moves conversations out of a store and into another,
// losslessly, as chatmem NDJSON (format "chatmem/v1", described in
// docs/export-format.md): Export writes a tenant's conversations, Import
// reads them back into any store, Migrate streams them from one store to
// another, and Digest fingerprints one conversation so that two stores can
// be compared.
//
// A file is a header line {"format":"chatmem/v1"} followed, for each
// conversation, by its conversation record, its messages in sequence
// order, its summary (if any) and its facts with their history; a user's
// record (the user's facts with their history) stands before the first of
// the user's conversations, and the records of users with facts and no
// live conversation come last, ordered by user ID. The tenant
// is never in the file: it comes from the caller. Every time is written in
// UTC with microsecond precision (what every store keeps), so an export
// from one store, imported into another and exported again, is the same
// bytes.
package transfer

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
)

// Format is the version the header line names.
const Format = "chatmem/v1"

// The record types, the "type" field of every line after the header.
const (
	TypeConversation = "conversation"
	TypeMessage      = "message"
	TypeSummary      = "summary"
	TypeFact         = "fact"
	TypeUser         = "user"
)

// Header is the first line of a file.
type Header struct {
	Format string `json:"format"`
}

// ConversationRecord opens a conversation's block of records. LastSeq,
// Tokens, SystemTokens and Turns are derived from the messages that
// follow; an importer checks them rather than trusting them.
type ConversationRecord struct {
	Type         string    `json:"type"`
	ID           string    `json:"id"`
	User         string    `json:"user,omitempty"`
	Tokenizer    string    `json:"tokenizer"`
	LastSeq      int64     `json:"last_seq"`
	Tokens       int64     `json:"tokens"`
	SystemTokens int64     `json:"system_tokens"`
	Turns        int64     `json:"turns"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	ExpiresAt    time.Time `json:"expires_at,omitzero"`
}

// SummaryRecord is a conversation's rolling summary.
type SummaryRecord struct {
	Type       string    `json:"type"`
	Text       string    `json:"text"`
	CoversSeq  int64     `json:"covers_seq"`
	Tokens     int       `json:"tokens"`
	Summarizer string    `json:"summarizer"`
	CreatedAt  time.Time `json:"created_at"`
}

// FactRecord is one value a fact has had. A conversation's fact records
// come ordered by key, and each key's values oldest first: the last value
// of a key is its current one.
type FactRecord struct {
	Type       string    `json:"type"`
	Key        string    `json:"key"`
	Value      string    `json:"value"`
	SourceSeq  int64     `json:"source_seq,omitempty"`
	SetBy      string    `json:"set_by"`
	Confidence float64   `json:"confidence"`
	CreatedAt  time.Time `json:"created_at"`
}

// UserRecord is a user's facts, every value each has had: ordered by key,
// and each key's values oldest first (the last is the current one). It
// stands alone on its line, before the first of the user's conversations
// (by ID), or after every conversation for a user with none left; the
// binding of conversations to the user is in their records.
type UserRecord struct {
	Type  string           `json:"type"`
	ID    string           `json:"id"`
	Facts []UserFactRecord `json:"facts"`
}

// UserFactRecord is one value a user fact has had, with the conversation
// it was stated in (absent when the app set it without one). When a value
// was valid until, and what superseded it, follow from the next value.
type UserFactRecord struct {
	Key          string    `json:"key"`
	Value        string    `json:"value"`
	Conversation string    `json:"conversation,omitempty"`
	SourceSeq    int64     `json:"source_seq,omitempty"`
	SetBy        string    `json:"set_by"`
	Confidence   float64   `json:"confidence"`
	CreatedAt    time.Time `json:"created_at"`
}

func userFactRecord(f chatmem.Fact) UserFactRecord {
	return UserFactRecord{
		Key: f.Key, Value: f.Value, Conversation: f.Conversation, SourceSeq: f.SourceSeq, SetBy: f.SetBy,
		Confidence: f.Confidence, CreatedAt: stamp(f.CreatedAt),
	}
}

func (r UserFactRecord) fact() chatmem.Fact {
	return chatmem.Fact{Key: r.Key, Value: r.Value, Conversation: r.Conversation, SourceSeq: r.SourceSeq, SetBy: r.SetBy,
		Confidence: r.Confidence, CreatedAt: r.CreatedAt}
}

// stamp is the one precision and zone every time is written in.
func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

func conversationRecord(c chatmem.Conversation) ConversationRecord {
	return ConversationRecord{
		Type: TypeConversation, ID: c.Key.ID, User: c.User, Tokenizer: c.Tokenizer, LastSeq: c.LastSeq,
		Tokens: c.Tokens, SystemTokens: c.SystemTokens, Turns: c.Turns,
		CreatedAt: stamp(c.CreatedAt), UpdatedAt: stamp(c.UpdatedAt), ExpiresAt: stamp(c.ExpiresAt),
	}
}

func summaryRecord(s chatmem.Summary) SummaryRecord {
	return SummaryRecord{
		Type: TypeSummary, Text: s.Text, CoversSeq: s.CoversSeq, Tokens: s.Tokens,
		Summarizer: s.Summarizer, CreatedAt: stamp(s.CreatedAt),
	}
}

func (r SummaryRecord) summary() chatmem.Summary {
	return chatmem.Summary{Text: r.Text, CoversSeq: r.CoversSeq, Tokens: r.Tokens, Summarizer: r.Summarizer, CreatedAt: r.CreatedAt}
}

func factRecord(f chatmem.Fact) FactRecord {
	return FactRecord{
		Type: TypeFact, Key: f.Key, Value: f.Value, SourceSeq: f.SourceSeq, SetBy: f.SetBy,
		Confidence: f.Confidence, CreatedAt: stamp(f.CreatedAt),
	}
}

func (r FactRecord) fact() chatmem.Fact {
	return chatmem.Fact{Key: r.Key, Value: r.Value, SourceSeq: r.SourceSeq, SetBy: r.SetBy, Confidence: r.Confidence, CreatedAt: r.CreatedAt}
}

// messageRecord is a message record's wire shape: {"type":"message"}
// followed by the fields of chatmem.Message's own JSON, in its order (seq,
// role, content, name, tool_calls, tool_call_id, tokens, created_at,
// metadata), so the record and the API show a message alike. It is
// encoded here rather than by chatmem.Message.MarshalJSON, which escapes
// <, > and & as \u003c (six bytes for one) through json.Marshal.
type messageRecord struct {
	Type       string             `json:"type,omitempty"`
	Seq        int64              `json:"seq,omitempty"`
	Role       chatmem.Role       `json:"role"`
	Content    *string            `json:"content"` // nil: null, an assistant message with only tool calls
	Name       string             `json:"name,omitempty"`
	ToolCalls  []chatmem.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string             `json:"tool_call_id,omitempty"`
	Tokens     int                `json:"tokens,omitempty"`
	CreatedAt  time.Time          `json:"created_at,omitzero"`
	Metadata   map[string]string  `json:"metadata,omitempty"`
	// Receipt is the receipt kept with the message (chatmem.Receipt's
	// JSON), if any: export files only.
	Receipt json.RawMessage `json:"receipt,omitempty"`
}

func newMessageRecord(typ string, m chatmem.Message) messageRecord {
	r := messageRecord{
		Type: typ, Seq: m.Seq, Role: m.Role, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID,
		Tokens: m.Tokens, CreatedAt: m.CreatedAt, Metadata: m.Metadata,
	}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		r.Content = &m.Content
	}
	return r
}

// messageLine encodes m as a message record, its time in the export's
// precision.
func messageLine(m chatmem.Message, receipt []byte) ([]byte, error) {
	m.CreatedAt = stamp(m.CreatedAt)
	r := newMessageRecord(TypeMessage, m)
	r.Receipt = receipt
	return marshalLine(r)
}

// receiptsOf returns the receipts st keeps with msgs, a run of messages
// of key in seq order, by seq (none if st keeps no receipts): one read.
func receiptsOf(ctx context.Context, st chatmem.Store, key chatmem.Key, msgs []chatmem.Message) (map[int64][]byte, error) {
	rs, ok := st.(chatmem.ReceiptStore)
	if !ok || len(msgs) == 0 {
		return nil, nil
	}
	first, last := msgs[0].Seq, msgs[len(msgs)-1].Seq
	got, err := rs.Receipts(ctx, key, first-1, int(last-first+1))
	if err != nil {
		return nil, fmt.Errorf("receipts of %s: %w", key, err)
	}
	out := make(map[int64][]byte, len(got))
	for _, r := range got {
		if r.Seq <= last {
			// The file holds the receipt's JSON, whatever form the store
			// keeps it in.
			rc, err := chatmem.DecodeReceipt(r.Data)
			if err != nil {
				return nil, fmt.Errorf("receipt of %s at %d: %w", key, r.Seq, err)
			}
			if out[r.Seq], err = json.Marshal(rc); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// marshalLine is json.Marshal without HTML escaping: every line an export
// writes is encoded by it, so that a <, > or & takes one byte in the file,
// not the six of \u003c, and a message's record stays within the line
// bound of the limits it was appended under (maxLineBytes).
func marshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// decodeStrict decodes one line into v, refusing unknown fields and
// anything after the value.
func decodeStrict(line []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// decodeMessage decodes a message record's line.
func decodeMessage(line []byte) (chatmem.Message, []byte, error) {
	var m chatmem.Message
	// chatmem.Message decodes leniently (as the API does); a strict pass
	// over its wire fields catches misspelt ones.
	var strict struct {
		Type       string             `json:"type"`
		Seq        int64              `json:"seq"`
		Role       chatmem.Role       `json:"role"`
		Content    json.RawMessage    `json:"content"`
		Name       string             `json:"name"`
		ToolCalls  []chatmem.ToolCall `json:"tool_calls"`
		ToolCallID string             `json:"tool_call_id"`
		Tokens     int                `json:"tokens"`
		CreatedAt  time.Time          `json:"created_at"`
		Metadata   map[string]string  `json:"metadata"`
		Receipt    json.RawMessage    `json:"receipt"`
	}
	if err := decodeStrict(line, &strict); err != nil {
		return m, nil, err
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return m, nil, err
	}
	if len(strict.Receipt) == 0 || string(strict.Receipt) == "null" {
		return m, nil, nil
	}
	// Checked, and in one form (its JSON, as encoding/json writes it),
	// whichever way it was written.
	r, err := chatmem.DecodeReceipt(strict.Receipt)
	if err != nil {
		return m, nil, err
	}
	b, err := json.Marshal(r)
	return m, b, err
}

// LineError is a malformed or inconsistent line of an import.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap makes a LineError match chatmem.ErrInvalid.
func (e *LineError) Unwrap() []error { return []error{chatmem.ErrInvalid, e.Err} }

// Schema is the JSON Schema (draft 2020-12) of one line of a chatmem/v1
// file, the header or any record; docs/export-format.md describes it.
//
//go:embed schema.json
var Schema []byte

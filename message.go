package chatmem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Role is who wrote a message, in the OpenAI chat vocabulary.
type Role string

// The roles chatmem stores. Any other role is invalid.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Valid reports whether r is one of the four known roles.
func (r Role) Valid() bool {
	switch r {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		return true
	}
	return false
}

// ToolCall is one function call requested by an assistant message, in the
// OpenAI wire shape.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function a ToolCall invokes and carries its
// arguments as the model produced them (usually a JSON object as text).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one chat message. Role, Content, Name, ToolCalls and ToolCallID
// follow the OpenAI chat format; Seq, Tokens and CreatedAt are set when the
// message is appended to a conversation.
type Message struct {
	// Seq is the message's sequence number in its conversation, from 1,
	// dense and in append order. Zero before the message is stored.
	Seq        int64      `json:"seq,omitempty"`
	Role       Role       `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Tokens is the message's token count (content, tool calls and framing)
	// under the conversation's counter, computed once at append.
	Tokens    int               `json:"tokens,omitempty"`
	CreatedAt time.Time         `json:"created_at,omitzero"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// messageJSON is Message's wire shape with content left raw, because OpenAI
// clients send content as a string, as null (assistant tool calls) or as an
// array of content parts.
type messageJSON struct {
	Seq        int64             `json:"seq,omitempty"`
	Role       Role              `json:"role"`
	Content    json.RawMessage   `json:"content"`
	Name       string            `json:"name,omitempty"`
	ToolCalls  []ToolCall        `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	Tokens     int               `json:"tokens,omitempty"`
	CreatedAt  time.Time         `json:"created_at,omitzero"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

// UnmarshalJSON accepts content as a string, as null, or as an array of text
// parts ({"type":"text","text":"..."}), which are joined with newlines. Other
// part types (images, audio) are refused with ErrInvalid: chatmem stores text.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w messageJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	content, err := decodeContent(w.Content)
	if err != nil {
		return err
	}
	*m = Message{
		Seq: w.Seq, Role: w.Role, Content: content, Name: w.Name,
		ToolCalls: w.ToolCalls, ToolCallID: w.ToolCallID, Tokens: w.Tokens,
		CreatedAt: w.CreatedAt, Metadata: w.Metadata,
	}
	return nil
}

// MarshalJSON writes content as a string, or as null for an assistant message
// that carries only tool calls, as the OpenAI API does.
func (m Message) MarshalJSON() ([]byte, error) {
	content := []byte("null")
	if m.Content != "" || len(m.ToolCalls) == 0 {
		var err error
		if content, err = json.Marshal(m.Content); err != nil {
			return nil, err
		}
	}
	return json.Marshal(messageJSON{
		Seq: m.Seq, Role: m.Role, Content: content, Name: m.Name,
		ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Tokens: m.Tokens,
		CreatedAt: m.CreatedAt, Metadata: m.Metadata,
	})
}

func decodeContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", err
		}
		var buf bytes.Buffer
		for i, p := range parts {
			if p.Type != "text" {
				return "", fmt.Errorf("%w: content part %d has type %q; only text parts are supported", ErrInvalid, i, p.Type)
			}
			if i > 0 {
				buf.WriteByte('\n')
			}
			buf.WriteString(p.Text)
		}
		return buf.String(), nil
	}
	return "", fmt.Errorf("%w: content must be a string, null or an array of text parts", ErrInvalid)
}

// Clone returns a deep copy of m, so that stores and callers never share
// slices or maps.
func (m Message) Clone() Message {
	m.ToolCalls = slices.Clone(m.ToolCalls)
	m.Metadata = maps.Clone(m.Metadata)
	return m
}

// Limits bounds what one message and one append may hold. The zero value
// means the defaults below; a negative field means no limit.
type Limits struct {
	MaxContentBytes int // default 256 KiB
	MaxToolCalls    int // default 128
	MaxBatch        int // messages per append; default 1000
	MaxMetadata     int // metadata entries per message; default 64
}

// DefaultLimits are the limits a zero Limits stands for.
var DefaultLimits = Limits{MaxContentBytes: 256 << 10, MaxToolCalls: 128, MaxBatch: 1000, MaxMetadata: 64}

func (l Limits) withDefaults() Limits {
	pick := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	return Limits{
		MaxContentBytes: pick(l.MaxContentBytes, DefaultLimits.MaxContentBytes),
		MaxToolCalls:    pick(l.MaxToolCalls, DefaultLimits.MaxToolCalls),
		MaxBatch:        pick(l.MaxBatch, DefaultLimits.MaxBatch),
		MaxMetadata:     pick(l.MaxMetadata, DefaultLimits.MaxMetadata),
	}
}

func over(n, limit int) bool { return limit >= 0 && n > limit }

// Validate checks one message on its own: a known role, valid UTF-8, content
// present (an assistant message may carry tool calls instead), tool fields
// only where they belong, sizes within l. It wraps ErrInvalid or ErrTooLarge.
// Whether a tool message answers a call in the history is checked by
// ValidateHistory.
func (m Message) Validate(l Limits) error {
	l = l.withDefaults()
	if !m.Role.Valid() {
		return fmt.Errorf("%w: unknown role %q (want system, user, assistant or tool)", ErrInvalid, m.Role)
	}
	if !utf8.ValidString(m.Content) || !utf8.ValidString(m.Name) {
		return fmt.Errorf("%w: %s message is not valid UTF-8", ErrInvalid, m.Role)
	}
	// NUL has no place in chat text, and PostgreSQL text cannot hold it:
	// refusing it here makes every store behave the same.
	if strings.ContainsRune(m.Content, 0) || strings.ContainsRune(m.Name, 0) {
		return fmt.Errorf("%w: %s message contains a NUL character", ErrInvalid, m.Role)
	}
	if over(len(m.Content), l.MaxContentBytes) {
		return fmt.Errorf("%w: %s message content is %d bytes, over the limit of %d", ErrTooLarge, m.Role, len(m.Content), l.MaxContentBytes)
	}
	if over(len(m.ToolCalls), l.MaxToolCalls) {
		return fmt.Errorf("%w: %d tool calls, over the limit of %d", ErrTooLarge, len(m.ToolCalls), l.MaxToolCalls)
	}
	if over(len(m.Metadata), l.MaxMetadata) {
		return fmt.Errorf("%w: %d metadata entries, over the limit of %d", ErrTooLarge, len(m.Metadata), l.MaxMetadata)
	}
	for k, v := range m.Metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) || strings.ContainsRune(k+v, 0) {
			return fmt.Errorf("%w: metadata %q is not valid UTF-8 or contains a NUL character", ErrInvalid, k)
		}
	}
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
		return fmt.Errorf("%w: only assistant messages carry tool_calls, not %s", ErrInvalid, m.Role)
	}
	if m.Content == "" && len(m.ToolCalls) == 0 {
		return fmt.Errorf("%w: %s message has empty content", ErrInvalid, m.Role)
	}
	switch {
	case m.Role == RoleTool && m.ToolCallID == "":
		return fmt.Errorf("%w: tool message without tool_call_id", ErrInvalid)
	case m.Role != RoleTool && m.ToolCallID != "":
		return fmt.Errorf("%w: tool_call_id on a %s message", ErrInvalid, m.Role)
	}
	seen := make(map[string]bool, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		if c.ID == "" || c.Function.Name == "" {
			return fmt.Errorf("%w: tool call %d needs an id and a function name", ErrInvalid, i)
		}
		if seen[c.ID] {
			return fmt.Errorf("%w: tool call id %q repeated in one message", ErrInvalid, c.ID)
		}
		seen[c.ID] = true
		for _, f := range []string{c.ID, c.Function.Name, c.Function.Arguments} {
			if !utf8.ValidString(f) || strings.ContainsRune(f, 0) {
				return fmt.Errorf("%w: tool call %d is not valid UTF-8 or contains a NUL character", ErrInvalid, i)
			}
		}
	}
	return nil
}

// ValidateHistory checks each message with Validate and checks that every
// tool message answers a call of the nearest preceding assistant message with
// tool calls, with only tool messages between them, and answers it once (the
// rule the OpenAI API enforces). prior is the history before msgs (only its
// trailing tool unit matters; see TrailingUnit); it may be nil.
func ValidateHistory(prior, msgs []Message, l Limits) error {
	l = l.withDefaults()
	if over(len(msgs), l.MaxBatch) {
		return fmt.Errorf("%w: %d messages in one append, over the limit of %d", ErrTooLarge, len(msgs), l.MaxBatch)
	}
	open := openCalls(prior)
	for i, m := range msgs {
		if err := m.Validate(l); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		switch {
		case m.Role == RoleTool:
			if !open[m.ToolCallID] {
				return fmt.Errorf("message %d: %w: tool message answers %q, which is not an unanswered call of the preceding assistant message", i, ErrInvalid, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		case len(m.ToolCalls) > 0:
			open = make(map[string]bool, len(m.ToolCalls))
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		default:
			open = nil
		}
	}
	return nil
}

// openCalls returns the call IDs of the last assistant tool-call message in
// msgs that are not yet answered, provided only tool messages follow it.
func openCalls(msgs []Message) map[string]bool {
	start := TrailingUnit(msgs)
	if start < 0 {
		return nil
	}
	open := make(map[string]bool)
	for _, c := range msgs[start].ToolCalls {
		open[c.ID] = true
	}
	for _, m := range msgs[start+1:] {
		delete(open, m.ToolCallID)
	}
	return open
}

// TrailingUnit returns the index of the assistant message with tool calls
// that msgs ends in (followed only by tool messages), or -1 if msgs does not
// end in such a unit.
func TrailingUnit(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		switch {
		case msgs[i].Role == RoleTool:
			continue
		case len(msgs[i].ToolCalls) > 0:
			return i
		default:
			return -1
		}
	}
	return -1
}

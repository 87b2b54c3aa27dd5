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
	// encoding/json would turn invalid UTF-8 into U+FFFD without a word:
	// refuse it instead, in every field.
	if err := CheckJSONText(b); err != nil {
		return fmt.Errorf("message: %w", err)
	}
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

// CheckJSONText checks that the JSON text b holds only valid UTF-8 and no
// \u escape of a lone surrogate, the two things encoding/json silently
// replaces with U+FFFD when it decodes a string: a request that carries
// them is refused rather than stored rewritten. It wraps ErrInvalid and
// names the byte offset. It does not check that b is valid JSON.
func CheckJSONText(b []byte) error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrInvalid, i)
	}
	// Backslashes occur only inside strings in JSON, so escapes can be
	// found without tracking where strings start and end.
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] != 'u' {
			i++ // skip the escaped character (it may be a backslash)
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			continue // not JSON; the decoder says so
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("%w: \\u%04X at byte %d is a lone low surrogate, not a character", ErrInvalid, r, i)
		case r >= 0xD800 && r <= 0xDBFF:
			var lo rune
			ok := i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u'
			if ok {
				lo, ok = hex4(b, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("%w: \\u%04X at byte %d is a high surrogate without its low half, not a character", ErrInvalid, r, i)
			}
			i += 11
		default:
			i += 5
		}
	}
	return nil
}

// hex4 parses the four hex digits of b at i.
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
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

// Limits bounds what one message and one append may hold: every part of a
// message that is stored and sent back, not only its content. The zero
// value of a field means its default (DefaultLimits); a negative field
// means no limit.
type Limits struct {
	// MaxContentBytes bounds a message's content (content parts joined).
	// Default 256 KiB.
	MaxContentBytes int
	// MaxToolCalls bounds the tool calls of one message. Default 128.
	MaxToolCalls int
	// MaxBatch bounds the messages of one append. Default 1000.
	MaxBatch int
	// MaxMetadata bounds the metadata entries of one message. Default 64.
	MaxMetadata int
	// MaxMetadataBytes bounds the bytes of a message's metadata, keys and
	// values together. Default 16 KiB.
	MaxMetadataBytes int
	// MaxMetadataKeyBytes bounds one metadata key. Default 128.
	MaxMetadataKeyBytes int
	// MaxNameBytes bounds the short strings of a message: name,
	// tool_call_id, and each tool call's id and function name.
	// Default 256.
	MaxNameBytes int
	// MaxArgumentsBytes bounds the arguments of a message's tool calls,
	// all of them together. Default 256 KiB.
	MaxArgumentsBytes int
}

// DefaultLimits are the limits a zero Limits stands for.
var DefaultLimits = Limits{
	MaxContentBytes: 256 << 10, MaxToolCalls: 128, MaxBatch: 1000, MaxMetadata: 64,
	MaxMetadataBytes: 16 << 10, MaxMetadataKeyBytes: 128, MaxNameBytes: 256, MaxArgumentsBytes: 256 << 10,
}

// NoLimits lifts every limit, for messages that are checked but not
// stored (a caller's own limits apply to them).
var NoLimits = Limits{
	MaxContentBytes: -1, MaxToolCalls: -1, MaxBatch: -1, MaxMetadata: -1,
	MaxMetadataBytes: -1, MaxMetadataKeyBytes: -1, MaxNameBytes: -1, MaxArgumentsBytes: -1,
}

func (l Limits) withDefaults() Limits {
	pick := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	d := DefaultLimits
	return Limits{
		MaxContentBytes:     pick(l.MaxContentBytes, d.MaxContentBytes),
		MaxToolCalls:        pick(l.MaxToolCalls, d.MaxToolCalls),
		MaxBatch:            pick(l.MaxBatch, d.MaxBatch),
		MaxMetadata:         pick(l.MaxMetadata, d.MaxMetadata),
		MaxMetadataBytes:    pick(l.MaxMetadataBytes, d.MaxMetadataBytes),
		MaxMetadataKeyBytes: pick(l.MaxMetadataKeyBytes, d.MaxMetadataKeyBytes),
		MaxNameBytes:        pick(l.MaxNameBytes, d.MaxNameBytes),
		MaxArgumentsBytes:   pick(l.MaxArgumentsBytes, d.MaxArgumentsBytes),
	}
}

func over(n, limit int) bool { return limit >= 0 && n > limit }

// Validate checks one message on its own: a known role, valid UTF-8 in
// every string, content present (an assistant message may carry tool calls
// instead), tool fields only where they belong, every part within l (the
// error names the field and the limit), and a CreatedAt, if set, within
// MinTime..MaxTime. It wraps ErrInvalid or ErrTooLarge. Whether a tool
// message answers a call in the history is checked by ValidateHistory.
//
// It is over 80 lines on purpose: a flat list of independent checks, one
// a field, in the order of the fields, so that every rule a message must
// meet reads in one place.
func (m Message) Validate(l Limits) error {
	l = l.withDefaults()
	if !m.Role.Valid() {
		return fmt.Errorf("%w: unknown role %q (want system, user, assistant or tool)", ErrInvalid, m.Role)
	}
	// NUL has no place in chat text, and PostgreSQL text cannot hold it:
	// refusing it here makes every store behave the same.
	text := func(field, v string, limit int) error {
		switch {
		case !utf8.ValidString(v):
			return fmt.Errorf("%w: %s message %s is not valid UTF-8", ErrInvalid, m.Role, field)
		case strings.ContainsRune(v, 0):
			return fmt.Errorf("%w: %s message %s contains a NUL character", ErrInvalid, m.Role, field)
		case over(len(v), limit):
			return fmt.Errorf("%w: %s message %s is %d bytes, over the limit of %d", ErrTooLarge, m.Role, field, len(v), limit)
		}
		return nil
	}
	if err := text("content", m.Content, l.MaxContentBytes); err != nil {
		return err
	}
	if err := text("name", m.Name, l.MaxNameBytes); err != nil {
		return err
	}
	if err := text("tool_call_id", m.ToolCallID, l.MaxNameBytes); err != nil {
		return err
	}
	if over(len(m.ToolCalls), l.MaxToolCalls) {
		return fmt.Errorf("%w: %d tool calls, over the limit of %d", ErrTooLarge, len(m.ToolCalls), l.MaxToolCalls)
	}
	if over(len(m.Metadata), l.MaxMetadata) {
		return fmt.Errorf("%w: %d metadata entries, over the limit of %d", ErrTooLarge, len(m.Metadata), l.MaxMetadata)
	}
	metaBytes := 0
	var keys []string // sorted, for the same error every time; none to sort in most messages
	if len(m.Metadata) > 0 {
		keys = slices.Sorted(maps.Keys(m.Metadata))
	}
	for _, k := range keys {
		if err := text("metadata key", k, l.MaxMetadataKeyBytes); err != nil {
			return fmt.Errorf("%w (key %q)", err, truncate(k, 64))
		}
		if err := text(fmt.Sprintf("metadata[%q]", k), m.Metadata[k], -1); err != nil {
			return err
		}
		metaBytes += len(k) + len(m.Metadata[k])
	}
	if over(metaBytes, l.MaxMetadataBytes) {
		return fmt.Errorf("%w: %s message metadata is %d bytes (keys and values), over the limit of %d", ErrTooLarge, m.Role, metaBytes, l.MaxMetadataBytes)
	}
	if err := ValidateTime("created_at", m.CreatedAt); err != nil {
		return err
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
	if len(m.ToolCalls) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(m.ToolCalls))
	argBytes := 0
	for i, c := range m.ToolCalls {
		for _, f := range []struct {
			name  string
			v     string
			limit int
		}{{"id", c.ID, l.MaxNameBytes}, {"function.name", c.Function.Name, l.MaxNameBytes}, {"function.arguments", c.Function.Arguments, -1}} {
			if err := text(fmt.Sprintf("tool call %d %s", i, f.name), f.v, f.limit); err != nil {
				return err
			}
		}
		if c.ID == "" || c.Function.Name == "" {
			return fmt.Errorf("%w: tool call %d needs an id and a function name", ErrInvalid, i)
		}
		if seen[c.ID] {
			return fmt.Errorf("%w: tool call id %q repeated in one message", ErrInvalid, c.ID)
		}
		seen[c.ID] = true
		argBytes += len(c.Function.Arguments)
	}
	if over(argBytes, l.MaxArgumentsBytes) {
		return fmt.Errorf("%w: %s message tool call arguments are %d bytes, over the limit of %d", ErrTooLarge, m.Role, argBytes, l.MaxArgumentsBytes)
	}
	return nil
}

// truncate returns s cut to at most n bytes, for quoting in errors.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// The range of times (created_at) every store keeps exactly: SQLite and
// Redis hold Unix nanoseconds in an int64 (1677..2262), PostgreSQL
// microseconds. Memory.Append keeps times in UTC at microsecond precision
// for the same reason.
var (
	// MinTime is the earliest time a message or fact may carry.
	MinTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	// MaxTime is the first time past the range.
	MaxTime = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// ValidateTime checks that t, unless zero, lies in MinTime..MaxTime
// (MaxTime excluded); field names it in the error, which wraps ErrInvalid.
func ValidateTime(field string, t time.Time) error {
	if t.IsZero() || !t.Before(MinTime) && t.Before(MaxTime) {
		return nil
	}
	return fmt.Errorf("%w: %s %s is outside the range every store keeps, %s to %s (UTC, excluded)", ErrInvalid, field,
		t.Format(time.RFC3339Nano), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
}

// ValidateHistory checks each message with Validate and checks that every
// tool message answers a call of the nearest preceding assistant message with
// tool calls, with only tool messages between them, and answers it once (the
// rule the OpenAI API enforces). prior is the history before msgs (only its
// trailing tool unit matters; see TrailingUnit); it may be nil.
func ValidateHistory(prior, msgs []Message, l Limits) error {
	return validateHistory(prior, msgs, l, true)
}

// validateHistory is ValidateHistory; each false leaves out the check of
// each message on its own, for messages checked already (Memory.Append).
func validateHistory(prior, msgs []Message, l Limits, each bool) error {
	l = l.withDefaults()
	if over(len(msgs), l.MaxBatch) {
		return fmt.Errorf("%w: %d messages in one append, over the limit of %d", ErrTooLarge, len(msgs), l.MaxBatch)
	}
	open := openCalls(prior)
	for i, m := range msgs {
		if each {
			if err := m.Validate(l); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
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

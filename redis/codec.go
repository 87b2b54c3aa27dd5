package redis

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/jsonstr"
)

// Messages are stored as JSON objects (readable with redis-cli), written by
// encoding/json from storedRecord, with the seq put in front by the append
// script:
//
//	{"seq":7,"role":"user","content":"hi","tokens":2,"created_at":"2025-01-02T03:04:05.678901Z"}
//
// Tail decodes a window of them on every turn, and encoding/json's
// reflection costs more than the read itself, so decodeRecord scans that
// known shape directly. Anything it does not expect (another key, a
// malformed or unusual value) sends the whole record to encoding/json, so
// the scanner is a shortcut, never a second definition of the format.

// record is a message as stored.
type record struct {
	Seq        int64              `json:"seq"`
	Role       chatmem.Role       `json:"role"`
	Content    string             `json:"content,omitempty"`
	Name       string             `json:"name,omitempty"`
	ToolCalls  []chatmem.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string             `json:"tool_call_id,omitempty"`
	Tokens     int                `json:"tokens"`
	CreatedAt  time.Time          `json:"created_at,omitzero"`
	Metadata   map[string]string  `json:"metadata,omitempty"`
}

// storedRecord is record without seq: what Append hands the script, which
// puts the seq in front. Its first field is always present, so the JSON
// object never starts with "}".
type storedRecord struct {
	Role       chatmem.Role       `json:"role"`
	Content    string             `json:"content,omitempty"`
	Name       string             `json:"name,omitempty"`
	ToolCalls  []chatmem.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string             `json:"tool_call_id,omitempty"`
	Tokens     int                `json:"tokens"`
	CreatedAt  time.Time          `json:"created_at,omitzero"`
	Metadata   map[string]string  `json:"metadata,omitempty"`
}

// encodeRecord writes m as encoding/json writes its storedRecord, byte for
// byte (TestEncodeRecord, FuzzEncodeRecord): every append encodes its
// messages, and the reflection of json.Marshal cost a Redis turn more
// than the rest of its work on the client. The nested values (tool calls,
// metadata) go to encoding/json, and so does a record whose time is not
// in UTC (Append stores UTC) or outside RFC 3339's years.
func encodeRecord(m chatmem.Message) ([]byte, error) { return encodeRecordAt(0, m) }

// encodeRecordAt is encodeRecord with "seq":seq in front when seq > 0, as
// the append script would put it: the record as stored, for an append
// that knows the seq its message gets.
func encodeRecordAt(seq int64, m chatmem.Message) ([]byte, error) {
	b := make([]byte, 0, 80+len(m.Content)+len(m.Name)+len(m.ToolCallID))
	b = append(b, '{')
	if seq > 0 {
		b = append(strconv.AppendInt(append(b, `"seq":`...), seq, 10), ',')
	}
	if _, offset := m.CreatedAt.Zone(); offset != 0 || m.CreatedAt.Year() < 0 || m.CreatedAt.Year() > 9999 {
		// RFC 3339's limits, or an error.
		r, err := jsonRecord(m)
		if err != nil {
			return nil, err
		}
		return append(b, r[1:]...), nil
	}
	b = append(b, `"role":`...)
	b = jsonstr.Append(b, string(m.Role))
	if m.Content != "" {
		b = jsonstr.Append(append(b, `,"content":`...), m.Content)
	}
	if m.Name != "" {
		b = jsonstr.Append(append(b, `,"name":`...), m.Name)
	}
	if len(m.ToolCalls) > 0 {
		calls, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"tool_calls":`...), calls...)
	}
	if m.ToolCallID != "" {
		b = jsonstr.Append(append(b, `,"tool_call_id":`...), m.ToolCallID)
	}
	b = strconv.AppendInt(append(b, `,"tokens":`...), int64(m.Tokens), 10)
	if !m.CreatedAt.IsZero() {
		b = append(b, `,"created_at":"`...)
		b = append(m.CreatedAt.AppendFormat(b, time.RFC3339Nano), '"')
	}
	if len(m.Metadata) > 0 {
		meta, err := json.Marshal(m.Metadata)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"metadata":`...), meta...)
	}
	return append(b, '}'), nil
}

// jsonRecord is encodeRecord by encoding/json.
func jsonRecord(m chatmem.Message) ([]byte, error) {
	return json.Marshal(storedRecord{
		Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls,
		ToolCallID: m.ToolCallID, Tokens: m.Tokens, CreatedAt: m.CreatedAt, Metadata: m.Metadata,
	})
}

// decodeRecord decodes one stored message.
func decodeRecord(s string) (chatmem.Message, error) {
	if m, ok := scanRecord(s); ok {
		return m, nil
	}
	var r record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return chatmem.Message{}, err
	}
	return chatmem.Message{
		Seq: r.Seq, Role: r.Role, Content: r.Content, Name: r.Name, ToolCalls: r.ToolCalls,
		ToolCallID: r.ToolCallID, Tokens: r.Tokens, CreatedAt: r.CreatedAt, Metadata: r.Metadata,
	}, nil
}

// decodeMessages decodes a script's list of stored messages.
func decodeMessages(v any) ([]chatmem.Message, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected message list %T", v)
	}
	out := make([]chatmem.Message, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected message %T", item)
		}
		m, err := decodeRecord(s)
		if err != nil {
			return nil, fmt.Errorf("decode stored message: %w", err)
		}
		out[i] = m
	}
	return out, nil
}

// decodeRecords decodes stored messages as LRANGE returns them.
func decodeRecords(list []string) ([]chatmem.Message, error) {
	out := make([]chatmem.Message, len(list))
	for i, s := range list {
		m, err := decodeRecord(s)
		if err != nil {
			return nil, fmt.Errorf("decode stored message: %w", err)
		}
		out[i] = m
	}
	return out, nil
}

// recordSeq reads the seq of a stored message, which the append script
// writes first.
func recordSeq(s string) (int64, bool) {
	const prefix = `{"seq":`
	if !strings.HasPrefix(s, prefix) {
		return 0, false
	}
	sc := scanner{s: s, i: len(prefix)}
	return sc.int()
}

// scanRecord decodes the JSON object s in the shape storedRecord produces,
// reporting false for anything else.
func scanRecord(s string) (m chatmem.Message, ok bool) {
	sc := scanner{s: s}
	if !sc.byte('{') {
		return m, false
	}
	if sc.byte('}') {
		return m, sc.i == len(s)
	}
	for {
		key, ok := sc.plainString()
		if !ok || !sc.byte(':') {
			return m, false
		}
		switch key {
		case "seq":
			m.Seq, ok = sc.int()
		case "tokens":
			var n int64
			n, ok = sc.int()
			m.Tokens = int(n)
		case "role":
			var r string
			r, ok = sc.string()
			m.Role = chatmem.Role(r)
		case "content":
			m.Content, ok = sc.string()
		case "name":
			m.Name, ok = sc.string()
		case "tool_call_id":
			m.ToolCallID, ok = sc.string()
		case "created_at":
			start := sc.i
			var text string
			if text, ok = sc.plainString(); ok {
				if m.CreatedAt, ok = parseUTC(text); !ok {
					// The very parser encoding/json would use, on the
					// quoted text.
					ok = m.CreatedAt.UnmarshalJSON([]byte(s[start:sc.i])) == nil
				}
			}
		case "tool_calls":
			// Decoded into a variable of their own: a pointer into m
			// would move every record's m to the heap.
			calls := m.ToolCalls // as encoding/json, on a repeated key
			ok = sc.nested(&calls)
			m.ToolCalls = calls
		case "metadata":
			meta := m.Metadata
			ok = sc.nested(&meta)
			m.Metadata = meta
		default:
			return m, false
		}
		switch {
		case !ok:
			return m, false
		case sc.byte(','):
		case sc.byte('}'):
			return m, sc.i == len(s)
		default:
			return m, false
		}
	}
}

// scanner reads the compact JSON encoding/json writes: no whitespace.
type scanner struct {
	s string
	i int
}

func (sc *scanner) byte(c byte) bool {
	if sc.i < len(sc.s) && sc.s[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// int reads an integer as JSON writes it (no leading zeros, no exponent).
func (sc *scanner) int() (int64, bool) {
	j := sc.i
	if j < len(sc.s) && sc.s[j] == '-' {
		j++
	}
	digits := j
	for j < len(sc.s) && sc.s[j] >= '0' && sc.s[j] <= '9' {
		j++
	}
	if j-digits > 1 && sc.s[digits] == '0' {
		return 0, false
	}
	n, err := strconv.ParseInt(sc.s[sc.i:j], 10, 64)
	sc.i = j
	return n, err == nil
}

// plainString reads a string without escapes (an object key).
func (sc *scanner) plainString() (string, bool) {
	if !sc.byte('"') {
		return "", false
	}
	start := sc.i
	for sc.i < len(sc.s) {
		switch c := sc.s[sc.i]; {
		case c == '"':
			sc.i++
			return sc.s[start : sc.i-1], true
		case c == '\\' || c < 0x20:
			return "", false
		}
		sc.i++
	}
	return "", false
}

// plainByte marks the bytes a JSON string holds as they are: all but ",
// \\ and the control characters.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// string reads a JSON string, decoding its escapes. It refuses invalid
// UTF-8, which encoding/json would replace rather than keep.
func (sc *scanner) string() (string, bool) {
	if !sc.byte('"') {
		return "", false
	}
	start := sc.i
	var high byte // the bits of every byte: >= 0x80 if any is not ASCII
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		if plainByte[c] {
			high |= c
			sc.i++
			continue
		}
		switch {
		case c == '"':
			out := sc.s[start:sc.i]
			sc.i++
			return out, high < utf8.RuneSelf || utf8.ValidString(out)
		case c == '\\':
			return sc.escaped(start)
		}
		return "", false // a control character
	}
	return "", false
}

// parseUTC parses a time as encodeRecord writes one in UTC
// (2006-01-02T15:04:05.999999999Z), reporting false for anything else,
// which time's own parser then reads or refuses.
func parseUTC(s string) (time.Time, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
		s[13] != ':' || s[16] != ':' || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	num := func(part string) (int, bool) {
		n := 0
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return 0, false
			}
			n = n*10 + int(part[i]-'0')
		}
		return n, true
	}
	year, ok1 := num(s[0:4])
	month, ok2 := num(s[5:7])
	day, ok3 := num(s[8:10])
	hour, ok4 := num(s[11:13])
	minute, ok5 := num(s[14:16])
	sec, ok6 := num(s[17:19])
	nsec := 0
	ok7 := true
	if frac := s[19 : len(s)-1]; frac != "" {
		// A dot and 1 to 9 digits.
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		nsec, ok7 = num(frac[1:])
		for range 10 - len(frac) {
			nsec *= 10
		}
	}
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Month() != time.Month(month) || t.Day() != day {
		return time.Time{}, false // out of range: normalized by time.Date
	}
	return t, true
}

// escaped finishes a string that has escapes; sc.i is at the first
// backslash, and s[start:sc.i] is the plain text before it.
func (sc *scanner) escaped(start int) (string, bool) {
	buf := make([]byte, 0, len(sc.s)-start)
	buf = append(buf, sc.s[start:sc.i]...)
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		switch {
		case c == '"':
			sc.i++
			return string(buf), utf8.Valid(buf)
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			sc.i++
			continue
		}
		if sc.i+1 >= len(sc.s) {
			return "", false
		}
		e := sc.s[sc.i+1]
		sc.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := sc.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// A pair, or (alone) what encoding/json turns into U+FFFD.
				r2 := rune(-1)
				if sc.i+1 < len(sc.s) && sc.s[sc.i] == '\\' && sc.s[sc.i+1] == 'u' {
					save := sc.i
					sc.i += 2
					if r2, ok = sc.hex4(); !ok {
						return "", false
					}
					if utf16.DecodeRune(r, r2) == utf8.RuneError {
						sc.i, r2 = save, -1
					}
				}
				if r2 < 0 {
					return "", false // unusual enough to leave to encoding/json
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (sc *scanner) hex4() (rune, bool) {
	if sc.i+4 > len(sc.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(sc.s[sc.i:sc.i+4], 16, 32)
	sc.i += 4
	return rune(n), err == nil
}

// nested decodes the array or object at sc.i into v with encoding/json,
// after finding where it ends.
func (sc *scanner) nested(v any) bool {
	start := sc.i
	depth := 0
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case '"':
			sc.i++
			for sc.i < len(sc.s) && sc.s[sc.i] != '"' {
				if sc.s[sc.i] == '\\' {
					sc.i++
				}
				sc.i++
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				sc.i++
				return json.Unmarshal([]byte(sc.s[start:sc.i]), v) == nil
			}
		}
		sc.i++
	}
	return false
}

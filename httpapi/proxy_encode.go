package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/jsonstr"
)

// chatRequest is what the chat proxy reads of a request body: where its
// messages are, and whether it streams. Every other field goes to the
// upstream byte for byte as the client wrote it.
type chatRequest struct {
	body []byte
	// messages is the messages value; body[start:end] holds it. Nil: the
	// body has no messages field.
	messages   json.RawMessage
	start, end int
	stream     bool
	// metadata is the metadata value, body[metaStart:metaEnd]; nil: none.
	metadata           json.RawMessage
	metaStart, metaEnd int
	// user is the user field, else safety_identifier: who the end user
	// is, as the client tells the upstream.
	user string
	// cacheKey reports a prompt_cache_key of the client's own.
	cacheKey bool
	// model is the model field as a transport's json.Unmarshal into a
	// struct reads it (a key of any case, the last string): the model the
	// upstream is asked for, which the usage ledger counts under.
	model string
}

// parseChatRequest reads a chat completions request body: a JSON object,
// with nothing after it, whose stream (if set and not null) is true or
// false. It wraps chatmem.ErrInvalid.
func parseChatRequest(body []byte) (chatRequest, error) {
	if r, ok, err := scanChatRequest(body); ok {
		return r, err
	}
	return decodeChatRequest(body)
}

// scanChatRequest is parseChatRequest for a body that is valid JSON and an
// object whose field names hold no escapes, nearly every request: its
// fields are found by a scan of the bytes, without a decoder's tokens,
// and read as decodeChatRequest reads them. ok is false for any other
// body, which decodeChatRequest then reads (or refuses).
func scanChatRequest(body []byte) (r chatRequest, ok bool, _ error) {
	if !json.Valid(body) {
		return r, false, nil
	}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return r, false, nil
	}
	r.body = body
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return r, true, nil
	}
	seen := 0
	for {
		if i >= len(body) || body[i] != '"' {
			return r, false, nil
		}
		ke := skipString(body, i)
		name := body[i+1 : ke-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			return chatRequest{}, false, nil
		}
		i = skipSpace(body, ke)
		if i >= len(body) || body[i] != ':' {
			return r, false, nil
		}
		start := skipSpace(body, i+1)
		end := skipValue(body, start)
		v := body[start:end]
		if bytes.EqualFold(name, []byte("model")) {
			_ = json.Unmarshal(v, &r.model) // as into a struct, as transports read it: any case, the last string wins
		}
		bit := 0
		switch string(name) {
		case "messages":
			bit = 1
			r.messages, r.start, r.end = v, start, end
		case "metadata":
			bit = 4
			r.metadata, r.metaStart, r.metaEnd = v, start, end
		case "prompt_cache_key":
			r.cacheKey = true
		case "user", "safety_identifier":
			var u string
			if json.Unmarshal(v, &u) == nil && (string(name) == "user" || r.user == "") {
				r.user = u
			}
		case "stream":
			bit = 2
			r.stream = false
			if !bytes.Equal(v, []byte("null")) {
				if err := json.Unmarshal(v, &r.stream); err != nil {
					return r, true, fmt.Errorf("%w: stream must be true or false", chatmem.ErrInvalid)
				}
			}
		}
		if seen&bit != 0 {
			return r, true, fmt.Errorf("%w: field %s is given twice", chatmem.ErrInvalid, name)
		}
		seen |= bit
		i = skipSpace(body, end)
		if i < len(body) && body[i] == ',' {
			i = skipSpace(body, i+1)
			continue
		}
		return r, true, nil // the closing brace: the body is valid JSON
	}
}

// skipString returns the index after the JSON string that starts at
// b[i] (a quote).
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the JSON value that starts at b[i],
// in a valid JSON text.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for ; i < len(b); i++ { // a number, true, false or null
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// decodeChatRequest is parseChatRequest with a JSON decoder's tokens.
func decodeChatRequest(body []byte) (chatRequest, error) {
	r := chatRequest{body: body}
	errBody := fmt.Errorf("%w: body must be a JSON object", chatmem.ErrInvalid)
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return r, errBody
	}
	seen := 0 // the fields read: a repeated messages or stream is refused
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return r, errBody
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return r, errBody
		}
		if strings.EqualFold(name, "model") {
			_ = json.Unmarshal(v, &r.model) // as scanChatRequest
		}
		bit := 0
		switch name {
		case "messages":
			bit = 1
			end := int(dec.InputOffset())
			start := end - len(v)
			if start < 0 || !bytes.Equal(body[start:end], v) {
				return r, errBody // cannot happen: Decode leaves the offset after the value
			}
			r.messages, r.start, r.end = v, start, end
		case "metadata":
			bit = 4
			r.metaEnd = int(dec.InputOffset())
			r.metaStart = r.metaEnd - len(v)
			r.metadata = v
		case "prompt_cache_key":
			r.cacheKey = true
		case "user", "safety_identifier":
			var u string
			if json.Unmarshal(v, &u) == nil && (name == "user" || r.user == "") {
				r.user = u
			}
		case "stream":
			bit = 2
			r.stream = false
			if !bytes.Equal(v, []byte("null")) {
				if err := json.Unmarshal(v, &r.stream); err != nil {
					return r, fmt.Errorf("%w: stream must be true or false", chatmem.ErrInvalid)
				}
			}
		}
		if seen&bit != 0 {
			return r, fmt.Errorf("%w: field %s is given twice", chatmem.ErrInvalid, name)
		}
		seen |= bit
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return r, errBody
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return r, errBody
	}
	return r, nil
}

// metaConversation is the metadata key that names the conversation.
const metaConversation = "conversation_id"

// conversationID returns metadata.conversation_id, "" if there is none. A
// metadata that is not an object of strings, as OpenAI takes it, wraps
// chatmem.ErrInvalid.
func (r chatRequest) conversationID() (string, error) {
	if r.metadata == nil || string(r.metadata) == "null" {
		return "", nil
	}
	var m map[string]string
	if err := json.Unmarshal(r.metadata, &m); err != nil {
		return "", fmt.Errorf("%w: metadata must be an object of strings", chatmem.ErrInvalid)
	}
	return m[metaConversation], nil
}

// withMessages returns the request body with msgs (a JSON array) in place
// of the client's messages and, when the metadata names the conversation,
// the metadata without conversation_id (null if nothing else is left):
// the key is chatmem's, not the upstream's. A cacheKey is sent as the
// body's prompt_cache_key unless the client set one.
func (r chatRequest) withMessages(msgs []byte, cacheKey string) []byte {
	b, _ := r.withMessagesAt(msgs, cacheKey)
	return b
}

// withMessagesAt is withMessages, and says where in the body msgs begins.
func (r chatRequest) withMessagesAt(msgs []byte, cacheKey string) (_ []byte, at int) {
	type edit struct {
		start, end int
		with       []byte
	}
	var room [3]edit
	edits := room[:0]
	if cacheKey != "" && !r.cacheKey {
		at := bytes.IndexByte(r.body, '{') + 1
		edits = append(edits, edit{at, at, []byte(`"prompt_cache_key":"` + cacheKey + `",`)})
	}
	edits = append(edits, edit{r.start, r.end, msgs})
	if id, _ := r.conversationID(); id != "" {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(r.metadata, &m)
		delete(m, metaConversation)
		meta := []byte("null")
		if len(m) > 0 {
			meta, _ = json.Marshal(m)
		}
		edits = append(edits, edit{r.metaStart, r.metaEnd, meta})
		slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	}
	out := make([]byte, 0, len(r.body)-(r.end-r.start)+len(msgs))
	from := 0
	for _, e := range edits {
		out = append(out, r.body[from:e.start]...)
		if e.start == r.start {
			at = len(out)
		}
		out = append(out, e.with...)
		from = e.end
	}
	return append(out, r.body[from:]...), at
}

// appendOpenAIMessage appends m as MarshalOpenAIMessage encodes it. A
// message without tool calls, nearly every one, is written directly,
// without reflection; the bytes are the same.
func appendOpenAIMessage(b []byte, m chatmem.Message) ([]byte, error) {
	if len(m.ToolCalls) > 0 {
		j, err := MarshalOpenAIMessage(m)
		return append(b, j...), err
	}
	b = append(b, `{"role":`...)
	b = jsonstr.Append(b, string(m.Role))
	b = append(b, `,"content":`...)
	b = jsonstr.Append(b, m.Content)
	if m.Name != "" {
		b = append(b, `,"name":`...)
		b = jsonstr.Append(b, m.Name)
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = jsonstr.Append(b, m.ToolCallID)
	}
	return append(b, '}'), nil
}

// plainMessage decodes the shape nearly every message of a chat request
// has, without reflection: a JSON object of exactly the keys "role" and
// "content" (in either order, each once), both strings without escapes or
// control characters, in valid UTF-8. The message is what json.Unmarshal
// makes of it. ok is false for anything else, which json.Unmarshal then
// decodes (and refuses, if it must).
func plainMessage(b []byte) (_ chatmem.Message, ok bool) {
	var m chatmem.Message
	seen := 0
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return m, false
	}
	i++
	for {
		ks, ke, ok := plainString(b, skipSpace(b, i))
		if !ok {
			return m, false
		}
		i = skipSpace(b, ke+1)
		if i >= len(b) || b[i] != ':' {
			return m, false
		}
		vs, ve, ok := plainString(b, skipSpace(b, i+1))
		if !ok {
			return m, false
		}
		switch string(b[ks:ke]) {
		case "role":
			if seen&1 != 0 {
				return m, false
			}
			seen |= 1
			m.Role = chatmem.Role(b[vs:ve])
		case "content":
			if seen&2 != 0 {
				return m, false
			}
			seen |= 2
			m.Content = string(b[vs:ve])
		default:
			return m, false
		}
		i = skipSpace(b, ve+1)
		if i >= len(b) {
			return m, false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '}' || skipSpace(b, i+1) != len(b) || seen != 3 {
			return m, false
		}
		return m, true
	}
}

// plainString returns where the text of the JSON string starting at
// b[i] begins and ends (b[start:end], end at the closing quote); ok is
// false if b[i] does not start a string, or the string holds an escape, a
// control character or invalid UTF-8.
func plainString(b []byte, i int) (start, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, 0, false
	}
	start = i + 1
	for j := start; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return start, j, utf8.Valid(b[start:j])
		case c == '\\' || c < 0x20:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// skipSpace returns the index of the first byte of b at or after i that
// is not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// unmarshalUnless decodes b into m as json.Unmarshal does, unless done.
func unmarshalUnless(done bool, b []byte, m *chatmem.Message) error {
	if done {
		return nil
	}
	return json.Unmarshal(b, m)
}

// splitArray returns the elements of raw, a JSON array, as slices of it
// (json.Unmarshal into []json.RawMessage copies each); ok is false when
// raw is not an array, or not well formed around its elements, which
// json.Unmarshal then reads or refuses. The elements are found by
// skipValue, which takes raw to be valid JSON, as a request's messages
// are once parseChatRequest has read them: an element that is not is
// refused when it is decoded.
func splitArray(raw []byte) (list []json.RawMessage, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return nil, skipSpace(raw, i+1) == len(raw)
	}
	for {
		end := skipValue(raw, i)
		if end == i {
			return nil, false
		}
		list = append(list, raw[i:end:end])
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case ']':
			return list, skipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

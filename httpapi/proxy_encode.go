package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
}

// parseChatRequest reads a chat completions request body: a JSON object,
// with nothing after it, whose stream (if set and not null) is true or
// false. It wraps chatmem.ErrInvalid.
func parseChatRequest(body []byte) (chatRequest, error) {
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

// withMessages returns the request body with msgs (a JSON array) in place
// of the client's messages.
func (r chatRequest) withMessages(msgs []byte) []byte {
	out := make([]byte, 0, len(r.body)-(r.end-r.start)+len(msgs))
	out = append(out, r.body[:r.start]...)
	out = append(out, msgs...)
	return append(out, r.body[r.end:]...)
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

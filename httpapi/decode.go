package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
)

// AppendRequest is the body of POST /v1/conversations/{id}/messages.
type AppendRequest struct {
	// Messages are OpenAI-style chat messages (role, content, name,
	// tool_calls, tool_call_id; metadata and created_at are kept too).
	Messages []chatmem.Message `json:"messages"`
	// Tokenizer names the counter of a new conversation ("estimate",
	// "o200k_base", ...); an existing conversation keeps its own.
	Tokenizer string `json:"tokenizer,omitempty"`
	// TTLSeconds, if positive, makes the conversation expire that long
	// after this append.
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

// maxTTLSeconds bounds ttl_seconds (100 years), far below where a
// time.Duration overflows.
const maxTTLSeconds int64 = 100 * 365 * 24 * 3600

// maxTokenizerLen bounds the tokenizer name.
const maxTokenizerLen = 128

// decodeAppend decodes and checks an append body: one JSON object with
// only the known top-level fields and nothing after it, 1 to l.MaxMessages
// messages that each pass chatmem.Message.Validate under l.MaxContentBytes.
// Whether tool messages answer calls is checked by Memory.Append, which
// knows the history. Seq and tokens the client sent are cleared: the store
// assigns the one and the counter computes the other. Every error wraps
// chatmem.ErrInvalid or chatmem.ErrTooLarge.
func decodeAppend(body []byte, l Limits) (AppendRequest, error) {
	var req AppendRequest
	if err := decodeStrict(body, &req); err != nil {
		return AppendRequest{}, err
	}
	switch n := len(req.Messages); {
	case n == 0:
		return AppendRequest{}, fmt.Errorf("%w: messages is required and must not be empty", chatmem.ErrInvalid)
	case n > l.MaxMessages:
		return AppendRequest{}, fmt.Errorf("%w: %d messages in one request, over the limit of %d", chatmem.ErrTooLarge, n, l.MaxMessages)
	}
	limits := chatmem.Limits{MaxContentBytes: l.MaxContentBytes, MaxBatch: l.MaxMessages}
	for i := range req.Messages {
		m := &req.Messages[i]
		m.Seq, m.Tokens = 0, 0
		if err := m.Validate(limits); err != nil {
			return AppendRequest{}, fmt.Errorf("message %d: %w", i, err)
		}
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > maxTTLSeconds {
		return AppendRequest{}, fmt.Errorf("%w: ttl_seconds must be 0 to %d, got %d", chatmem.ErrInvalid, maxTTLSeconds, req.TTLSeconds)
	}
	if t := req.Tokenizer; len(t) > maxTokenizerLen || strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return AppendRequest{}, fmt.Errorf("%w: tokenizer must be up to %d printable ASCII characters", chatmem.ErrInvalid, maxTokenizerLen)
	}
	return req, nil
}

// TTL returns TTLSeconds as a duration.
func (r AppendRequest) TTL() time.Duration { return time.Duration(r.TTLSeconds) * time.Second }

// decodeStrict decodes body, which must hold exactly one JSON value, into
// v, refusing fields v does not have. Nested values with their own
// UnmarshalJSON (messages) decide for themselves. Errors wrap
// chatmem.ErrInvalid.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty body; want a JSON object", chatmem.ErrInvalid)
		}
		if errors.Is(err, chatmem.ErrInvalid) {
			return fmt.Errorf("body: %w", err)
		}
		return fmt.Errorf("%w: body is not valid JSON for this request: %s", chatmem.ErrInvalid, strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: body has data after the JSON object", chatmem.ErrInvalid)
	}
	return nil
}

// readBody reads the request body, up to max bytes (more wraps
// chatmem.ErrTooLarge).
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, fmt.Errorf("%w: request body over the limit of %d bytes", chatmem.ErrTooLarge, max)
	case err != nil:
		return nil, fmt.Errorf("%w: reading the request body: %v", chatmem.ErrInvalid, err)
	}
	return b, nil
}

// parseIfMatch parses an If-Match header holding the conversation's last
// sequence number, quoted as an entity tag ("5") or bare (5).
func parseIfMatch(v string) (int64, error) {
	s := strings.TrimSpace(v)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: If-Match must be the last sequence number, as \"5\" or 5", chatmem.ErrInvalid)
	}
	return n, nil
}

// maxIdempotencyKeyLen bounds the Idempotency-Key header.
const maxIdempotencyKeyLen = 255

// checkIdempotencyKey accepts 1 to 255 printable ASCII characters.
func checkIdempotencyKey(k string) error {
	if len(k) > maxIdempotencyKeyLen || strings.ContainsFunc(k, func(r rune) bool { return r < ' ' || r > '~' }) {
		return fmt.Errorf("%w: Idempotency-Key must be 1 to %d printable ASCII characters", chatmem.ErrInvalid, maxIdempotencyKeyLen)
	}
	return nil
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/chatmem/chatmem"
)

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
	if req.User != "" {
		if err := chatmem.ValidateUser(req.User); err != nil {
			return AppendRequest{}, fmt.Errorf("user: %w", err)
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

// decodeStrict decodes body, which must hold exactly one JSON value, into
// v, refusing fields v does not have. Nested values with their own
// UnmarshalJSON (messages) decide for themselves. Errors wrap
// chatmem.ErrInvalid.
func decodeStrict(body []byte, v any) error {
	// Before decoding: encoding/json would rewrite invalid UTF-8 (and
	// lone surrogate escapes) to U+FFFD rather than fail.
	if err := chatmem.CheckJSONText(body); err != nil {
		return fmt.Errorf("body: %w", err)
	}
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
// chatmem.ErrTooLarge). A read that times out (the server's ReadTimeout)
// wraps ErrRequestTimeout. The error never quotes the connection's error,
// which names socket addresses.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooBig *http.MaxBytesError
	var timeout interface{ Timeout() bool }
	switch {
	case err == nil:
		return b, nil
	case errors.As(err, &tooBig):
		return nil, fmt.Errorf("%w: request body over the limit of %d bytes", chatmem.ErrTooLarge, max)
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &timeout) && timeout.Timeout():
		return nil, fmt.Errorf("%w: the request body did not arrive in time (%d bytes read)", ErrRequestTimeout, len(b))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%w: the request body ended before its declared length (%d bytes read)", chatmem.ErrInvalid, len(b))
	default:
		return nil, fmt.Errorf("%w: the request body could not be read (%d bytes read)", chatmem.ErrInvalid, len(b))
	}
}

// parseIfMatch parses an If-Match header holding the conversation's last
// sequence number: decimal digits, bare (5) or quoted as an entity tag
// ("5"). Signs, spaces, other entity tags and an empty value are refused.
func parseIfMatch(v string) (int64, error) {
	s := v
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	bad := s == "" || len(s) > 18 || strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	n, err := strconv.ParseInt(s, 10, 64)
	if bad || err != nil {
		return 0, fmt.Errorf("%w: If-Match must be the last sequence number in decimal digits, as \"5\" or 5", chatmem.ErrInvalid)
	}
	return n, nil
}

// ifMatch returns the request's If-Match as the last sequence number it
// expects (parseIfMatch), nil if it sent none. A header sent empty is a
// client's mistake, not an absent header.
func ifMatch(r *http.Request) (*int64, error) {
	v, ok, err := singleHeader(r, "If-Match")
	if err != nil || !ok {
		return nil, err
	}
	n, err := parseIfMatch(v)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// singleHeader returns the value of the header name, whether it was sent,
// and an error if it was sent more than once.
func singleHeader(r *http.Request, name string) (string, bool, error) {
	vs := r.Header.Values(name)
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		return vs[0], true, nil
	}
	return "", true, fmt.Errorf("%w: header %s given %d times", chatmem.ErrInvalid, name, len(vs))
}

// maxIdempotencyKeyLen bounds the Idempotency-Key header.
const maxIdempotencyKeyLen = 255

// checkIdempotencyKey accepts 1 to 255 printable ASCII characters.
func checkIdempotencyKey(k string) error {
	if k == "" || len(k) > maxIdempotencyKeyLen || strings.ContainsFunc(k, func(r rune) bool { return r < ' ' || r > '~' }) {
		return fmt.Errorf("%w: Idempotency-Key must be 1 to %d printable ASCII characters", chatmem.ErrInvalid, maxIdempotencyKeyLen)
	}
	return nil
}

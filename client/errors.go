package client

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/chatmem/chatmem"
)

// Errors of the HTTP API that have no sentinel in the root package. An
// *Error unwraps to them, as it does to the root sentinels; the server
// returns them too, so they are the same values on both sides of the wire.
var (
	// ErrUnauthorized reports a request without a valid API key.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrMethodNotAllowed reports a known path asked with a method it does
	// not serve.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrRateLimited reports a tenant over its configured request rate.
	ErrRateLimited = errors.New("rate limited")
	// ErrRequestTimeout reports a request body that did not arrive within
	// the server's read timeout.
	ErrRequestTimeout = errors.New("request timeout")
	// ErrHeaderTooLarge reports request headers over the server's limit.
	ErrHeaderTooLarge = errors.New("request headers too large")
	// ErrForbidden reports a request a browser sent for a page of another
	// site (its Origin), or, on a server without API keys, under a Host
	// that is not one of the server's names (DNS rebinding).
	ErrForbidden = errors.New("forbidden")
	// ErrUnsupportedMediaType reports a body whose Content-Type the route
	// does not take (JSON; NDJSON for the import).
	ErrUnsupportedMediaType = errors.New("unsupported media type")
)

// An ErrorCode is one entry of the API's error table: an error, the HTTP
// status the server answers it with, and the code in the error body.
type ErrorCode struct {
	Err    error
	Status int
	Code   string
}

// CodeInternal is the code of every error the table does not map (status
// 500): its details go to the server's log, not to the client.
const CodeInternal = "internal"

// errorCodes is the API's one table from errors to statuses and codes.
// It is searched in order, so the generic ErrInvalid comes last: an error
// wrapping both it and a more specific sentinel takes the specific one.
var errorCodes = []ErrorCode{
	{chatmem.ErrNotFound, http.StatusNotFound, "not_found"},
	{chatmem.ErrConflict, http.StatusConflict, "conflict"},
	{chatmem.ErrIdempotencyKeyReused, http.StatusUnprocessableEntity, "idempotency_key_reused"},
	{chatmem.ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{chatmem.ErrBudgetTooSmall, http.StatusUnprocessableEntity, "budget_too_small"},
	{chatmem.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{ErrUnauthorized, http.StatusUnauthorized, "unauthorized"},
	{ErrForbidden, http.StatusForbidden, "forbidden"},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed"},
	{ErrRateLimited, http.StatusTooManyRequests, "rate_limited"},
	{chatmem.ErrBudgetExhausted, http.StatusTooManyRequests, "budget_exhausted"},
	{ErrRequestTimeout, http.StatusRequestTimeout, "request_timeout"},
	{ErrHeaderTooLarge, http.StatusRequestHeaderFieldsTooLarge, "header_too_large"},
	{ErrUnsupportedMediaType, http.StatusUnsupportedMediaType, "unsupported_media_type"},
	{chatmem.ErrInvalid, http.StatusBadRequest, "invalid_request"},
}

// ErrorCodes returns a copy of the API's error table, in the order the
// server matches an error against it (the first entry the error wraps
// wins; one that wraps none is a 500 with CodeInternal). An *Error
// unwraps to the Err of its Code.
func ErrorCodes() []ErrorCode { return append([]ErrorCode(nil), errorCodes...) }

// sentinelOf returns the error a code stands for, or nil.
func sentinelOf(code string) error {
	for _, e := range errorCodes {
		if e.Code == code {
			return e.Err
		}
	}
	return nil
}

// ErrorBody is the JSON shape of every error response:
// {"error":{"code":"...","message":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error is an error response from the server, as the Client returns it.
// Unwrap returns the sentinel its code stands for (chatmem.ErrNotFound for
// "not_found", ErrUnauthorized for "unauthorized", ...), so callers match it
// with errors.Is as they would match the library's errors.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code is the error code ("not_found", "conflict", ...); empty when the
	// response had no error body (a proxy's error page, say).
	Code string
	// Message says what went wrong, for people.
	Message string
	// RequestID is the response's X-Request-Id, for finding the server's
	// log line.
	RequestID string
}

// Error returns the status, code, message and request ID in one line.
func (e *Error) Error() string {
	s := fmt.Sprintf("chatmem api: %d", e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	return s
}

// Unwrap returns the sentinel error for e.Code, or nil for "internal" and
// unknown codes.
func (e *Error) Unwrap() error { return sentinelOf(e.Code) }

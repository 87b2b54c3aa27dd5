package httpapi

import (
	"errors"
	"net/http"

	"github.com/chatmem/chatmem/client"
)

// Errors of the HTTP layer that have no sentinel in the root package.
// They are package client's (the same values), so that the server and the
// Go client agree on them.
var (
	// ErrUnauthorized reports a request without a valid API key.
	ErrUnauthorized = client.ErrUnauthorized
	// ErrMethodNotAllowed reports a known path asked with a method it does
	// not serve.
	ErrMethodNotAllowed = client.ErrMethodNotAllowed
	// ErrRateLimited reports a tenant over its configured request rate.
	ErrRateLimited = client.ErrRateLimited
	// ErrRequestTimeout reports a request body that did not arrive within
	// the server's read timeout.
	ErrRequestTimeout = client.ErrRequestTimeout
	// ErrHeaderTooLarge reports request headers over Limits.MaxHeaderBytes.
	ErrHeaderTooLarge = client.ErrHeaderTooLarge
	// ErrForbidden reports a request a browser sent for a page of another
	// site (its Origin), or, on a server without API keys, under a Host
	// that is not one of the server's names (DNS rebinding).
	ErrForbidden = client.ErrForbidden
	// ErrUnsupportedMediaType reports a body whose Content-Type the route
	// does not take (JSON; NDJSON for the import).
	ErrUnsupportedMediaType = client.ErrUnsupportedMediaType
)

// Error is an error response from the server, as the Go client returns
// it.
//
// Deprecated: use client.Error.
type Error = client.Error

// errorCode is one entry of errorCodes.
type errorCode struct {
	err    error
	status int
	code   string
}

// errorCodes is the one table from errors to HTTP statuses and error codes
// (client.ErrorCodes, which the Go client maps back), searched in order;
// an error that matches no entry is a 500 "internal".
var errorCodes = func() []errorCode {
	var out []errorCode
	for _, e := range client.ErrorCodes() {
		out = append(out, errorCode{err: e.Err, status: e.Status, code: e.Code})
	}
	return out
}()

// codeInternal is the code of every error the table does not map.
const codeInternal = client.CodeInternal

// classify returns the status and code for err.
func classify(err error) (status int, code string) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge, "too_large"
	}
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			return e.status, e.code
		}
	}
	return http.StatusInternalServerError, codeInternal
}

// errorBody is the JSON shape of every error response.
type errorBody = client.ErrorBody

type errorDetail = client.ErrorDetail

package chatmem

import (
	"errors"
	"fmt"
)

// Sentinel errors. Functions wrap them with what went wrong; callers match them
// with errors.Is. The HTTP layer maps each one to a status code in one table.
var (
	// ErrInvalid reports bad input: an unknown role, empty content, invalid
	// UTF-8, a tool message without its call, a malformed ID or option.
	// Nothing was written.
	ErrInvalid = errors.New("invalid input")

	// ErrTooLarge reports input over a configured limit (message size, batch
	// size). Nothing was written.
	ErrTooLarge = errors.New("too large")

	// ErrNotFound reports a conversation (or other record) that does not exist
	// for this tenant.
	ErrNotFound = errors.New("not found")

	// ErrConflict reports a failed optimistic-concurrency check: the caller's
	// expected last sequence number is no longer the conversation's.
	ErrConflict = errors.New("conflict")

	// ErrErased reports an append refused because it would create a
	// conversation bound to a user whose erasure (UserStore.DeleteUser) is
	// running, or completed after the work that made the append started
	// (AppendOptions.Started): what that work read or wrote was erased,
	// and it must not bring the user back. It wraps ErrConflict (the HTTP
	// API answers 409). Nothing was written.
	ErrErased = fmt.Errorf("%w: the user was erased", ErrConflict)

	// ErrIdempotencyKeyReused reports an idempotency key that an earlier
	// append to the conversation used with other messages (another
	// AppendOptions.Fingerprint): the key names another request, so it
	// neither replays nor appends. Nothing was written.
	ErrIdempotencyKeyReused = errors.New("idempotency key reused")

	// ErrBudgetTooSmall reports a token budget that cannot hold a valid window:
	// the pinned system messages and the newest user message (with what
	// follows it) do not fit.
	ErrBudgetTooSmall = errors.New("budget too small")

	// ErrUnavailable reports a backend (store, tokenizer service) that could not
	// be reached; the operation may be retried.
	ErrUnavailable = errors.New("unavailable")
)

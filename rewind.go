package chatmem

import "context"

// Rewinder takes a conversation back to an earlier message, as if the
// messages after it had never been appended: a chat client's edit of an
// earlier message or regeneration of a reply. Memory.Rewind finds it by a
// type assertion; every store in this module implements it.
type Rewinder interface {
	// Rewind deletes the conversation's messages with Seq > toSeq, with
	// everything derived from them, atomically, if the conversation's
	// LastSeq is still expectedLastSeq: ErrConflict otherwise, so a
	// rewind racing an append is refused, never interleaved with it
	// (concurrent appends either wait for it or make it fail). It wraps
	// ErrInvalid for toSeq < 0 or toSeq > expectedLastSeq (checked before
	// anything is read), and returns ErrNotFound for a conversation that
	// does not exist (or has expired). Nothing changes on error.
	//
	// In the same atomic step it sets LastSeq to toSeq and recomputes
	// Tokens, SystemTokens and Turns from the messages kept; deletes the
	// summary if it covers a rewound message (the summarizer redoes it);
	// deletes every value of a fact stated by a rewound message (SourceSeq
	// > toSeq) from the fact's history, so the value before it, if any,
	// is current again, and so for the user facts taken from the rewound
	// messages (Fact.Conversation the conversation's ID); moves the fact
	// extraction mark back to toSeq if it was past it; removes the rewound
	// messages' index entries (the conversation's and its user's) and
	// vectors; and deletes the
	// idempotency keys of appends that stored a rewound message, so that
	// a retry of such an append appends again instead of replaying
	// messages that are gone. UpdatedAt is set to now; CreatedAt, the
	// expiry, the tokenizer and the user stay. The next append continues
	// at toSeq+1. A rewind to the last message (toSeq == expectedLastSeq)
	// changes nothing and returns the conversation as it is.
	//
	// A store that keeps a user's data where one atomic step with the
	// conversation's cannot reach (Redis Cluster's slots) updates the
	// user's facts and index in a step after it, and says so.
	//
	// It returns the conversation after the rewind. It is safe for
	// concurrent use.
	Rewind(ctx context.Context, key Key, toSeq, expectedLastSeq int64) (Conversation, error)
}

// RevisionRewinder is a Rewinder that can also pin a rewind to the
// conversation's Revision. Memory.Rewind finds it by a type assertion when
// RewindOptions.ExpectedRevision is set; every store in this module
// implements it.
type RevisionRewinder interface {
	Rewinder
	// RewindRevision is Rewind that also fails with ErrConflict unless the
	// conversation's Revision is expectedRevision, checked with
	// expectedLastSeq in the same atomic step as the rewind (so it also
	// refuses a rewind to the last seq, which changes nothing). With it a
	// rewind decided on a read never cuts a branch written after that
	// read, even one rewound and appended back to the same LastSeq since.
	// Nothing changes on error.
	RewindRevision(ctx context.Context, key Key, toSeq, expectedLastSeq, expectedRevision int64) (Conversation, error)
}

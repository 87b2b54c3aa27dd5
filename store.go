package chatmem

import (
	"context"
	"fmt"
	"time"
)

// Conversation describes one stored conversation.
type Conversation struct {
	// Key is filled in by every store method that returns a Conversation.
	Key Key `json:"-"`
	// Tokenizer names the Counter whose counts the stored messages carry.
	// It is set by the first append and changed only by Memory.Recount.
	Tokenizer string `json:"tokenizer"`
	// User is the user the conversation belongs to (empty: none). It is
	// set by the append that creates the conversation and never changes.
	User string `json:"user,omitempty"`
	// LastSeq is the sequence number of the newest message; sequence numbers
	// are dense, so it is also the message count.
	LastSeq int64 `json:"last_seq"`
	// Tokens is the running total of the non-system messages' tokens;
	// SystemTokens that of the system messages.
	Tokens       int64     `json:"tokens"`
	SystemTokens int64     `json:"system_tokens"`
	Turns        int64     `json:"turns"` // user messages so far
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
	// ExpiresAt is when the conversation expires (zero: never). Expired
	// conversations are not found, whether or not they are swept yet.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Revision counts the rewrites of the conversation's stored messages:
	// every rewind that removed messages and every redaction adds one;
	// appends leave it. It starts at 0 when the conversation is created
	// (a conversation created again after it expired may carry on from
	// its predecessor's: CreatedAt, not Revision, tells the two apart). A
	// reader that kept messages (Memory's tail cache) knows
	// them stale when the revision moved, even if appends brought the
	// LastSeq and totals back to what it holds.
	Revision int64 `json:"revision,omitempty"`
}

// AppendOptions qualify one append.
type AppendOptions struct {
	// ExpectedLastSeq, if set, makes the append fail with ErrConflict unless
	// the conversation's LastSeq equals *ExpectedLastSeq (0 for a
	// conversation that does not exist yet).
	ExpectedLastSeq *int64
	// ExpectedRevision, if set, makes the append fail with ErrConflict
	// unless the conversation's Revision equals *ExpectedRevision (0 for a
	// conversation that does not exist yet, or has expired), checked with
	// ExpectedLastSeq, after the idempotency key, in the same atomic step
	// as the write. With ExpectedLastSeq it pins the append to the very
	// messages a caller read: a rewind and appends back to the same
	// LastSeq (by any process) fail it, as appends alone fail
	// ExpectedLastSeq. A negative value wraps ErrInvalid.
	ExpectedRevision *int64
	// IdempotencyKey, if set, makes a retried append a no-op: an append whose
	// key was already applied to this conversation writes nothing and returns
	// the original messages with Replayed set, whatever messages the retry
	// carries. The key is checked before ExpectedLastSeq, so the retry of a
	// successful conditional append replays rather than conflicts. Keys are
	// scoped to the conversation and deleted with it.
	IdempotencyKey string
	// Fingerprint identifies the request an IdempotencyKey was sent with
	// (Memory.Append sets it to Fingerprint(msgs) when it is empty). The
	// store records it with the key, and a later append with the same key
	// and another fingerprint fails with ErrIdempotencyKeyReused, checked
	// in the same transaction as the key: a key reused for other messages
	// neither replays the first request nor appends. An empty fingerprint,
	// given or recorded (keys stored before fingerprints were), matches
	// any.
	Fingerprint string
	// Tokenizer is recorded when the append creates the conversation.
	Tokenizer string
	// User, if set, binds the conversation to that user (an ID of the
	// tenant, with the rules of ValidateID) when the append creates it;
	// appends to an existing conversation may repeat its user or leave
	// User empty, and any other user (also on a conversation created
	// without one) fails with ErrConflict, checked with ExpectedLastSeq,
	// after the idempotency key. Stores that bind users implement
	// UserStore; the others refuse a User with ErrInvalid.
	User string
	// ExpectedTokenizer, if set, makes the append fail with ErrConflict
	// when the conversation exists and its Tokenizer is another: the
	// messages were counted with ExpectedTokenizer, and a conversation
	// recounted (or re-created) under another tokenizer since must not
	// take them. A conversation the append creates matches. It is checked
	// with ExpectedLastSeq, after the idempotency key.
	ExpectedTokenizer string
	// TTL, if positive, sets the conversation to expire TTL after Now (each
	// append with a TTL pushes the expiry forward; an append without one
	// leaves the expiry as it was). Whether a conversation has expired is
	// judged by the store's clock.
	TTL time.Duration
	// Now is the time the append happens; stores use it for CreatedAt of
	// messages that have none, UpdatedAt and expiry. Zero means time.Now().
	Now time.Time
	// Started is when the work this append belongs to began (a proxy
	// turn, an MCP call, an import), by Memory's clock (Memory.Now);
	// zero means the append's own time. It fences erasure: an append that
	// would create a conversation bound to User (a new one, or one
	// started afresh after it expired) fails with ErrErased while an
	// erasure of User runs, and if the last one completed at or after
	// Started, so work that began before a DeleteUser returned cannot
	// bring the user back. It is checked in the same atomic step as the
	// creation, and only there: an append to a live conversation costs
	// nothing more. The erasure's time is the clock of the process that
	// ran DeleteUser, so with replicas the fence holds as long as their
	// clocks differ by less than an erasure lasts (milliseconds under
	// NTP are well below it); a clock behind only refuses new work for
	// as long as it is behind.
	Started time.Time
	// Receipt, if set, is a receipt (EncodeReceipt's bytes) stored with
	// the batch's last message, in the same write; the store must be a
	// ReceiptStore (Memory.Append drops it on one that is not). A replayed
	// append keeps the receipt stored first.
	Receipt []byte
	// unconditional tells Memory's append not to make its write
	// conditional on the tail cache's last message: a Turn whose own
	// condition on it just failed knows the entry is behind.
	unconditional bool
}

// AppendResult is what an append stored.
type AppendResult struct {
	// Messages are the appended messages with Seq (and CreatedAt) set.
	Messages []Message
	// Conversation is the conversation after the append (on a replay, as it
	// is now).
	Conversation Conversation
	// Replayed is true when an idempotency key matched an earlier append.
	Replayed bool
}

// TailQuery selects the newest messages of a conversation. With both fields
// set it selects the shorter of the two runs; with both zero, nothing.
type TailQuery struct {
	// Tokens, if positive, selects the longest run of newest messages whose
	// non-system tokens sum to at most Tokens. System messages inside that
	// run, or just before it, are returned too, but do not count (callers
	// take system messages from System).
	Tokens int
	// Turns, if positive, selects the messages from the Turns-th newest user
	// message onwards (all messages if there are fewer user messages).
	Turns int
}

// CheckSelects returns nil if q can select something (Tokens or Turns is
// positive), else an error wrapping ErrInvalid: AppendTail's check of its
// query, the same on every store.
func (q TailQuery) CheckSelects() error {
	if q.Tokens > 0 || q.Turns > 0 {
		return nil
	}
	return fmt.Errorf("%w: a tail query selects nothing without Tokens or Turns", ErrInvalid)
}

// PageRequest asks for one page of a listing ordered by conversation ID.
type PageRequest struct {
	After string // return IDs greater than this (the previous page's Next)
	Limit int    // 1..1000; 0 means 50
}

// Page is one page of conversations, in byte order of ID (Go string
// comparison; SQL stores use the C collation). Next is the cursor for
// the following page, empty on the last one.
type Page struct {
	Conversations []Conversation
	Next          string
}

// Store keeps conversations and their messages. Every method is safe for
// concurrent use, by many goroutines and (for the sqlite, redis and postgres
// stores) many processes. Every method validates its Key and wraps
// ErrInvalid for a bad one, and returns ErrNotFound for a conversation that
// does not exist (or has expired) for the key's tenant.
//
// The conformance suite in package storetest is the executable form of this
// contract.
type Store interface {
	// Append stores msgs at the end of the conversation, creating it if it
	// does not exist. Messages arrive validated and counted (Tokens set);
	// the store assigns each the next sequence number atomically, so
	// concurrent appends from any number of clients all land, densely
	// numbered, in one order every reader sees. An empty batch, and a
	// CreatedAt outside MinTime..MaxTime (ValidateTime's error, the same
	// on every store), wrap ErrInvalid. See AppendOptions for ErrConflict
	// and idempotency.
	// Nothing is written when an error is returned.
	Append(ctx context.Context, key Key, msgs []Message, opts AppendOptions) (AppendResult, error)

	// Conversation returns the conversation's metadata.
	Conversation(ctx context.Context, key Key) (Conversation, error)

	// List returns the tenant's conversations ordered by ID, one page at a
	// time. An unknown tenant has an empty list; an invalid tenant or a
	// Limit outside 0..1000 wraps ErrInvalid.
	List(ctx context.Context, tenant string, page PageRequest) (Page, error)

	// Delete removes the conversation and every message, key and row of it,
	// including idempotency keys, its summary and its facts. The ID may be
	// used again afterwards. An expired conversation is ErrNotFound here
	// too; its rows are left to Sweep (or the backend's expiry).
	Delete(ctx context.Context, key Key) error

	// Tail returns the newest messages selected by q, oldest first. It is one
	// bounded read: its cost depends on the size of the result, not on the
	// length of the conversation.
	Tail(ctx context.Context, key Key, q TailQuery) ([]Message, error)

	// Range returns up to limit messages with Seq > after, oldest first
	// (limit <= 0: all of them).
	Range(ctx context.Context, key Key, after int64, limit int) ([]Message, error)

	// System returns the conversation's system messages, oldest first. They
	// are pinned into every window, so stores index them.
	System(ctx context.Context, key Key) ([]Message, error)

	// Ping reports whether the backend is reachable (wrapping
	// ErrUnavailable if not).
	Ping(ctx context.Context) error

	// Close releases the store's resources.
	Close() error
}

// Sweeper is implemented by stores whose expiry is not enforced by the
// backend itself (SQL stores). Sweep deletes conversations that expired
// before now and returns how many it deleted.
type Sweeper interface {
	Sweep(ctx context.Context, now time.Time) (int, error)
}

// Purger deletes conversations not updated since before, and returns how
// many it deleted: the documented way to purge by age. An empty tenant means
// every tenant (an operator's purge).
type Purger interface {
	PurgeInactive(ctx context.Context, tenant string, before time.Time) (int, error)
}

// SummaryStore keeps each conversation's rolling summary. Every store in
// this module implements it; Memory finds it by a type assertion. Deleting
// the conversation deletes its summary.
type SummaryStore interface {
	// Summary returns the conversation's summary. It returns ErrNotFound if
	// the conversation does not exist or has no summary yet.
	Summary(ctx context.Context, key Key) (Summary, error)

	// PutSummary stores s as the conversation's summary if the stored one
	// covers exactly prev (0: none stored yet): a compare-and-set on the
	// covered sequence number, so two summarizers racing cannot move it
	// backwards or overwrite each other. It fails with ErrConflict if the
	// stored summary covers something else, with ErrInvalid if s.Text is
	// empty or s.CoversSeq is not in prev+1..LastSeq, and with ErrNotFound
	// if the conversation does not exist. Nothing is written on error.
	PutSummary(ctx context.Context, key Key, s Summary, prev int64) error
}

// FactStore keeps typed facts per conversation. Setting a key again makes
// the new value current and keeps the old ones as history. Deleting the
// conversation deletes its facts.
type FactStore interface {
	// Facts returns the current value of every key, ordered by key. A
	// conversation without facts has none (no error); a missing
	// conversation is ErrNotFound.
	Facts(ctx context.Context, key Key) ([]Fact, error)

	// FactHistory returns every value the named fact has had, oldest first
	// (ErrNotFound if it never had one).
	FactHistory(ctx context.Context, key Key, name string) ([]Fact, error)

	// SetFacts records facts in order, atomically; for each key the last of
	// them becomes current. Each fact must pass Fact.Validate (ErrInvalid);
	// the conversation must exist (ErrNotFound). Nothing is written on error.
	SetFacts(ctx context.Context, key Key, facts []Fact) error

	// DeleteFact removes the named fact and its history (ErrNotFound if
	// there is none).
	DeleteFact(ctx context.Context, key Key, name string) error
}

// Recounter rewrites a conversation's stored token counts under another
// tokenizer. Memory.Recount finds it by a type assertion; every store in
// this module implements it.
type Recounter interface {
	// Recount sets the tokens of messages 1..len(tokens) (tokens[i] is the
	// count of seq i+1), recomputes the running totals and the
	// conversation's Tokens and SystemTokens, and records tokenizer as the
	// conversation's Tokenizer, atomically, if the conversation's LastSeq
	// is still lastSeq: ErrConflict otherwise (appends arrived). It wraps
	// ErrInvalid if len(tokens) != lastSeq, a count is negative or
	// tokenizer is empty, and returns ErrNotFound for a conversation that
	// does not exist (or has expired). Nothing changes on error. LastSeq,
	// Turns, UpdatedAt, ExpiresAt, the summary and the facts stay as they
	// are: a recount is maintenance, not activity. It is safe for
	// concurrent use; concurrent appends either wait for it or make it
	// fail with ErrConflict.
	Recount(ctx context.Context, key Key, tokenizer string, lastSeq int64, tokens []int) error
}

// SinceReader is implemented by stores that read a conversation's metadata
// and its newest messages in one snapshot, for less than the two reads
// Conversation and Range take: a turn whose window is mostly in Memory's
// tail cache needs just those two things. Memory finds it by a type
// assertion; every store in this module implements it.
type SinceReader interface {
	// ConversationSince returns the conversation's metadata and up to limit
	// (>= 1) of its messages with Seq > after, oldest first, both of one
	// snapshot: no message past the returned LastSeq, and with limit large
	// enough the last one returned is LastSeq. It returns ErrNotFound for
	// a conversation that does not exist (or has expired) and wraps
	// ErrInvalid for a bad key or a limit below 1. It is safe for
	// concurrent use.
	ConversationSince(ctx context.Context, key Key, after int64, limit int) (Conversation, []Message, error)
}

// TailAppender is implemented by stores that read a conversation's newest
// messages in the round trip (and the transaction) of an append. Memory.Turn
// uses it when its tail cache does not hold the conversation (a process's
// first turn on it, or a new conversation): the append and the window's
// read are then one round trip to the store, where they were two or three
// (the append, the system messages, the tail), and the window comes from
// what it returned. Memory finds it by a type assertion; every store in
// this module implements it.
type TailAppender interface {
	// AppendTail is Append, followed, in the same transaction (or script),
	// by reads of the conversation as that append left it: its system
	// messages and Tail(q). Nothing appended after msgs is in them, and
	// everything stored before them is. When the append is a replay
	// (AppendResult.Replayed), nothing is read and the TailRead is empty.
	// Its errors are Append's (a store may also fail the reads, before
	// the append commits), and a q that selects nothing is refused with
	// q.CheckSelects's error; nothing is written when an error is
	// returned. A store that cannot finish the reads once the append
	// landed returns the append's result with an empty TailRead, not an
	// error (the caller then reads as it would have without them). It is
	// safe for concurrent use.
	AppendTail(ctx context.Context, key Key, msgs []Message, opts AppendOptions, q TailQuery) (AppendResult, TailRead, error)
}

// TailRead is what AppendTail read after its append.
type TailRead struct {
	// System holds the conversation's system messages, oldest first (none
	// if it has none), as Store.System returns them.
	System []Message
	// Recent holds the newest messages selected by the query, oldest
	// first, as Store.Tail returns them: its last message, if the query
	// selected any, is the append's last.
	Recent []Message
}

// Searcher is implemented by stores that index their messages for
// PolicyRecall. A store indexes each non-system message under
// IndexTerms(m), either in the same transaction as the append that stores
// it or after it, from a watermark kept in the store (see IndexCatcher):
// then Postings indexes the messages past the watermark before it
// answers, so a message is found from the moment its append returned. The
// index entries go with the conversation; a search never scans the
// history. Every store in this module implements it.
type Searcher interface {
	// Postings returns, for each of terms, the sequence numbers of the
	// conversation's messages indexed under that term with Seq < before,
	// newest first, at most limit of them (limit >= 1): out[i] answers
	// terms[i]. Its cost depends on len(terms) and limit, not on the length
	// of the conversation. An empty terms list returns nothing; a missing
	// conversation is ErrNotFound.
	Postings(ctx context.Context, key Key, terms []string, before int64, limit int) ([][]int64, error)

	// MessagesAt returns the conversation's messages with the given
	// sequence numbers, oldest first, each once; numbers with no message
	// are skipped. A missing conversation is ErrNotFound.
	MessagesAt(ctx context.Context, key Key, seqs []int64) ([]Message, error)
}

// IndexCatcher is implemented by Searchers whose appends do not index
// their messages (so that an append writes only what it must): the index
// has a watermark, the last message up to which every message is indexed,
// kept in the store. Memory's worker calls IndexPending after appends,
// every indexEvery messages, so that Postings finds few messages past the
// watermark to index itself; work dropped or lost in a crash only leaves
// more of them.
type IndexCatcher interface {
	// IndexPending indexes the conversation's messages past the
	// watermark, up to its last message, and moves the watermark there.
	// It is idempotent and safe for concurrent use (messages indexed
	// twice change nothing); it returns ErrNotFound for a conversation
	// that does not exist (or has expired) and wraps ErrInvalid for a bad
	// key.
	IndexPending(ctx context.Context, key Key) error
}

// GenerationWriter writes a conversation's derived data (summary, facts)
// only if the conversation is still the one that data was derived from: the
// one created at created. A conversation deleted and re-created (or expired
// and started afresh) while a summarizer or extractor ran is another
// conversation, and the write fails with ErrNotFound, atomically with the
// write itself, so nothing of the old conversation reaches the new one.
// created is compared as the store keeps it (the CreatedAt its Conversation
// and Append return). The background worker uses it; every store in this
// module implements it.
type GenerationWriter interface {
	// PutSummaryOf is PutSummary, conditional on the conversation's
	// CreatedAt being created.
	PutSummaryOf(ctx context.Context, key Key, created time.Time, s Summary, prev int64) error
	// SetFactsOf is SetFacts, conditional on the conversation's CreatedAt
	// being created.
	SetFactsOf(ctx context.Context, key Key, created time.Time, facts []Fact) error
}

// FactMark is where a conversation's fact extraction stands: the facts of
// messages 1..Seq have been extracted and stored.
type FactMark struct {
	// Seq is the last message whose facts were extracted (0: none yet). A
	// conversation deleted and created again starts at 0.
	Seq int64
	// LastSeq is the conversation's newest message and Created its
	// CreatedAt, both of the snapshot Seq was read in.
	LastSeq int64
	Created time.Time
}

// FactMarker keeps, per conversation, the watermark of fact extraction (a
// FactMark), and moves it in the same transaction (or script) as the facts
// extracted up to it, so that extraction dropped from a full queue or lost
// in a crash is found again and done once: the worker extracts the
// messages after the mark at the conversation's next append, and Memory.Start
// looks for conversations whose mark lags (FactLaggards). Memory finds it
// by a type assertion; every store in this module implements it. Its
// methods are safe for concurrent use; deleting the conversation deletes
// its mark.
type FactMarker interface {
	// FactMark returns the conversation's extraction watermark. It returns
	// ErrNotFound for a conversation that does not exist (or has expired)
	// and wraps ErrInvalid for a bad key.
	FactMark(ctx context.Context, key Key) (FactMark, error)

	// SetFactsThrough records facts as SetFactsOf does (for the
	// conversation created at created only) and moves the mark from prev
	// to through, atomically, if the mark is still prev: a compare-and-set,
	// so two extractors racing over the same messages store their facts
	// once. It fails with ErrConflict if the mark is not prev, wraps
	// ErrInvalid for an invalid fact or a through outside prev+1..LastSeq,
	// and returns ErrNotFound if the conversation does not exist, has
	// expired or was created at another time. facts may be empty (the
	// messages stated none). Nothing is written on error.
	SetFactsThrough(ctx context.Context, key Key, created time.Time, facts []Fact, prev, through int64) error

	// FactLaggards returns up to limit live conversations whose mark is
	// below their LastSeq, ordered by tenant and then ID (byte order), all
	// after the key after (the zero Key: from the first). A page shorter
	// than limit is the last. It scans conversations, not messages, and
	// each call is bounded by its page. A limit outside 1..1000 wraps
	// ErrInvalid.
	FactLaggards(ctx context.Context, after Key, limit int) ([]Key, error)
}

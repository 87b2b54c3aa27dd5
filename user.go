package chatmem

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Fact scopes: a user fact belongs to the person and is seen from each of
// their conversations, a conversation fact stays with its conversation.
const (
	ScopeUser         = "user"
	ScopeConversation = "conversation"
)

// FactRef names the message that stated a fact: a conversation and a
// sequence number in it (0: the fact was set without a source message).
type FactRef struct {
	Conversation string `json:"conversation"`
	Seq          int64  `json:"seq"`
}

// UserStore keeps users: the binding of conversations to a user
// (AppendOptions.User, Conversation.User), the user's own facts with their
// history, and erasure. A user is an ID inside a tenant, named by a Key
// whose ID is the user's (Key.Validate applies); users of one tenant never
// reach another's. A user exists as long as a conversation is bound to it
// or it has a fact: there is no user row to create, and reading an unknown
// user gives empty results, not ErrNotFound. Every method is safe for
// concurrent use. Memory finds it by a type assertion; every store in this
// module implements it.
type UserStore interface {
	// UserConversations returns the user's live conversations ordered by
	// ID, one page at a time, like Store.List.
	UserConversations(ctx context.Context, user Key, page PageRequest) (Page, error)

	// UserFacts returns the current value of every user fact, ordered by
	// key; each has Conversation set to the conversation it was taken
	// from (empty when the app set it without one).
	UserFacts(ctx context.Context, user Key) ([]Fact, error)

	// UserFactHistory returns every value the named user fact has had,
	// oldest first (ErrNotFound if it never had one).
	UserFactHistory(ctx context.Context, user Key, name string) ([]Fact, error)

	// SetUserFacts records facts in order, atomically, as FactStore's
	// SetFacts does; Fact.Conversation is kept (the conversation a fact
	// came from, which need not exist any more). Each fact must pass
	// Fact.Validate, and a non-empty Conversation ValidateID (ErrInvalid).
	// Nothing is written on error.
	SetUserFacts(ctx context.Context, user Key, facts []Fact) error

	// DeleteUserFact removes the named user fact and its history
	// (ErrNotFound if there is none).
	DeleteUserFact(ctx context.Context, user Key, name string) error

	// SetDerivedUserFacts records p.Facts as the user's, as SetUserFacts
	// does, if the conversation they were taken from is still there:
	// p.Conversation exists (live), was created at p.Created (its
	// CreatedAt as the store keeps it) and is bound to p.User. Otherwise
	// it fails with ErrNotFound and writes nothing: the conversation was
	// deleted, expired, erased with its user, or deleted and created
	// again (perhaps for another user) while the extractor ran, and what
	// it said must not reach the user. The check and the write are one
	// atomic step (a transaction with the row check, one script, one
	// lock), except on stores that keep a user and a conversation in
	// places no one step reaches (Redis Cluster's slots): there the check
	// is read just before, and the write is atomic with the user's
	// erasure record instead, so an erasure that ran since is seen; what
	// can slip between is a plain Delete of the conversation, which
	// leaves the user. Facts are checked as SetUserFacts checks them
	// (ErrInvalid), p.Conversation with ValidateID. The background
	// worker uses it for the user facts it extracts.
	//
	// With p.Started set instead of p.Conversation (a write of work that
	// names the user alone, such as an import's user record), the write
	// is conditional on the user's erasure record (see DeleteUser), as a
	// creating append is: if an erasure of the user runs, or completed at
	// or after p.Started, it fails with ErrErased and writes nothing.
	// The check and the write are one atomic step on every store (the
	// record lies where the user's facts do). Exactly one of
	// p.Conversation and p.Started is set (ErrInvalid otherwise).
	//
	// With p.Replace, the facts replace every fact of the user with its
	// history, as ReplaceUserFacts does, in the same atomic step; an
	// empty p.Facts is then ErrInvalid. Without it, an empty p.Facts
	// writes nothing and reports the check alone.
	SetDerivedUserFacts(ctx context.Context, p DerivedUserFacts) error

	// DeleteUser erases the user: every conversation bound to it, expired
	// ones included, with their messages, summaries, facts, vectors,
	// index entries and idempotency keys, then the user's facts and their
	// history, and any index the store keeps of the user. It returns how
	// many conversations it deleted.
	//
	// It is fenced against every writer. It first records that the user
	// is being erased, atomically with respect to appends that create a
	// conversation bound to the user: from then on they fail with
	// ErrErased, and one that committed before is among the
	// conversations it deletes, so no conversation bound to the user
	// while it runs survives it. Last it records when the erasure
	// completed (by the store's clock), and a creating append whose work
	// started before that (AppendOptions.Started) is still refused, so
	// an in-flight turn's reply cannot re-create a conversation of the
	// user. Derived writes cannot resurrect either: SetDerivedUserFacts
	// needs the conversation, and a conversation's own derived data
	// (GenerationWriter, FactMarker) needs its generation; a write that
	// names the user alone is fenced by SetDerivedUserFacts with Started,
	// as an append is. What is not fenced is SetUserFacts and
	// ReplaceUserFacts: after the erasure they set the user's facts anew
	// (the app's word, which knows no start before the erasure). The
	// record names the user by a hash of tenant and ID, never by the ID
	// (nothing of an erased user's ID stays), holds two times, and stays
	// after the erasure (a later erasure replaces it); Users does not
	// list it.
	//
	// It works in steps that each leave the store consistent, so after a
	// crash or an error calling it again finishes the job (until then
	// the user's creating appends are refused); erasing a user with
	// nothing left is not an error (0, nil). Two erasures of one user may
	// overlap: appends are refused until the last to start completes.
	DeleteUser(ctx context.Context, user Key) (int, error)
}

// DerivedUserFacts is what SetDerivedUserFacts writes: user facts taken
// from one generation of a conversation, or from work that started at
// Started (exactly one of the two).
type DerivedUserFacts struct {
	// User is the user (tenant and ID) the facts go to.
	User Key
	// Conversation is the ID, in User's tenant, of the conversation the
	// facts were taken from, and Created its CreatedAt when they were.
	Conversation string
	Created      time.Time
	// Started, with Conversation empty, is when the work that wrote the
	// facts started: an erasure of the user that completed at or after it
	// refuses the write (ErrErased).
	Started time.Time
	// Replace makes the facts replace all of the user's (ReplaceUserFacts)
	// instead of adding to them (SetUserFacts).
	Replace bool
	// Facts are recorded in order, each with its Conversation set by the
	// caller (usually to Conversation).
	Facts []Fact
}

// Check returns an error wrapping ErrInvalid unless p names its source
// rightly: exactly one of Conversation (a valid ID) and Started, and
// facts if it replaces them. Stores call it first; the user and the facts
// themselves are theirs to check.
func (p DerivedUserFacts) Check() error {
	switch {
	case p.Conversation == "" && p.Started.IsZero():
		return fmt.Errorf("%w: derived facts of user %s name neither a conversation nor a start", ErrInvalid, p.User)
	case p.Conversation != "" && !p.Started.IsZero():
		return fmt.Errorf("%w: derived facts of user %s name both a conversation and a start", ErrInvalid, p.User)
	case p.Replace && len(p.Facts) == 0:
		return fmt.Errorf("%w: replace the facts of user %s with none", ErrInvalid, p.User)
	}
	if p.Conversation != "" {
		if err := ValidateID(p.Conversation); err != nil {
			return fmt.Errorf("conversation: %w", err)
		}
	}
	return nil
}

// UserLister is implemented by stores that list a tenant's users apart
// from their conversations, so that a user who holds facts but no live
// conversation (all deleted, or facts set before any) is found: an export
// or a migration walks it to miss nobody. Every store in this module
// implements it.
type UserLister interface {
	// Users returns one page of the IDs of the tenant's users that have a
	// fact or a live conversation bound to them, in byte order of ID,
	// like Store.List: page.After is the previous page's Next, Limit
	// 1..1000 (0 means 50; ErrInvalid outside). A user erased with
	// DeleteUser is not listed, nor one left with neither facts nor live
	// conversations; another tenant's users never are. Safe for
	// concurrent use.
	Users(ctx context.Context, tenant string, page PageRequest) (UserPage, error)
}

// UserPage is one page of a tenant's user IDs, in byte order. Next is the
// cursor for the following page, empty on the last one.
type UserPage struct {
	Users []string
	Next  string
}

// UserFactReplacer is implemented by stores that replace all of a user's
// facts in one atomic step: an import with the replace policy uses it, so
// that a failure halfway cannot leave the user without facts. Every store
// in this module implements it.
type UserFactReplacer interface {
	// ReplaceUserFacts deletes every fact of the user with its history and
	// records facts in order, as SetUserFacts does, in one atomic step:
	// a reader sees the old facts or the new ones, never neither, and on
	// error nothing changed. The user's conversations are left alone.
	// facts are checked as SetUserFacts checks them (ErrInvalid); an empty
	// list is ErrInvalid too (DeleteUser or DeleteUserFact erase).
	ReplaceUserFacts(ctx context.Context, user Key, facts []Fact) error
}

// ValidateUser checks a user ID: the rules of ValidateID. It wraps
// ErrInvalid.
func ValidateUser(id string) error {
	return ValidateID(id)
}

// factTimeline fills ValidFrom, ValidTo and SupersededBy in history, the
// values of one key oldest first: each value is valid from its CreatedAt
// until the next one's, which names the message that superseded it. conv
// is the conversation of values that name none (a conversation's facts).
func factTimeline(history []Fact, conv string) {
	for i := range history {
		f := &history[i]
		f.ValidFrom = f.CreatedAt
		if i+1 < len(history) {
			next := history[i+1]
			f.ValidTo = next.CreatedAt
			ref := FactRef{Conversation: cmp.Or(next.Conversation, conv), Seq: next.SourceSeq}
			f.SupersededBy = &ref
		}
	}
}

// mergeHistories orders the histories of several keys into one, oldest
// first (by ValidFrom, then key, then place in its history).
func mergeHistories(histories [][]Fact) []Fact {
	var out []Fact
	for _, h := range histories {
		out = append(out, h...)
	}
	slices.SortStableFunc(out, func(a, b Fact) int {
		if c := a.ValidFrom.Compare(b.ValidFrom); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

// withScope sets the scope of every fact and returns facts.
func withScope(facts []Fact, scope string, conv string) []Fact {
	for i := range facts {
		facts[i].Scope = scope
		if facts[i].ValidFrom.IsZero() {
			facts[i].ValidFrom = facts[i].CreatedAt
		}
		if scope == ScopeConversation && facts[i].Conversation == "" {
			facts[i].Conversation = conv
		}
	}
	return facts
}

// UserHit names one message of a user's conversations: a conversation of
// the user's tenant and a sequence number in it.
type UserHit struct {
	Conversation string
	Seq          int64
}

// UserSearcher is implemented by stores that index the messages of the
// conversations bound to a user for PolicyRecall across all of them (scope
// user). A store indexes each non-system message of a conversation that
// has a user under IndexTerms(m) for that user as it indexes it for
// Searcher, and drops the entries with the conversation (Delete, expiry,
// purge) and with the user (DeleteUser); a search never scans the user's
// history. Users of one tenant never reach another's.
type UserSearcher interface {
	// UserPostings returns, for each of terms, the messages of the user's
	// conversations indexed under that term, newest first (by the
	// message's CreatedAt, then by conversation ID and Seq, both
	// descending), at most limit (>= 1) of them: out[i] answers terms[i].
	// Its cost depends on len(terms) and limit, not on how many
	// conversations and messages the user has. An unknown user has empty
	// lists (no error); an empty terms list returns nothing.
	UserPostings(ctx context.Context, user Key, terms []string, limit int) ([][]UserHit, error)

	// UserMessagesAt returns the messages named by hits that belong to
	// conversations bound to the user, ordered by conversation ID and then
	// Seq, each once; hits naming no such message are skipped (a
	// conversation of another user or tenant among them).
	UserMessagesAt(ctx context.Context, user Key, hits []UserHit) ([]UserMessage, error)
}

// UserMessage is a message of one of a user's conversations.
type UserMessage struct {
	Conversation string
	Message
}

// Package storekit holds the argument checks that every chatmem store makes
// before it reads or writes anything: page limits, user keys, appends,
// postings queries, facts, fact marks and summaries. A store calls them
// instead of building chatmem.ErrInvalid errors of its own, so that the four
// stores of this module (and a fifth) refuse the same arguments with the same
// words, and storetest's cases hold for each.
//
// Every check returns nil or an error wrapping chatmem.ErrInvalid, and
// checks only its arguments: what needs the stored state (a summary past the
// conversation's last message, say) is a check a store makes inside its
// transaction with the values it read, such as CheckSummaryWithin.
//
// The checks build on the root package's validators, which stay where they
// are because chatmem.Memory uses them too: Key.Validate, ValidateID,
// ValidateUser, ValidateTime, Fact.Validate, ValidateFactKey,
// ValidateRecount, ValidateLease, TailQuery.CheckSelects and
// DerivedUserFacts.Check. A store calls those directly where storekit has
// nothing to add.
//
// storekit imports only the root package and the standard library.
package storekit

import (
	"fmt"

	"github.com/chatmem/chatmem"
)

// DefaultPageLimit is the page size of a chatmem.PageRequest with no Limit,
// and MaxPageLimit the largest Limit a store accepts.
const (
	DefaultPageLimit = 50
	MaxPageLimit     = 1000
)

// PageLimit returns the page size a chatmem.PageRequest's Limit asks for:
// DefaultPageLimit for 0, limit itself within 1..MaxPageLimit. Any other
// limit wraps chatmem.ErrInvalid. List, Users and UserConversations use it.
func PageLimit(limit int) (int, error) {
	if limit == 0 {
		return DefaultPageLimit, nil
	}
	if err := CheckPageLimit(limit); err != nil {
		return 0, err
	}
	return limit, nil
}

// CheckPageLimit checks a page size that has no default (FactLaggards'):
// one within 1..MaxPageLimit. Any other wraps chatmem.ErrInvalid.
func CheckPageLimit(limit int) error {
	if limit < 1 || limit > MaxPageLimit {
		return fmt.Errorf("%w: page limit %d is not within 1..%d", chatmem.ErrInvalid, limit, MaxPageLimit)
	}
	return nil
}

// CheckLimit checks the limit of a read that must return something
// (ConversationSince): a limit below 1 wraps chatmem.ErrInvalid.
func CheckLimit(limit int) error {
	if limit < 1 {
		return fmt.Errorf("%w: limit %d is below 1", chatmem.ErrInvalid, limit)
	}
	return nil
}

// CheckPostings checks the arguments of Postings and UserPostings other
// than the key: a limit below 1 or an empty term wraps chatmem.ErrInvalid.
func CheckPostings(terms []string, limit int) error {
	if limit < 1 {
		return fmt.Errorf("%w: postings limit %d is below 1", chatmem.ErrInvalid, limit)
	}
	for i, t := range terms {
		if t == "" {
			return fmt.Errorf("%w: search term %d is empty", chatmem.ErrInvalid, i)
		}
	}
	return nil
}

// CheckTenant checks the tenant of a listing (List, Users, a sweep) with
// chatmem.ValidateID, and says it is the tenant that is wrong.
func CheckTenant(tenant string) error {
	if err := chatmem.ValidateID(tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	return nil
}

// CheckUser checks a user key: its tenant with chatmem.ValidateID and its ID
// with chatmem.ValidateUser, saying which of the two is wrong.
func CheckUser(user chatmem.Key) error {
	if err := CheckTenant(user.Tenant); err != nil {
		return err
	}
	if err := chatmem.ValidateUser(user.ID); err != nil {
		return fmt.Errorf("user: %w", err)
	}
	return nil
}

// CheckAppend checks what the contract of chatmem.Store.Append refuses on
// every store before anything is written: a bad key, an empty batch, a bad
// opts.User, and a message CreatedAt outside chatmem.MinTime..MaxTime
// (chatmem.ValidateTime's error, with the message's index). The messages
// themselves arrive validated by chatmem.Memory; a store whose columns
// need more of them calls CheckMessage too.
func CheckAppend(key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return fmt.Errorf("%w: no messages to append", chatmem.ErrInvalid)
	}
	if e := opts.ExpectedRevision; e != nil && *e < 0 {
		return fmt.Errorf("%w: negative expected revision %d", chatmem.ErrInvalid, *e)
	}
	if opts.User != "" {
		if err := chatmem.ValidateUser(opts.User); err != nil {
			return fmt.Errorf("user: %w", err)
		}
	}
	for i := range msgs {
		if err := chatmem.ValidateTime("created_at", msgs[i].CreatedAt); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}

// CheckMessage checks what a store that keeps the role and the running
// token total needs of a message: a known role and no negative token
// count. Its error wraps chatmem.ErrInvalid; the caller adds the message's
// index.
func CheckMessage(m chatmem.Message) error {
	if !m.Role.Valid() {
		return fmt.Errorf("%w: unknown role %q", chatmem.ErrInvalid, m.Role)
	}
	if m.Tokens < 0 {
		return fmt.Errorf("%w: negative token count %d", chatmem.ErrInvalid, m.Tokens)
	}
	return nil
}

// CheckFacts checks each of facts with chatmem.Fact.Validate, and says which
// one is wrong.
func CheckFacts(facts []chatmem.Fact) error {
	for i := range facts {
		if err := facts[i].Validate(); err != nil {
			return fmt.Errorf("fact %d: %w", i, err)
		}
	}
	return nil
}

// CheckReplaceFacts checks the user of ReplaceUserFacts and that facts is
// not empty (DeleteUser and DeleteUserFact erase). The facts themselves
// are left to CheckFacts, which a store calls where it prepares them.
func CheckReplaceFacts(user chatmem.Key, facts []chatmem.Fact) error {
	if err := CheckUser(user); err != nil {
		return err
	}
	if len(facts) == 0 {
		return fmt.Errorf("%w: replace the facts of user %s with none", chatmem.ErrInvalid, user)
	}
	return nil
}

// CheckFactMark checks a move of the fact mark from prev to through
// (SetFactsThrough): prev not negative, through after it.
func CheckFactMark(prev, through int64) error {
	if prev < 0 || through <= prev {
		return fmt.Errorf("%w: fact mark %d..%d is not a forward move", chatmem.ErrInvalid, prev, through)
	}
	return nil
}

// CheckFactMarkWithin checks, against the conversation's last seq as the
// write reads it, that the fact mark does not move past the last message.
func CheckFactMarkWithin(through, lastSeq int64) error {
	if through > lastSeq {
		return fmt.Errorf("%w: fact mark %d is beyond the last message %d", chatmem.ErrInvalid, through, lastSeq)
	}
	return nil
}

// CheckSummary checks what a summary put over prev is wrong about whatever
// the conversation holds: an empty text, a negative prev, or a CoversSeq
// not after prev.
func CheckSummary(sum chatmem.Summary, prev int64) error {
	switch {
	case sum.Text == "":
		return fmt.Errorf("%w: summary text is empty", chatmem.ErrInvalid)
	case prev < 0:
		return fmt.Errorf("%w: previous summary seq %d is negative", chatmem.ErrInvalid, prev)
	case sum.CoversSeq <= prev:
		return fmt.Errorf("%w: summary covers seq %d, not after the previous summary's %d", chatmem.ErrInvalid, sum.CoversSeq, prev)
	}
	return nil
}

// CheckSummaryWithin checks, against the conversation's last seq as the
// write reads it, that a summary covers no message past the last.
func CheckSummaryWithin(coversSeq, lastSeq int64) error {
	if coversSeq > lastSeq {
		return fmt.Errorf("%w: summary covers seq %d, past the last message %d", chatmem.ErrInvalid, coversSeq, lastSeq)
	}
	return nil
}

// CheckRewind checks the arguments of chatmem.Rewinder.Rewind before
// anything is read: a bad key, toSeq below 0 or above expectedLastSeq wraps
// chatmem.ErrInvalid.
func CheckRewind(key chatmem.Key, toSeq, expectedLastSeq int64) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if toSeq < 0 || toSeq > expectedLastSeq {
		return fmt.Errorf("%w: cannot rewind to seq %d of a conversation at seq %d", chatmem.ErrInvalid, toSeq, expectedLastSeq)
	}
	return nil
}

// CheckRewindRevision checks the expectedRevision of
// chatmem.RevisionRewinder.RewindRevision before anything is read: below 0
// wraps chatmem.ErrInvalid.
func CheckRewindRevision(expectedRevision int64) error {
	if expectedRevision < 0 {
		return fmt.Errorf("%w: revision %d", chatmem.ErrInvalid, expectedRevision)
	}
	return nil
}

// RewindConflict returns the error of a rewind whose conversation is at
// seq last, not at the expected one (nil if it is): it wraps
// chatmem.ErrConflict. A store calls it inside its transaction with the
// LastSeq it read.
func RewindConflict(key chatmem.Key, last, expectedLastSeq int64) error {
	if last == expectedLastSeq {
		return nil
	}
	return fmt.Errorf("%w: conversation %s is at seq %d, not %d", chatmem.ErrConflict, key, last, expectedLastSeq)
}

// CheckRedact checks the arguments of chatmem.Redactor.Redact before
// anything is read: a bad key, a seq outside 1..ExpectedLastSeq or
// negative tokens wrap chatmem.ErrInvalid.
func CheckRedact(key chatmem.Key, r chatmem.Redaction) error {
	if err := key.Validate(); err != nil {
		return err
	}
	switch {
	case r.Seq < 1 || r.Seq > r.ExpectedLastSeq:
		return fmt.Errorf("%w: no message %d to redact in a conversation at seq %d", chatmem.ErrInvalid, r.Seq, r.ExpectedLastSeq)
	case r.Tokens < 0:
		return fmt.Errorf("%w: redacted message %d has %d tokens", chatmem.ErrInvalid, r.Seq, r.Tokens)
	case r.ExpectedRevision < 0:
		return fmt.Errorf("%w: revision %d", chatmem.ErrInvalid, r.ExpectedRevision)
	}
	return nil
}

// RedactConflict returns the error of a redaction whose conversation is
// at seq last and revision rev, not at the expected ones (nil if it is):
// it wraps chatmem.ErrConflict. A store calls it inside its transaction
// with what it read.
func RedactConflict(key chatmem.Key, last, rev int64, r chatmem.Redaction) error {
	if last != r.ExpectedLastSeq {
		return fmt.Errorf("%w: conversation %s is at seq %d, not %d", chatmem.ErrConflict, key, last, r.ExpectedLastSeq)
	}
	if rev != r.ExpectedRevision {
		return fmt.Errorf("%w: conversation %s was rewritten (revision %d, not %d)", chatmem.ErrConflict, key, rev, r.ExpectedRevision)
	}
	return nil
}

// RevisionConflict is the error of an append or rewind whose
// conversation is at revision rev, not at the expected one
// (AppendOptions.ExpectedRevision, RewindRevision's expectedRevision): it
// wraps chatmem.ErrConflict.
func RevisionConflict(key chatmem.Key, rev, expected int64) error {
	return fmt.Errorf("%w: conversation %s was rewritten (revision %d, not the expected %d)", chatmem.ErrConflict, key, rev, expected)
}

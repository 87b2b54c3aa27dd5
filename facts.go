package chatmem

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Fact is one typed key/value fact about a conversation's user ("name":
// "Kavya", "order_id": "SE-10423"), with its provenance.
type Fact struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// SourceSeq is the message the fact was taken from (0: set by the app
	// with no source message).
	SourceSeq int64 `json:"source_seq,omitempty"`
	// SetBy is who set it: "app", or the extractor's name ("rules", ...).
	SetBy      string    `json:"set_by"`
	Confidence float64   `json:"confidence"`
	CreatedAt  time.Time `json:"created_at"`
	// Conversation is the conversation a user fact was taken from (empty:
	// set by the app without one); a conversation's facts have their own
	// when Memory reads them with their scope.
	Conversation string `json:"conversation,omitempty"`
	// Scope is ScopeUser or ScopeConversation, set by the Memory methods
	// that read facts of both kinds; stores leave it empty.
	Scope string `json:"scope,omitempty"`
	// ValidFrom is when the value became current (its CreatedAt); ValidTo
	// when a new value superseded it, and SupersededBy the message that
	// stated the new one. Memory's history and scoped reads fill them;
	// a current value has no ValidTo.
	ValidFrom    time.Time `json:"valid_from,omitzero"`
	ValidTo      time.Time `json:"valid_to,omitzero"`
	SupersededBy *FactRef  `json:"superseded_by,omitempty"`
}

// Extractor finds facts in messages as they arrive. Implementations keep
// only what the user states about themselves, never the assistant's
// statements, and treat the transcript as data, never as instructions.
type Extractor interface {
	Name() string
	// Extract returns the facts stated in msgs, each with SourceSeq set to
	// the message it came from. Later facts for the same key come later.
	Extract(ctx context.Context, msgs []Message) ([]Fact, error)
}

// MaxFactValueLen is the longest fact value accepted, in bytes.
const MaxFactValueLen = 4 << 10

// Validate checks a fact before it is stored: a key of 1 to 64 characters
// from [a-z0-9_.-] starting with a letter, a non-empty valid UTF-8 value of
// at most MaxFactValueLen bytes without NUL, a non-empty SetBy, and a
// confidence in [0, 1]. It wraps ErrInvalid.
func (f Fact) Validate() error {
	if err := ValidateFactKey(f.Key); err != nil {
		return err
	}
	switch {
	case f.Value == "":
		return fmt.Errorf("%w: fact %q has an empty value", ErrInvalid, f.Key)
	case len(f.Value) > MaxFactValueLen:
		return fmt.Errorf("%w: fact %q value is %d bytes, over %d", ErrInvalid, f.Key, len(f.Value), MaxFactValueLen)
	case !utf8.ValidString(f.Value) || strings.ContainsRune(f.Value, 0):
		return fmt.Errorf("%w: fact %q value is not valid UTF-8 or contains NUL", ErrInvalid, f.Key)
	case f.SetBy == "":
		return fmt.Errorf("%w: fact %q has no set_by", ErrInvalid, f.Key)
	case !(f.Confidence >= 0 && f.Confidence <= 1): // also refuses NaN
		return fmt.Errorf("%w: fact %q confidence %v is outside [0, 1]", ErrInvalid, f.Key, f.Confidence)
	case f.SourceSeq < 0:
		return fmt.Errorf("%w: fact %q has a negative source_seq", ErrInvalid, f.Key)
	}
	if f.Conversation != "" {
		if err := ValidateID(f.Conversation); err != nil {
			return fmt.Errorf("fact %q conversation: %w", f.Key, err)
		}
	}
	return nil
}

// ValidateFactKey accepts 1 to 64 characters from [a-z0-9_.-] starting with
// a letter ("name", "order_id", "shipping.city"). It wraps ErrInvalid.
func ValidateFactKey(k string) error {
	if k == "" || len(k) > 64 {
		return fmt.Errorf("%w: fact key must be 1 to 64 characters, got %d", ErrInvalid, len(k))
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		letter := c >= 'a' && c <= 'z'
		if i == 0 && !letter {
			return fmt.Errorf("%w: fact key %q must start with a lowercase letter", ErrInvalid, k)
		}
		if !letter && !(c >= '0' && c <= '9') && c != '_' && c != '.' && c != '-' {
			return fmt.Errorf("%w: fact key %q has character %q; allowed are a-z 0-9 _ . -", ErrInvalid, k, c)
		}
	}
	return nil
}

// Facts returns the conversation's current facts, ordered by key.
func (m *Memory) Facts(ctx context.Context, key Key) ([]Fact, error) {
	fs, err := m.factStore()
	if err != nil {
		return nil, err
	}
	if err := key.Validate(); err != nil {
		return nil, err
	}
	return fs.Facts(ctx, key)
}

// SetFacts records facts set by the application: SetBy defaults to "app",
// Confidence to 1 and CreatedAt to now. Invalid facts, and facts whose
// SourceSeq is past the conversation's last message, wrap ErrInvalid and
// nothing is written.
func (m *Memory) SetFacts(ctx context.Context, key Key, facts []Fact) error {
	fs, err := m.factStore()
	if err != nil {
		return err
	}
	if err := key.Validate(); err != nil {
		return err
	}
	out := make([]Fact, len(facts))
	for i, f := range facts {
		if f.SetBy == "" {
			f.SetBy = "app"
		}
		if f.Confidence == 0 {
			f.Confidence = 1
		}
		if f.CreatedAt.IsZero() {
			f.CreatedAt = m.now()
		}
		if err := f.Validate(); err != nil {
			return err
		}
		out[i] = f
	}
	if err := m.checkSources(ctx, key, out); err != nil {
		return err
	}
	defer m.factLocks.conv.lock(key)()
	m.facts.forget(key)
	return fs.SetFacts(ctx, key, out)
}

// checkSources refuses a fact whose SourceSeq names a message the
// conversation does not have (yet): provenance must point at a message.
// Sequence numbers only grow, so what holds here holds at the write.
func (m *Memory) checkSources(ctx context.Context, key Key, facts []Fact) error {
	var maxSeq int64
	for _, f := range facts {
		maxSeq = max(maxSeq, f.SourceSeq)
	}
	if maxSeq == 0 {
		return nil
	}
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return err
	}
	for _, f := range facts {
		if f.SourceSeq > conv.LastSeq {
			return fmt.Errorf("%w: fact %q source_seq %d is past the conversation's last message (seq %d)", ErrInvalid, f.Key, f.SourceSeq, conv.LastSeq)
		}
	}
	return nil
}

// DeleteFact removes the named fact and its history.
func (m *Memory) DeleteFact(ctx context.Context, key Key, name string) error {
	fs, err := m.factStore()
	if err != nil {
		return err
	}
	if err := key.Validate(); err != nil {
		return err
	}
	m.facts.forget(key)
	return fs.DeleteFact(ctx, key, name)
}

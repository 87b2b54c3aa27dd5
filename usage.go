package chatmem

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The kinds of model call the cost ledger counts (Usage.Kind): the chat
// proxy's and the Responses endpoint's upstream calls, and the memory's own
// calls (the summarizer, the extractors, the embedder).
const (
	CallChat      = "chat"
	CallResponses = "responses"
	CallSummarize = "summarize"
	CallExtract   = "extract"
	CallEmbed     = "embed"
)

// CallKinds are the values of Usage.Kind, the memory's own last.
var CallKinds = []string{CallChat, CallResponses, CallSummarize, CallExtract, CallEmbed}

// memoryCall reports whether kind is one of the memory's own model calls,
// which Limit.Memory bounds (the others are the proxy's).
func memoryCall(kind string) bool {
	return kind == CallSummarize || kind == CallExtract || kind == CallEmbed
}

// Tokens are the tokens of model calls by kind, as the provider reported
// them. Input counts every prompt token, CachedInput among them (the part
// the provider's prompt cache served); Output counts every generated
// token, Reasoning among them; EmbeddingInput counts the tokens of
// embedding calls, which are neither.
type Tokens struct {
	Input          int64 `json:"input_tokens"`
	CachedInput    int64 `json:"cached_input_tokens"`
	Output         int64 `json:"output_tokens"`
	Reasoning      int64 `json:"reasoning_tokens"`
	EmbeddingInput int64 `json:"embedding_input_tokens"`
}

// Total is the tokens a limit counts: Input, Output and EmbeddingInput
// (cached and reasoning tokens are parts of the first two).
func (t Tokens) Total() int64 { return t.Input + t.Output + t.EmbeddingInput }

// Add returns t plus u.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{
		Input: t.Input + u.Input, CachedInput: t.CachedInput + u.CachedInput, Output: t.Output + u.Output,
		Reasoning: t.Reasoning + u.Reasoning, EmbeddingInput: t.EmbeddingInput + u.EmbeddingInput,
	}
}

// check refuses negative counts and parts larger than their whole.
func (t Tokens) check() error {
	switch {
	case t.Input < 0 || t.CachedInput < 0 || t.Output < 0 || t.Reasoning < 0 || t.EmbeddingInput < 0:
		return fmt.Errorf("%w: usage: negative token count", ErrInvalid)
	case t.CachedInput > t.Input:
		return fmt.Errorf("%w: usage: %d cached input tokens of %d input tokens", ErrInvalid, t.CachedInput, t.Input)
	case t.Reasoning > t.Output:
		return fmt.Errorf("%w: usage: %d reasoning tokens of %d output tokens", ErrInvalid, t.Reasoning, t.Output)
	}
	return nil
}

// Usage is the usage of one or more model calls of one kind, by one
// tenant's user and conversation, with one model. User and Conversation
// may be empty (a call made for no conversation, or for no user's; a
// user's erasure empties both, see UsageStore.AnonymizeUsage).
type Usage struct {
	Tenant       string `json:"tenant,omitempty"`
	User         string `json:"user,omitempty"`
	Conversation string `json:"conversation,omitempty"`
	Model        string `json:"model,omitempty"`
	Kind         string `json:"kind,omitempty"`
	Calls        int64  `json:"calls"`
	Tokens
}

// UsageRecord is usage added to the hour starting at Hour (UTC, on the
// hour): the unit a UsageStore keeps.
type UsageRecord struct {
	Hour time.Time
	Usage
}

// bucketOf is what identifies a record's hour bucket: all but the counts.
type bucketOf struct {
	hour                                    int64
	tenant, user, conversation, model, kind string
}

func (r UsageRecord) bucket() bucketOf {
	return bucketOf{r.Hour.Unix(), r.Tenant, r.User, r.Conversation, r.Model, r.Kind}
}

// Validate checks a record before a UsageStore adds it: a valid tenant, a
// user ID valid or empty, a conversation ID valid or empty, a model of 1
// to MaxIDLen bytes of printable ASCII without '|', a kind of CallKinds,
// an hour on the hour, and counts that are not negative with parts no
// larger than their wholes. It wraps ErrInvalid.
func (r UsageRecord) Validate() error {
	if err := ValidateID(r.Tenant); err != nil {
		return fmt.Errorf("usage tenant: %w", err)
	}
	if r.User != "" {
		if err := ValidateUser(r.User); err != nil {
			return fmt.Errorf("usage user: %w", err)
		}
	}
	if r.Conversation != "" {
		if err := ValidateID(r.Conversation); err != nil {
			return fmt.Errorf("usage conversation: %w", err)
		}
	}
	if err := ValidateModel(r.Model); err != nil {
		return err
	}
	if !slices.Contains(CallKinds, r.Kind) {
		return fmt.Errorf("%w: usage kind %q: want one of %s", ErrInvalid, r.Kind, strings.Join(CallKinds, ", "))
	}
	if r.Hour.IsZero() || !r.Hour.Equal(r.Hour.Truncate(time.Hour)) {
		return fmt.Errorf("%w: usage hour %s is not on the hour", ErrInvalid, r.Hour)
	}
	if r.Calls < 0 {
		return fmt.Errorf("%w: usage: negative call count", ErrInvalid)
	}
	return r.Tokens.check()
}

// ValidateModel accepts a model name as the ledger keeps it: 1 to
// MaxIDLen bytes of printable ASCII, without '|'. It wraps ErrInvalid.
func ValidateModel(model string) error {
	if model == "" || len(model) > MaxIDLen {
		return fmt.Errorf("%w: usage model must be 1 to %d bytes", ErrInvalid, MaxIDLen)
	}
	for i := 0; i < len(model); i++ {
		if c := model[i]; c < 0x21 || c > 0x7e || c == '|' {
			return fmt.Errorf("%w: usage model %q: printable ASCII without spaces or '|' only", ErrInvalid, model)
		}
	}
	return nil
}

// What UsageQuery.GroupBy groups by.
const (
	GroupByTenant       = "tenant"
	GroupByUser         = "user"
	GroupByConversation = "conversation"
	GroupByModel        = "model"
)

// UsageGroups are the values of UsageQuery.GroupBy.
var UsageGroups = []string{GroupByTenant, GroupByUser, GroupByConversation, GroupByModel}

// UsageQuery asks a UsageStore for the usage of the hours from From
// (included) to To (excluded) of Tenant (empty: every tenant), summed by
// GroupBy, model and kind.
type UsageQuery struct {
	Tenant   string
	From, To time.Time
	GroupBy  string
}

// Validate checks q: a valid tenant or none, From before To, both on the
// hour, and a GroupBy of UsageGroups. It wraps ErrInvalid.
func (q UsageQuery) Validate() error {
	if q.Tenant != "" {
		if err := ValidateID(q.Tenant); err != nil {
			return fmt.Errorf("usage tenant: %w", err)
		}
	}
	if !slices.Contains(UsageGroups, q.GroupBy) {
		return fmt.Errorf("%w: group_by %q: want one of %s", ErrInvalid, q.GroupBy, strings.Join(UsageGroups, ", "))
	}
	if q.From.IsZero() || q.To.IsZero() || !q.From.Before(q.To) {
		return fmt.Errorf("%w: usage range: from must be before to", ErrInvalid)
	}
	if !q.From.Equal(q.From.Truncate(time.Hour)) || !q.To.Equal(q.To.Truncate(time.Hour)) {
		return fmt.Errorf("%w: usage range: from and to must be on the hour", ErrInvalid)
	}
	return nil
}

// UsageStore keeps the cost ledger: the usage of model calls in hour
// buckets, one per tenant, user, conversation, model, kind and hour, so
// that every replica of a server adds to the same counts. It is optional:
// Ledger keeps its counts in the process without one. Its methods are
// safe for concurrent use, and concurrent adds to one bucket all count.
type UsageStore interface {
	// AddUsage adds each record's calls and tokens to its bucket,
	// creating the bucket at zero if it has none, all records or none
	// (an invalid record, see UsageRecord.Validate, wraps ErrInvalid and
	// nothing is added). Records may repeat a bucket.
	AddUsage(ctx context.Context, recs []UsageRecord) error
	// Usage returns the sums of the buckets q selects (see UsageQuery),
	// one per value of q.GroupBy, model and kind, with the other fields
	// empty, ordered by that value, model and kind; none is an empty
	// result, not an error. An invalid q wraps ErrInvalid.
	Usage(ctx context.Context, q UsageQuery) ([]Usage, error)
	// AnonymizeUsage is the ledger's part of a user's erasure: the
	// user's buckets are added to the buckets of the same tenant, model,
	// kind and hour with no user and no conversation, and deleted. The
	// tenant's totals stay as they were; nothing names the user or their
	// conversations any more. A user with no buckets is no error; an
	// invalid key wraps ErrInvalid.
	AnonymizeUsage(ctx context.Context, user Key) error
}

// GroupUsage sums recs as UsageStore.Usage does for q (which it does not
// validate): the records of q's tenant (all for none) and hours, one sum
// per value of q.GroupBy, model and kind, ordered by them. Stores that
// cannot group in a query group with it.
func GroupUsage(recs []UsageRecord, q UsageQuery) []Usage {
	type gk struct{ group, model, kind string }
	sums := map[gk]*Usage{}
	for _, r := range recs {
		if (q.Tenant != "" && r.Tenant != q.Tenant) || r.Hour.Before(q.From) || !r.Hour.Before(q.To) {
			continue
		}
		u := Usage{Model: r.Model, Kind: r.Kind}
		var g string
		switch q.GroupBy {
		case GroupByTenant:
			g, u.Tenant = r.Tenant, r.Tenant
		case GroupByUser:
			g, u.User = r.User, r.User
		case GroupByConversation:
			g, u.Conversation = r.Conversation, r.Conversation
		}
		k := gk{g, r.Model, r.Kind}
		s := sums[k]
		if s == nil {
			s = &u
			sums[k] = s
		}
		s.Calls += r.Calls
		s.Tokens = s.Tokens.Add(r.Tokens)
	}
	out := make([]Usage, 0, len(sums))
	for _, s := range sums {
		out = append(out, *s)
	}
	SortUsage(out, q.GroupBy)
	return out
}

// SortUsage orders rows by the field group names, then model and kind.
func SortUsage(rows []Usage, group string) {
	slices.SortFunc(rows, func(a, b Usage) int {
		if c := strings.Compare(a.group(group), b.group(group)); c != 0 {
			return c
		}
		if c := strings.Compare(a.Model, b.Model); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
}

// group returns u's field that group names (Model for GroupByModel).
func (u Usage) group(group string) string {
	switch group {
	case GroupByTenant:
		return u.Tenant
	case GroupByUser:
		return u.User
	case GroupByConversation:
		return u.Conversation
	}
	return u.Model
}

// ModelUsage is what one model call used, as a summarizer, an extractor or
// an embedder that calls a model reports it (ReportUsage).
type ModelUsage struct {
	// Model is the model the call named.
	Model string
	Tokens
}

// usageReportKey is the context key of the reporter of model usage.
type usageReportKey struct{}

// WithUsageReport returns ctx with report as the receiver of the usage
// that ReportUsage reports under it. Memory sets one around each call to
// its summarizer, extractors and embedder, so those that call a model
// report what the call used by calling ReportUsage with the context they
// were given; the ones that call none need do nothing.
func WithUsageReport(ctx context.Context, report func(ModelUsage)) context.Context {
	return context.WithValue(ctx, usageReportKey{}, report)
}

// ReportUsage reports the usage of a model call made under ctx to the
// receiver WithUsageReport set, if any (none: it does nothing). A
// Summarizer, Extractor or Embedder calls it once per model call, with the
// context Memory gave it, after the call answered (a call that failed with
// a reported usage counts too: the provider bills it).
func ReportUsage(ctx context.Context, u ModelUsage) {
	if report, ok := ctx.Value(usageReportKey{}).(func(ModelUsage)); ok && report != nil {
		report(u)
	}
}

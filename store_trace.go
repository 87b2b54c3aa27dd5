package chatmem

import (
	"context"
	"errors"
	"time"
)

// The store's calls are traced by wrappers around the store and each of
// its optional interfaces, set up in New when Options.Tracer is set: one
// span (SpanStore) a call, named "store." and the method, with the method
// as db.operation.name. Without a Tracer Memory calls the store directly.
// Memory.Store, Export and Import hand out the store itself, whose
// optional interfaces callers find by type assertion.

// traceStoreCall runs f in a span of the store's operation op. A missing
// record (ErrNotFound) and a lost condition (ErrConflict) are answers, not
// failures: the span is not marked failed for them.
func traceStoreCall[T any](ctx context.Context, t Tracer, op string, f func(context.Context) (T, error)) (T, error) {
	ctx, sp := t.Start(ctx, "store."+op, SpanStore, Attr{Key: "db.operation.name", Value: op})
	v, err := f(ctx)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		sp.SetAttributes(Attr{Key: "chatmem.store.outcome", Value: outcomeOf(err)})
		sp.End(nil)
	} else {
		sp.End(err)
	}
	return v, err
}

func outcomeOf(err error) string {
	if errors.Is(err, ErrNotFound) {
		return "not_found"
	}
	return "conflict"
}

// traceStoreErr is traceStoreCall for a method that returns an error only.
func traceStoreErr(ctx context.Context, t Tracer, op string, f func(context.Context) error) error {
	_, err := traceStoreCall(ctx, t, op, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// tracedStore traces the Store's methods.
type tracedStore struct {
	Store
	t Tracer
}

func (s tracedStore) Append(ctx context.Context, key Key, msgs []Message, opts AppendOptions) (AppendResult, error) {
	return traceStoreCall(ctx, s.t, "Append", func(ctx context.Context) (AppendResult, error) { return s.Store.Append(ctx, key, msgs, opts) })
}

func (s tracedStore) Conversation(ctx context.Context, key Key) (Conversation, error) {
	return traceStoreCall(ctx, s.t, "Conversation", func(ctx context.Context) (Conversation, error) { return s.Store.Conversation(ctx, key) })
}

func (s tracedStore) List(ctx context.Context, tenant string, page PageRequest) (Page, error) {
	return traceStoreCall(ctx, s.t, "List", func(ctx context.Context) (Page, error) { return s.Store.List(ctx, tenant, page) })
}

func (s tracedStore) Delete(ctx context.Context, key Key) error {
	return traceStoreErr(ctx, s.t, "Delete", func(ctx context.Context) error { return s.Store.Delete(ctx, key) })
}

func (s tracedStore) Tail(ctx context.Context, key Key, q TailQuery) ([]Message, error) {
	return traceStoreCall(ctx, s.t, "Tail", func(ctx context.Context) ([]Message, error) { return s.Store.Tail(ctx, key, q) })
}

func (s tracedStore) Range(ctx context.Context, key Key, after int64, limit int) ([]Message, error) {
	return traceStoreCall(ctx, s.t, "Range", func(ctx context.Context) ([]Message, error) { return s.Store.Range(ctx, key, after, limit) })
}

func (s tracedStore) System(ctx context.Context, key Key) ([]Message, error) {
	return traceStoreCall(ctx, s.t, "System", func(ctx context.Context) ([]Message, error) { return s.Store.System(ctx, key) })
}

// traced returns c with every capability the store has wrapped to trace
// its calls with t. A capability the store lacks stays nil.
func (c capabilities) traced(t Tracer) capabilities {
	if c.summaries != nil {
		c.summaries = tracedSummaries{c.summaries, t}
	}
	if c.facts != nil {
		c.facts = tracedFacts{c.facts, t}
	}
	if c.vectors != nil {
		c.vectors = tracedVectors{c.vectors, t}
	}
	if c.users != nil {
		c.users = tracedUsers{c.users, t}
	}
	if c.userLister != nil {
		c.userLister = tracedUserLister{c.userLister, t}
	}
	if c.search != nil {
		c.search = tracedSearch{c.search, t}
	}
	if c.userSearch != nil {
		c.userSearch = tracedUserSearch{c.userSearch, t}
	}
	if c.indexCatcher != nil {
		c.indexCatcher = tracedIndexCatcher{c.indexCatcher, t}
	}
	if c.leaser != nil {
		c.leaser = tracedLeaser{c.leaser, t}
	}
	if c.generations != nil {
		c.generations = tracedGenerations{c.generations, t}
	}
	if c.factMarks != nil {
		c.factMarks = tracedFactMarks{c.factMarks, t}
	}
	if c.recounter != nil {
		c.recounter = tracedRecounter{c.recounter, t}
	}
	if c.since != nil {
		c.since = tracedSince{c.since, t}
	}
	if c.tailAppend != nil {
		c.tailAppend = tracedTailAppend{c.tailAppend, t}
	}
	if c.rewinder != nil {
		c.rewinder = tracedRewinder{c.rewinder, t}
	}
	if c.revisionRewinder != nil {
		c.revisionRewinder = tracedRevisionRewinder{tracedRewinder{c.revisionRewinder, t}, c.revisionRewinder}
	}
	return c
}

type tracedSummaries struct {
	s SummaryStore
	t Tracer
}

func (s tracedSummaries) Summary(ctx context.Context, key Key) (Summary, error) {
	return traceStoreCall(ctx, s.t, "Summary", func(ctx context.Context) (Summary, error) { return s.s.Summary(ctx, key) })
}

func (s tracedSummaries) PutSummary(ctx context.Context, key Key, sum Summary, prev int64) error {
	return traceStoreErr(ctx, s.t, "PutSummary", func(ctx context.Context) error { return s.s.PutSummary(ctx, key, sum, prev) })
}

type tracedFacts struct {
	s FactStore
	t Tracer
}

func (s tracedFacts) Facts(ctx context.Context, key Key) ([]Fact, error) {
	return traceStoreCall(ctx, s.t, "Facts", func(ctx context.Context) ([]Fact, error) { return s.s.Facts(ctx, key) })
}

func (s tracedFacts) FactHistory(ctx context.Context, key Key, name string) ([]Fact, error) {
	return traceStoreCall(ctx, s.t, "FactHistory", func(ctx context.Context) ([]Fact, error) { return s.s.FactHistory(ctx, key, name) })
}

func (s tracedFacts) SetFacts(ctx context.Context, key Key, facts []Fact) error {
	return traceStoreErr(ctx, s.t, "SetFacts", func(ctx context.Context) error { return s.s.SetFacts(ctx, key, facts) })
}

func (s tracedFacts) DeleteFact(ctx context.Context, key Key, name string) error {
	return traceStoreErr(ctx, s.t, "DeleteFact", func(ctx context.Context) error { return s.s.DeleteFact(ctx, key, name) })
}

type tracedVectors struct {
	s VectorStore
	t Tracer
}

func (s tracedVectors) PutVectors(ctx context.Context, key Key, model string, seqs []int64, vecs [][]float32) error {
	return traceStoreErr(ctx, s.t, "PutVectors", func(ctx context.Context) error { return s.s.PutVectors(ctx, key, model, seqs, vecs) })
}

func (s tracedVectors) NearestVectors(ctx context.Context, key Key, model string, query []float32, before int64, span, limit int) ([]VectorHit, error) {
	return traceStoreCall(ctx, s.t, "NearestVectors", func(ctx context.Context) ([]VectorHit, error) {
		return s.s.NearestVectors(ctx, key, model, query, before, span, limit)
	})
}

type tracedUsers struct {
	s UserStore
	t Tracer
}

func (s tracedUsers) UserConversations(ctx context.Context, user Key, page PageRequest) (Page, error) {
	return traceStoreCall(ctx, s.t, "UserConversations", func(ctx context.Context) (Page, error) { return s.s.UserConversations(ctx, user, page) })
}

func (s tracedUsers) UserFacts(ctx context.Context, user Key) ([]Fact, error) {
	return traceStoreCall(ctx, s.t, "UserFacts", func(ctx context.Context) ([]Fact, error) { return s.s.UserFacts(ctx, user) })
}

func (s tracedUsers) UserFactHistory(ctx context.Context, user Key, name string) ([]Fact, error) {
	return traceStoreCall(ctx, s.t, "UserFactHistory", func(ctx context.Context) ([]Fact, error) { return s.s.UserFactHistory(ctx, user, name) })
}

func (s tracedUsers) SetUserFacts(ctx context.Context, user Key, facts []Fact) error {
	return traceStoreErr(ctx, s.t, "SetUserFacts", func(ctx context.Context) error { return s.s.SetUserFacts(ctx, user, facts) })
}

func (s tracedUsers) DeleteUserFact(ctx context.Context, user Key, name string) error {
	return traceStoreErr(ctx, s.t, "DeleteUserFact", func(ctx context.Context) error { return s.s.DeleteUserFact(ctx, user, name) })
}

func (s tracedUsers) SetDerivedUserFacts(ctx context.Context, p DerivedUserFacts) error {
	return traceStoreErr(ctx, s.t, "SetDerivedUserFacts", func(ctx context.Context) error { return s.s.SetDerivedUserFacts(ctx, p) })
}

func (s tracedUsers) DeleteUser(ctx context.Context, user Key) (int, error) {
	return traceStoreCall(ctx, s.t, "DeleteUser", func(ctx context.Context) (int, error) { return s.s.DeleteUser(ctx, user) })
}

type tracedUserLister struct {
	s UserLister
	t Tracer
}

func (s tracedUserLister) Users(ctx context.Context, tenant string, page PageRequest) (UserPage, error) {
	return traceStoreCall(ctx, s.t, "Users", func(ctx context.Context) (UserPage, error) { return s.s.Users(ctx, tenant, page) })
}

type tracedSearch struct {
	s Searcher
	t Tracer
}

func (s tracedSearch) Postings(ctx context.Context, key Key, terms []string, before int64, limit int) ([][]int64, error) {
	return traceStoreCall(ctx, s.t, "Postings", func(ctx context.Context) ([][]int64, error) { return s.s.Postings(ctx, key, terms, before, limit) })
}

func (s tracedSearch) MessagesAt(ctx context.Context, key Key, seqs []int64) ([]Message, error) {
	return traceStoreCall(ctx, s.t, "MessagesAt", func(ctx context.Context) ([]Message, error) { return s.s.MessagesAt(ctx, key, seqs) })
}

type tracedUserSearch struct {
	s UserSearcher
	t Tracer
}

func (s tracedUserSearch) UserPostings(ctx context.Context, user Key, terms []string, limit int) ([][]UserHit, error) {
	return traceStoreCall(ctx, s.t, "UserPostings", func(ctx context.Context) ([][]UserHit, error) { return s.s.UserPostings(ctx, user, terms, limit) })
}

func (s tracedUserSearch) UserMessagesAt(ctx context.Context, user Key, hits []UserHit) ([]UserMessage, error) {
	return traceStoreCall(ctx, s.t, "UserMessagesAt", func(ctx context.Context) ([]UserMessage, error) { return s.s.UserMessagesAt(ctx, user, hits) })
}

type tracedIndexCatcher struct {
	s IndexCatcher
	t Tracer
}

func (s tracedIndexCatcher) IndexPending(ctx context.Context, key Key) error {
	return traceStoreErr(ctx, s.t, "IndexPending", func(ctx context.Context) error { return s.s.IndexPending(ctx, key) })
}

type tracedLeaser struct {
	s Leaser
	t Tracer
}

func (s tracedLeaser) Lease(ctx context.Context, key Key, kind, holder string, ttl time.Duration) (bool, error) {
	return traceStoreCall(ctx, s.t, "Lease", func(ctx context.Context) (bool, error) { return s.s.Lease(ctx, key, kind, holder, ttl) })
}

func (s tracedLeaser) Release(ctx context.Context, key Key, kind, holder string) (bool, error) {
	return traceStoreCall(ctx, s.t, "Release", func(ctx context.Context) (bool, error) { return s.s.Release(ctx, key, kind, holder) })
}

type tracedGenerations struct {
	s GenerationWriter
	t Tracer
}

func (s tracedGenerations) PutSummaryOf(ctx context.Context, key Key, created time.Time, sum Summary, prev int64) error {
	return traceStoreErr(ctx, s.t, "PutSummaryOf", func(ctx context.Context) error { return s.s.PutSummaryOf(ctx, key, created, sum, prev) })
}

func (s tracedGenerations) SetFactsOf(ctx context.Context, key Key, created time.Time, facts []Fact) error {
	return traceStoreErr(ctx, s.t, "SetFactsOf", func(ctx context.Context) error { return s.s.SetFactsOf(ctx, key, created, facts) })
}

type tracedFactMarks struct {
	s FactMarker
	t Tracer
}

func (s tracedFactMarks) FactMark(ctx context.Context, key Key) (FactMark, error) {
	return traceStoreCall(ctx, s.t, "FactMark", func(ctx context.Context) (FactMark, error) { return s.s.FactMark(ctx, key) })
}

func (s tracedFactMarks) SetFactsThrough(ctx context.Context, key Key, created time.Time, facts []Fact, prev, through int64) error {
	return traceStoreErr(ctx, s.t, "SetFactsThrough", func(ctx context.Context) error {
		return s.s.SetFactsThrough(ctx, key, created, facts, prev, through)
	})
}

func (s tracedFactMarks) FactLaggards(ctx context.Context, after Key, limit int) ([]Key, error) {
	return traceStoreCall(ctx, s.t, "FactLaggards", func(ctx context.Context) ([]Key, error) { return s.s.FactLaggards(ctx, after, limit) })
}

type tracedRecounter struct {
	s Recounter
	t Tracer
}

func (s tracedRecounter) Recount(ctx context.Context, key Key, tokenizer string, lastSeq int64, tokens []int) error {
	return traceStoreErr(ctx, s.t, "Recount", func(ctx context.Context) error { return s.s.Recount(ctx, key, tokenizer, lastSeq, tokens) })
}

type tracedSince struct {
	s SinceReader
	t Tracer
}

// sinceResult is ConversationSince's two results, for traceStoreCall.
type sinceResult struct {
	conv Conversation
	msgs []Message
}

func (s tracedSince) ConversationSince(ctx context.Context, key Key, after int64, limit int) (Conversation, []Message, error) {
	r, err := traceStoreCall(ctx, s.t, "ConversationSince", func(ctx context.Context) (sinceResult, error) {
		conv, msgs, err := s.s.ConversationSince(ctx, key, after, limit)
		return sinceResult{conv, msgs}, err
	})
	return r.conv, r.msgs, err
}

type tracedTailAppend struct {
	s TailAppender
	t Tracer
}

// appendTailResult is AppendTail's two results, for traceStoreCall.
type appendTailResult struct {
	res  AppendResult
	tail TailRead
}

func (s tracedTailAppend) AppendTail(ctx context.Context, key Key, msgs []Message, opts AppendOptions, q TailQuery) (AppendResult, TailRead, error) {
	r, err := traceStoreCall(ctx, s.t, "AppendTail", func(ctx context.Context) (appendTailResult, error) {
		res, tail, err := s.s.AppendTail(ctx, key, msgs, opts, q)
		return appendTailResult{res, tail}, err
	})
	return r.res, r.tail, err
}

type tracedRewinder struct {
	s Rewinder
	t Tracer
}

func (s tracedRewinder) Rewind(ctx context.Context, key Key, toSeq, expectedLastSeq int64) (Conversation, error) {
	return traceStoreCall(ctx, s.t, "Rewind", func(ctx context.Context) (Conversation, error) { return s.s.Rewind(ctx, key, toSeq, expectedLastSeq) })
}

type tracedRevisionRewinder struct {
	tracedRewinder
	r RevisionRewinder
}

func (s tracedRevisionRewinder) RewindRevision(ctx context.Context, key Key, toSeq, expectedLastSeq, expectedRevision int64) (Conversation, error) {
	return traceStoreCall(ctx, s.t, "RewindRevision", func(ctx context.Context) (Conversation, error) {
		return s.r.RewindRevision(ctx, key, toSeq, expectedLastSeq, expectedRevision)
	})
}

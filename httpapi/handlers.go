package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/chatmem/chatmem"
)

// maxFactsPerRequest bounds the facts of one PATCH or PUT.
const maxFactsPerRequest = 1000

// Paging bounds.
const (
	defaultMessagesLimit = 100
	defaultListLimit     = 50
	maxPageLimit         = 1000
)

// readyTimeout bounds the store's Ping in /readyz.
const readyTimeout = 5 * time.Second

func conversationOf(id string, c chatmem.Conversation) Conversation {
	c.Key = chatmem.Key{}
	return Conversation{ID: id, Conversation: c}
}

// etag is the entity tag of a conversation's state: its last sequence
// number, which If-Match takes back.
func etag(lastSeq int64) string { return `"` + strconv.FormatInt(lastSeq, 10) + `"` }

func (s *Server) appendMessages(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	msgs, opts, err := s.appendRequest(c)
	if err != nil {
		return err
	}
	res, err := timed(s, "append", func() (chatmem.AppendResult, error) {
		return s.mem.Append(c.r.Context(), key, msgs, opts)
	})
	if err != nil {
		return err
	}
	status := appendStatus(c, res)
	writeJSON(c.w, status, AppendResponse{Messages: nonNil(res.Messages), Conversation: conversationOf(key.ID, res.Conversation)})
	return nil
}

// appendRequest reads an append's headers (If-Match, Idempotency-Key) and
// body, as POST /v1/conversations/{id}/messages and /turn take them.
func (s *Server) appendRequest(c *call) ([]chatmem.Message, chatmem.AppendOptions, error) {
	var opts chatmem.AppendOptions
	var err error
	if opts.ExpectedLastSeq, err = ifMatch(c.r); err != nil {
		return nil, opts, err
	}
	if v, ok, err := singleHeader(c.r, "Idempotency-Key"); err != nil {
		return nil, opts, err
	} else if ok {
		if err := checkIdempotencyKey(v); err != nil {
			return nil, opts, err
		}
		opts.IdempotencyKey = v
	}
	body, err := readBody(c.w, c.r, s.limits.MaxBodyBytes)
	if err != nil {
		return nil, opts, err
	}
	req, err := decodeAppend(body, s.limits)
	if err != nil {
		return nil, opts, err
	}
	opts.Tokenizer, opts.TTL, opts.User = req.Tokenizer, req.TTL(), req.User
	return req.Messages, opts, nil
}

// appendStatus sets an append's response headers (ETag, and
// Idempotent-Replayed on a retry) and returns its status: 201, or 200
// for a retry answered from its idempotency key.
func appendStatus(c *call, res chatmem.AppendResult) int {
	status := http.StatusCreated
	if res.Replayed {
		c.w.Header().Set("Idempotent-Replayed", "true")
		status = http.StatusOK
	}
	c.w.Header().Set("ETag", etag(res.Conversation.LastSeq))
	return status
}

func (s *Server) listMessages(c *call) error {
	msgs, next, err := seqPage(s, c, "range", s.mem.Messages, func(m chatmem.Message) int64 { return m.Seq })
	if err != nil {
		return err
	}
	key, _ := c.key()
	s.withPromptTokens(c.r.Context(), key, msgs)
	writeJSON(c.w, http.StatusOK, MessagesPage{Messages: msgs, NextAfter: next})
	return nil
}

// seqPage reads one page of what a conversation keeps by seq (its
// messages, its receipts) with read, timed as op: the query's after and
// limit, one more than asked read to tell whether another page follows
// (next: the after of that page; nil: none follows).
func seqPage[T any](s *Server, c *call, op string, read func(context.Context, chatmem.Key, int64, int) ([]T, error), seq func(T) int64) (_ []T, next *int64, _ error) {
	key, err := c.key()
	if err != nil {
		return nil, nil, err
	}
	q, err := query(c.r, "after", "limit")
	if err != nil {
		return nil, nil, err
	}
	after, err := intParam(q, "after", 0, 0, 1<<62)
	if err != nil {
		return nil, nil, err
	}
	limit, err := intParam(q, "limit", defaultMessagesLimit, 1, maxPageLimit)
	if err != nil {
		return nil, nil, err
	}
	items, err := timed(s, op, func() ([]T, error) {
		return read(c.r.Context(), key, int64(after), int(limit)+1)
	})
	if err != nil {
		return nil, nil, err
	}
	items = nonNil(items)
	if len(items) > int(limit) {
		items = items[:limit]
		n := seq(items[limit-1])
		next = &n
	}
	return items, next, nil
}

func (s *Server) getContext(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	p, copts, err := contextParams(c)
	if err != nil {
		return err
	}
	w, err := timed(s, "context", func() (chatmem.Window, error) {
		return s.mem.Context(c.r.Context(), key, p, copts)
	})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, s.sentWindow(p, w))
	return nil
}

// sentWindow observes the size of a window about to be answered under p
// and returns it with its nil lists as [].
func (s *Server) sentWindow(p chatmem.Policy, w chatmem.Window) chatmem.Window {
	w.Messages = nonNil(w.Messages)
	w.Facts = nonNil(w.Facts)
	s.metrics.contextTokens.WithLabelValues(string(p.Kind)).Observe(float64(w.Tokens))
	return w
}

// contextParams reads a context read's query parameters (policy, budget,
// turns, facts, recall, recent, scope, tokenizer, cache, low_water,
// preview, receipt), as GET
// /v1/conversations/{id}/context and POST .../turn take them. Parameters
// left out take the defaults every surface shares (chatmem.DefaultPolicy,
// DefaultBudget, DefaultTurns).
func contextParams(c *call) (chatmem.Policy, chatmem.ContextOptions, error) {
	var none chatmem.ContextOptions
	q, err := query(c.r, "policy", "budget", "turns", "facts", "recall", "recent", "scope", "tokenizer", "cache", "low_water", "preview", "receipt")
	if err != nil {
		return chatmem.Policy{}, none, err
	}
	p := chatmem.Policy{Kind: chatmem.PolicyKind(q.Get("policy"))}
	if !q.Has("policy") {
		p.Kind = chatmem.DefaultPolicy
	}
	if !slices.Contains(chatmem.Policies, p.Kind) {
		return p, none, fmt.Errorf("%w: parameter policy: unknown policy %q (want one of %s)", chatmem.ErrInvalid, p.Kind, policyNames())
	}
	budget, err := intParam(q, "budget", 0, 1, 1<<31-1)
	if err != nil {
		return p, none, err
	}
	turns, err := intParam(q, "turns", 0, 1, 1<<31-1)
	if err != nil {
		return p, none, err
	}
	recent, err := intParam(q, "recent", 0, 1, 1<<31-1)
	if err != nil {
		return p, none, err
	}
	lowWater, err := intParam(q, "low_water", 0, 1, 95)
	if err != nil {
		return p, none, err
	}
	p.Budget, p.Turns, p.Recent, p.Cache, p.LowWater = int(budget), int(turns), int(recent), q.Get("cache"), int(lowWater)
	switch {
	case p.Kind != chatmem.PolicyAll && p.Kind != chatmem.PolicyLastTurns && !q.Has("budget"):
		p.Budget = chatmem.DefaultBudget
	case p.Kind == chatmem.PolicyLastTurns && !q.Has("turns"):
		p.Turns = chatmem.DefaultTurns
	}
	if v := q.Get("facts"); v != "" {
		if p.Facts, err = strconv.ParseBool(v); err != nil {
			return p, none, fmt.Errorf("%w: parameter facts must be true or false, got %q", chatmem.ErrInvalid, v)
		}
	}
	if v := q.Get("recall"); v != "" {
		if p.Recall, err = strconv.ParseBool(v); err != nil {
			return p, none, fmt.Errorf("%w: parameter recall must be true or false, got %q", chatmem.ErrInvalid, v)
		}
	}
	if p.Scope, err = scopeParam(q.Get("scope"), p); err != nil {
		return p, none, fmt.Errorf("%w: parameter scope: %w", chatmem.ErrInvalid, err)
	}
	opts := chatmem.ContextOptions{Tokenizer: q.Get("tokenizer")}
	if len(opts.Tokenizer) > maxTokenizerLen {
		return p, none, fmt.Errorf("%w: parameter tokenizer is over %d characters", chatmem.ErrInvalid, maxTokenizerLen)
	}
	// A preview (the inspector's) shows the window and changes nothing of
	// what is summarized or when: see chatmem.ContextOptions.Preview.
	if v := q.Get("preview"); v != "" {
		if opts.Preview, err = strconv.ParseBool(v); err != nil {
			return p, none, fmt.Errorf("%w: parameter preview must be true or false, got %q", chatmem.ErrInvalid, v)
		}
	}
	// A receipt explains the window: see chatmem.Receipt.
	if v := q.Get("receipt"); v != "" {
		if opts.Receipt, err = strconv.ParseBool(v); err != nil {
			return p, none, fmt.Errorf("%w: parameter receipt must be true or false, got %q", chatmem.ErrInvalid, v)
		}
	}
	if err := p.Validate(); err != nil {
		return p, none, err
	}
	return p, opts, nil
}

// scopeParam checks v, the recall scope a request asks for under p: empty,
// conversation or user, and user only for a policy that recalls. Its
// errors are messages for the client, without ErrInvalid.
func scopeParam(v string, p chatmem.Policy) (string, error) {
	switch v {
	case "", chatmem.ScopeConversation:
		return v, nil
	case chatmem.ScopeUser:
		if p.Kind != chatmem.PolicyRecall && !(p.Kind == chatmem.PolicySummaryBuffer && p.Recall) {
			return "", fmt.Errorf("scope %s needs policy recall (or summary_buffer with recall=true), not %s", v, p.Kind)
		}
		return v, nil
	}
	return "", fmt.Errorf("unknown scope %q (want %s or %s)", v, chatmem.ScopeConversation, chatmem.ScopeUser)
}

func policyNames() string {
	var b []byte
	for i, k := range chatmem.Policies {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, k...)
	}
	return string(b)
}

func (s *Server) listConversations(c *call) error {
	q, err := query(c.r, "after", "limit", "user")
	if err != nil {
		return err
	}
	after := q.Get("after")
	if after != "" {
		if err := chatmem.ValidateID(after); err != nil {
			return fmt.Errorf("parameter after: %w", err)
		}
	}
	limit, err := intParam(q, "limit", defaultListLimit, 1, maxPageLimit)
	if err != nil {
		return err
	}
	page, err := timed(s, "list", func() (chatmem.Page, error) {
		req := chatmem.PageRequest{After: after, Limit: int(limit)}
		if q.Has("user") {
			return s.userConversations(c, q.Get("user"), req)
		}
		return s.mem.List(c.r.Context(), c.tenant, req)
	})
	if err != nil {
		return err
	}
	out := ConversationPage{Conversations: make([]Conversation, len(page.Conversations)), Next: page.Next}
	for i, conv := range page.Conversations {
		out.Conversations[i] = conversationOf(conv.Key.ID, conv)
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) getConversation(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	conv, err := timed(s, "conversation", func() (chatmem.Conversation, error) {
		return s.mem.Conversation(c.r.Context(), key)
	})
	if err != nil {
		return err
	}
	c.w.Header().Set("ETag", etag(conv.LastSeq))
	writeJSON(c.w, http.StatusOK, conversationOf(key.ID, conv))
	return nil
}

func (s *Server) deleteConversation(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	if _, err := timed(s, "delete", func() (struct{}, error) {
		return struct{}{}, s.mem.Delete(c.r.Context(), key)
	}); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getFacts(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	if history, err := historyParam(c); err != nil || history {
		if err != nil {
			return err
		}
		return s.writeHistory(c, func(ctx context.Context) ([]chatmem.Fact, error) {
			return s.mem.FactHistory(ctx, key, "")
		})
	}
	return s.writeFacts(c, key)
}

// writeFacts answers with the conversation's current facts.
func (s *Server) writeFacts(c *call, key chatmem.Key) error {
	facts, err := s.facts(c.r.Context(), key)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, factsResponse{Facts: nonNil(facts)})
	return nil
}

func (s *Server) facts(ctx context.Context, key chatmem.Key) ([]chatmem.Fact, error) {
	return timed(s, "facts", func() ([]chatmem.Fact, error) { return s.mem.Facts(ctx, key) })
}

// readFacts reads and checks a PATCH or PUT body.
func (s *Server) readFacts(c *call) ([]chatmem.Fact, error) {
	body, err := readBody(c.w, c.r, s.limits.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	var in struct {
		Facts *[]FactInput `json:"facts"`
	}
	if err := decodeStrict(body, &in); err != nil {
		return nil, err
	}
	if in.Facts == nil {
		return nil, fmt.Errorf("%w: facts is required (an array, possibly empty)", chatmem.ErrInvalid)
	}
	if len(*in.Facts) > maxFactsPerRequest {
		return nil, fmt.Errorf("%w: %d facts in one request, over the limit of %d", chatmem.ErrTooLarge, len(*in.Facts), maxFactsPerRequest)
	}
	facts := make([]chatmem.Fact, len(*in.Facts))
	seen := make(map[string]int, len(*in.Facts))
	for i, f := range *in.Facts {
		// Which of two values would count is a guess: refuse it.
		if j, dup := seen[f.Key]; dup {
			return nil, fmt.Errorf("%w: facts %d and %d both set key %q", chatmem.ErrInvalid, j, i, f.Key)
		}
		seen[f.Key] = i
		facts[i] = chatmem.Fact{Key: f.Key, Value: f.Value, Confidence: f.Confidence, SourceSeq: f.SourceSeq, SetBy: "app"}
	}
	return facts, nil
}

func (s *Server) setFacts(ctx context.Context, key chatmem.Key, facts []chatmem.Fact) error {
	if len(facts) == 0 {
		return nil
	}
	_, err := timed(s, "set_facts", func() (struct{}, error) {
		return struct{}{}, s.mem.SetFacts(ctx, key, facts)
	})
	return err
}

func (s *Server) deleteFact(ctx context.Context, key chatmem.Key, name string) error {
	_, err := timed(s, "delete_fact", func() (struct{}, error) {
		return struct{}{}, s.mem.DeleteFact(ctx, key, name)
	})
	return err
}

// patchFacts sets the facts in the body and leaves the others.
func (s *Server) patchFacts(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	facts, err := s.readFacts(c)
	if err != nil {
		return err
	}
	if err := s.setFacts(c.r.Context(), key, facts); err != nil {
		return err
	}
	return s.writeFacts(c, key)
}

// putFacts makes the body the conversation's facts: it sets those in the
// body (all or none, validated first), then deletes the keys the body does
// not name.
func (s *Server) putFacts(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	facts, err := s.readFacts(c)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	if err := s.setFacts(ctx, key, facts); err != nil {
		return err
	}
	keep := make(map[string]bool, len(facts))
	for _, f := range facts {
		keep[f.Key] = true
	}
	current, err := s.facts(ctx, key)
	if err != nil {
		return err
	}
	for _, f := range current {
		if keep[f.Key] {
			continue
		}
		// A concurrent delete of the same key leaves what PUT wants.
		if err := s.deleteFact(ctx, key, f.Key); err != nil && !errors.Is(err, chatmem.ErrNotFound) {
			return err
		}
	}
	return s.writeFacts(c, key)
}

// deleteFacts deletes the fact named by ?key=, or every fact without it.
func (s *Server) deleteFacts(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	q, err := query(c.r, "key")
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	if q.Has("key") {
		name := q.Get("key")
		if err := chatmem.ValidateFactKey(name); err != nil {
			return fmt.Errorf("parameter key: %w", err)
		}
		if err := s.deleteFact(ctx, key, name); err != nil {
			return err
		}
	} else {
		current, err := s.facts(ctx, key)
		if err != nil {
			return err
		}
		for _, f := range current {
			if err := s.deleteFact(ctx, key, f.Key); err != nil && !errors.Is(err, chatmem.ErrNotFound) {
				return err
			}
		}
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getSummary(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	sum, err := timed(s, "summary", func() (chatmem.Summary, error) {
		return s.mem.Summary(c.r.Context(), key)
	})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, sum)
	return nil
}

// status is the body of /healthz and /readyz.
type status struct {
	Status string `json:"status"`
}

func (s *Server) healthz(c *call) error {
	writeJSON(c.w, http.StatusOK, status{Status: "ok"})
	return nil
}

func (s *Server) readyz(c *call) error {
	ctx, cancel := context.WithTimeout(c.r.Context(), readyTimeout)
	defer cancel()
	_, err := timed(s, "ping", func() (struct{}, error) {
		return struct{}{}, s.mem.Ping(ctx)
	})
	if err != nil {
		if !errors.Is(err, chatmem.ErrUnavailable) {
			err = fmt.Errorf("%w: store ping: %w", chatmem.ErrUnavailable, err)
		}
		return err
	}
	writeJSON(c.w, http.StatusOK, status{Status: "ok"})
	return nil
}

// getVersion answers which chatmem serves: no key needed, like /metrics,
// whose chatmem_build_info says the same.
func (s *Server) getVersion(c *call) error {
	writeJSON(c.w, http.StatusOK, s.build)
	return nil
}

func (s *Server) getMetrics(c *call) error {
	s.metrics.handler.ServeHTTP(c.w, c.r)
	return nil
}

func (s *Server) getOpenAPI(c *call) error {
	h := c.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = c.w.Write(openAPI)
	return nil
}

// query returns the request's query parameters, refusing a parameter given
// twice among the known ones (which one would count is a guess).
func query(r *http.Request, known ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed query string: %v", chatmem.ErrInvalid, err)
	}
	for _, k := range known {
		if len(q[k]) > 1 {
			return nil, fmt.Errorf("%w: parameter %s given more than once", chatmem.ErrInvalid, k)
		}
	}
	return q, nil
}

// intParam parses the integer parameter name, which must lie in lo..hi;
// def is its value when absent.
func intParam(q url.Values, name string, def, lo, hi int64) (int64, error) {
	v := q.Get(name)
	if !q.Has(name) {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: parameter %s must be an integer from %d to %d, got %q", chatmem.ErrInvalid, name, lo, hi, v)
	}
	return n, nil
}

// nonNil returns s, or an empty slice for nil, so that JSON shows [] rather
// than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Package client is a Go client of chatmem's REST API (the server is
// package httpapi, `chatmem serve`). It links no server code: a program
// that imports it gets net/http, encoding/json and chatmem's data model.
//
// [New] returns a [Client]; every method takes a context, and an error
// response comes back as an [*Error] that unwraps to the root package's
// sentinels (errors.Is(err, chatmem.ErrNotFound)) or to this package's
// ([ErrUnauthorized], ...). The request and answer bodies ([AppendRequest],
// [MessagesPage], ...) are the types the server itself encodes.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
)

// Client calls a chatmem server's REST API. It is safe for concurrent use.
// Every method returns an *Error for an error response, which unwraps to
// the matching sentinel (errors.Is(err, chatmem.ErrNotFound)), and wraps
// chatmem.ErrUnavailable when the server cannot be reached.
type Client struct {
	base string
	key  string
	hc   *http.Client
}

// New returns a Client for the server at baseURL
// ("http://127.0.0.1:8080"), sending apiKey as a bearer token unless it is
// empty. A nil httpClient means http.DefaultClient.
func New(baseURL, apiKey string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey, hc: httpClient}
}

// AppendOptions qualify one Client.Append.
type AppendOptions struct {
	// IfMatch, if set, makes the append fail with chatmem.ErrConflict
	// unless the conversation's last sequence number is *IfMatch.
	IfMatch *int64
	// IdempotencyKey, if set, makes a retry of the same append a no-op that
	// answers with the original messages (AppendResponse.Replayed).
	IdempotencyKey string
	// Tokenizer names the counter of a new conversation.
	Tokenizer string
	// User binds a conversation the append creates to that user; an
	// existing conversation must be the user's (chatmem.ErrConflict).
	User string
	// TTL, if positive, makes the conversation expire that long after the
	// append; it is sent in whole seconds, rounded up.
	TTL time.Duration
}

// ContextParams select the context to assemble; see chatmem.Policy.
type ContextParams struct {
	Policy    chatmem.PolicyKind
	Budget    int
	Turns     int
	Facts     bool
	Tokenizer string
	// Scope is the recall scope (chatmem.Policy.Scope): "" or "user".
	Scope string
	// Recall and Recent are chatmem.Policy's.
	Recall bool
	Recent int
	// Cache is "" or chatmem.CacheStable, with its LowWater percent.
	Cache    string
	LowWater int
	// Receipt asks for the window's receipt (chatmem.Window.Receipt).
	Receipt bool
}

// query is p as the context read's query parameters; a zero field is
// left out (the server's default).
func (p ContextParams) query() url.Values {
	q := url.Values{}
	if p.Policy != "" {
		q.Set("policy", string(p.Policy))
	}
	for name, n := range map[string]int{"budget": p.Budget, "turns": p.Turns, "recent": p.Recent, "low_water": p.LowWater} {
		if n != 0 {
			q.Set(name, strconv.Itoa(n))
		}
	}
	for name, v := range map[string]string{"tokenizer": p.Tokenizer, "scope": p.Scope, "cache": p.Cache} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if p.Facts {
		q.Set("facts", "true")
	}
	if p.Recall {
		q.Set("recall", "true")
	}
	if p.Receipt {
		q.Set("receipt", "true")
	}
	return q
}

// Append appends msgs to the conversation id, creating it if needed.
func (c *Client) Append(ctx context.Context, id string, msgs []chatmem.Message, opts AppendOptions) (AppendResponse, error) {
	var out AppendResponse
	resp, err := c.do(ctx, http.MethodPost, convPath(id, "messages"), nil, opts.header(), opts.body(msgs), &out)
	if err != nil {
		return AppendResponse{}, err
	}
	out.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	out.Conversation.Key = chatmem.Key{}
	return out, nil
}

// Turn is one turn of a chatbot in one request: it appends msgs as Append
// does and returns the window to send the model under p, as Context would
// right after the append (POST /v1/conversations/{id}/turn). When the
// append lands but the window cannot be assembled, the error is the
// window's (such as a 422 budget_too_small) and the append stands: a
// retry with the same IdempotencyKey replays it.
func (c *Client) Turn(ctx context.Context, id string, msgs []chatmem.Message, opts AppendOptions, p ContextParams) (TurnResponse, error) {
	var out TurnResponse
	resp, err := c.do(ctx, http.MethodPost, convPath(id, "turn"), p.query(), opts.header(), opts.body(msgs), &out)
	if err != nil {
		return TurnResponse{}, err
	}
	out.Appended.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	out.Appended.Conversation.Key = chatmem.Key{}
	return out, nil
}

// body is the append request of msgs under opts.
func (opts AppendOptions) body(msgs []chatmem.Message) AppendRequest {
	body := AppendRequest{Messages: msgs, Tokenizer: opts.Tokenizer, User: opts.User}
	if opts.TTL > 0 {
		body.TTLSeconds = int64((opts.TTL + time.Second - 1) / time.Second)
	}
	return body
}

// header is an append's If-Match and Idempotency-Key under opts.
func (opts AppendOptions) header() http.Header {
	h := http.Header{}
	if opts.IfMatch != nil {
		h.Set("If-Match", etag(*opts.IfMatch))
	}
	if opts.IdempotencyKey != "" {
		h.Set("Idempotency-Key", opts.IdempotencyKey)
	}
	return h
}

// Messages returns up to limit messages of the conversation with a
// sequence number after after (limit 0: the server's default of 100).
func (c *Client) Messages(ctx context.Context, id string, after int64, limit int) (MessagesPage, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out MessagesPage
	_, err := c.do(ctx, http.MethodGet, convPath(id, "messages"), q, nil, nil, &out)
	return out, err
}

// Receipts returns one page of the receipts kept with the conversation's
// replies (GET /v1/conversations/{id}/receipts): those of messages after
// seq after, at most limit (0: the server's default).
func (c *Client) Receipts(ctx context.Context, id string, after int64, limit int) (ReceiptsPage, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out ReceiptsPage
	_, err := c.do(ctx, http.MethodGet, convPath(id, "receipts"), q, nil, nil, &out)
	return out, err
}

// Receipt returns the receipt kept with message seq of the conversation
// (GET /v1/conversations/{id}/messages/{seq}/receipt).
func (c *Client) Receipt(ctx context.Context, id string, seq int64) (chatmem.Receipt, error) {
	var out chatmem.Receipt
	_, err := c.do(ctx, http.MethodGet, convPath(id, "messages/"+strconv.FormatInt(seq, 10)+"/receipt"), nil, nil, nil, &out)
	return out, err
}

// Context assembles the conversation's context under p.
func (c *Client) Context(ctx context.Context, id string, p ContextParams) (chatmem.Window, error) {
	var out chatmem.Window
	_, err := c.do(ctx, http.MethodGet, convPath(id, "context"), p.query(), nil, nil, &out)
	return out, err
}

// Conversation returns the conversation's metadata.
func (c *Client) Conversation(ctx context.Context, id string) (Conversation, error) {
	var out Conversation
	_, err := c.do(ctx, http.MethodGet, convPath(id, ""), nil, nil, nil, &out)
	return out, err
}

// List returns one page of the caller's conversations with IDs after after
// (limit 0: the server's default of 50).
func (c *Client) List(ctx context.Context, after string, limit int) (ConversationPage, error) {
	return c.list(ctx, url.Values{}, after, limit)
}

// list returns one page of the conversations q selects.
func (c *Client) list(ctx context.Context, q url.Values, after string, limit int) (ConversationPage, error) {
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out ConversationPage
	_, err := c.do(ctx, http.MethodGet, "/v1/conversations", q, nil, nil, &out)
	return out, err
}

// Delete deletes the conversation.
func (c *Client) Delete(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, convPath(id, ""), nil, nil, nil, nil)
	return err
}

// Rewind takes the conversation back to message toSeq, deleting the
// messages after it with what was derived from them, and returns the
// conversation after it (POST .../rewind), as chatmem.Memory.Rewind does.
// With ifMatch set, the rewind happens only if the conversation's last
// seq is still *ifMatch (a 409 conflict otherwise): pass the last seq the
// decision to rewind was made on, so that messages appended since are
// never deleted.
func (c *Client) Rewind(ctx context.Context, id string, toSeq int64, ifMatch *int64) (Conversation, error) {
	var h http.Header
	if ifMatch != nil {
		h = http.Header{"If-Match": {etag(*ifMatch)}}
	}
	var out Conversation
	_, err := c.do(ctx, http.MethodPost, convPath(id, "rewind"), nil, h, RewindRequest{ToSeq: &toSeq}, &out)
	out.Conversation.Key = chatmem.Key{}
	return out, err
}

// Redact replaces the content of message seq to remove personal data from
// it (POST .../messages/{seq}/redact), as chatmem.Memory.Redact does: the
// message keeps its place, its tokens are counted again, and what was
// derived from the old text (summary, facts, index entries, vectors) is
// dropped or redone. It returns the conversation and the message after
// it. With ifMatch set, the redaction happens only if the conversation's
// last seq is still *ifMatch (a 409 conflict otherwise). req.Content is
// required.
func (c *Client) Redact(ctx context.Context, id string, seq int64, req RedactRequest, ifMatch *int64) (RedactResponse, error) {
	var h http.Header
	if ifMatch != nil {
		h = http.Header{"If-Match": {etag(*ifMatch)}}
	}
	var out RedactResponse
	_, err := c.do(ctx, http.MethodPost, convPath(id, "messages/"+strconv.FormatInt(seq, 10)+"/redact"), nil, h, req, &out)
	out.Conversation.Conversation.Key = chatmem.Key{}
	return out, err
}

// Facts returns the conversation's current facts, ordered by key.
func (c *Client) Facts(ctx context.Context, id string) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodGet, convPath(id, "facts"), nil, nil)
}

// SetFacts sets facts, leaving the conversation's other facts as they
// are, and returns the facts after (PATCH .../facts), as
// chatmem.Memory.SetFacts does.
func (c *Client) SetFacts(ctx context.Context, id string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodPatch, convPath(id, "facts"), nil, factsBody(facts))
}

// ReplaceFacts makes facts the conversation's facts (deleting the keys it
// does not name) and returns the facts after (PUT .../facts).
func (c *Client) ReplaceFacts(ctx context.Context, id string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodPut, convPath(id, "facts"), nil, factsBody(facts))
}

// PatchFacts is SetFacts.
//
// Deprecated: use SetFacts, the library's name.
func (c *Client) PatchFacts(ctx context.Context, id string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.SetFacts(ctx, id, facts)
}

// PutFacts is ReplaceFacts.
//
// Deprecated: use ReplaceFacts.
func (c *Client) PutFacts(ctx context.Context, id string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.ReplaceFacts(ctx, id, facts)
}

// facts sends a request to a facts resource (a conversation's or a
// user's), with body as its JSON body unless it is nil, and returns the
// facts it answers with.
func (c *Client) facts(ctx context.Context, method, path string, q url.Values, body any) ([]chatmem.Fact, error) {
	var out FactsResponse
	_, err := c.do(ctx, method, path, q, nil, body, &out)
	return out.Facts, err
}

// factsBody is the body of a PUT or PATCH of facts; no facts is an empty
// list, not null.
func factsBody(facts []FactInput) FactsBody {
	return FactsBody{Facts: nonNil(facts)}
}

// DeleteFact deletes the named fact (chatmem.ErrNotFound if it has no
// value).
func (c *Client) DeleteFact(ctx context.Context, id, key string) error {
	_, err := c.do(ctx, http.MethodDelete, convPath(id, "facts"), url.Values{"key": {key}}, nil, nil, nil)
	return err
}

// DeleteFacts deletes every fact of the conversation.
func (c *Client) DeleteFacts(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, convPath(id, "facts"), nil, nil, nil, nil)
	return err
}

// Summary returns the conversation's rolling summary (chatmem.ErrNotFound
// until one is written).
func (c *Client) Summary(ctx context.Context, id string) (chatmem.Summary, error) {
	var out chatmem.Summary
	_, err := c.do(ctx, http.MethodGet, convPath(id, "summary"), nil, nil, nil, &out)
	return out, err
}

// Health checks that the server is up (/healthz).
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil, nil)
	return err
}

// Ready checks that the server and its store are up (/readyz).
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil, nil)
	return err
}

// etag is the entity tag of a conversation's state, as the server sends
// it: its last sequence number.
func etag(lastSeq int64) string { return `"` + strconv.FormatInt(lastSeq, 10) + `"` }

// nonNil returns s, or an empty slice for nil, which JSON encodes as []
// rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// convPath returns the path of conversation id, or of its sub-resource.
// The ID is escaped, so an ID with a slash or ".." stays one path segment
// (which the server then refuses).
func convPath(id, sub string) string {
	p := "/v1/conversations/" + url.PathEscape(id)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// do sends one request with in (if not nil) as the JSON body, and decodes a
// 2xx response's body into out (if not nil). A non-2xx response is returned
// as an *Error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, h http.Header, in, out any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("chatmem api: encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
		h = h.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("Content-Type", "application/json")
	}
	resp, err := c.send(ctx, method, path, q, h, body)
	if err != nil {
		return resp, err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp, fmt.Errorf("chatmem api: %s %s: decode response: %w", method, path, err)
	}
	return resp, nil
}

// send makes one request with headers h and body, and returns a 2xx
// response with its body unread (the caller closes it). A non-2xx
// response is returned as an *Error, with the response (its body closed).
func (c *Client) send(ctx context.Context, method, path string, q url.Values, h http.Header, body io.Reader) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("chatmem api: %w: %w", chatmem.ErrInvalid, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chatmem api: %s %s: %w", method, path, ctx.Err())
		}
		return nil, fmt.Errorf("chatmem api: %s %s: %w: %w", method, path, chatmem.ErrUnavailable, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return resp, responseError(resp)
	}
	return resp, nil
}

// responseError reads an error response into an *Error. A body that is not
// the API's error shape leaves Code empty and puts the start of the body
// into Message.
func responseError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body ErrorBody
	if err := json.Unmarshal(b, &body); err == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		return e
	}
	e.Message = strings.TrimSpace(string(b[:min(len(b), 200)]))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/chatwire"
)

// responsesRequest is what the Responses API reads of POST /responses.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Conversation       json.RawMessage   `json:"conversation"`
	PreviousResponseID string            `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Stream             *bool             `json:"stream"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Metadata           map[string]string `json:"metadata"`
	User               string            `json:"user"`
	Text               json.RawMessage   `json:"text"`
	Reasoning          *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Background       bool   `json:"background"`
	SafetyIdentifier string `json:"safety_identifier"`
	PromptCacheKey   string `json:"prompt_cache_key"`
	ServiceTier      string `json:"service_tier"`
}

// responseObject is OpenAI's response object.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *responseFailure  `json:"error"`
	IncompleteDetails  *incomplete       `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []json.RawMessage `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       *conversationRef  `json:"conversation"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               json.RawMessage   `json:"text"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responseUsage    `json:"usage"`
	User               *string           `json:"user"`
	Metadata           map[string]string `json:"metadata"`
}

type responseFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incomplete struct {
	Reason string `json:"reason"`
}

type conversationRef struct {
	ID string `json:"id"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// responseRecord is what is stored of a response, on the assistant message
// it produced (metaResponse): the object without its output (the message
// is the output), and the first seq of the input items it stored.
type responseRecord struct {
	Response  responseObject `json:"r"`
	InputFrom int64          `json:"in"`
}

// maxRecordBytes bounds a stored record; over it, the tools and
// instructions are left out of it (the response object read back then has
// none), so a large tool list cannot push the message over the metadata
// limit.
const maxRecordBytes = 12 << 10

// Response IDs name where the response is stored:
// resp_<nonce>_<seq>_<conversation ID>, seq being the assistant message's,
// whose record holds the same ID (the nonce makes IDs unguessable, and a
// conversation of the same name in another tenant holds no record with
// it).
func responseID(nonce string, seq int64, conv string) string {
	return "resp_" + nonce + "_" + strconv.FormatInt(seq, 10) + "_" + conv
}

func parseResponseID(tenant, id string) (chatmem.Key, int64, bool) {
	rest, ok := strings.CutPrefix(id, "resp_")
	if !ok {
		return chatmem.Key{}, 0, false
	}
	parts := strings.SplitN(rest, "_", 3)
	if len(parts) != 3 {
		return chatmem.Key{}, 0, false
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || seq < 1 || chatmem.ValidateID(parts[2]) != nil {
		return chatmem.Key{}, 0, false
	}
	return chatmem.Key{Tenant: tenant, ID: parts[2]}, seq, true
}

// storedResponse reads the response id names: its message and record.
func (s *Server) storedResponse(ctx context.Context, tenant, id string) (chatmem.Key, chatmem.Message, responseRecord, error) {
	var rec responseRecord
	notFound := fmt.Errorf("%w: response %q not found", chatmem.ErrNotFound, id)
	key, seq, ok := parseResponseID(tenant, id)
	if !ok {
		return key, chatmem.Message{}, rec, notFound
	}
	msgs, err := s.mem.Messages(ctx, key, seq-1, 1)
	if errors.Is(err, chatmem.ErrNotFound) {
		return key, chatmem.Message{}, rec, notFound
	}
	if err != nil {
		return key, chatmem.Message{}, rec, err
	}
	if len(msgs) != 1 || msgs[0].Seq != seq || json.Unmarshal([]byte(msgs[0].Metadata[metaResponse]), &rec) != nil || rec.Response.ID != id {
		return key, chatmem.Message{}, rec, notFound
	}
	return key, msgs[0], rec, nil
}

// outputOf is the response object of a record and its message.
func outputOf(rec responseRecord, m chatmem.Message) responseObject {
	r := rec.Response
	r.Output = []json.RawMessage{}
	for _, it := range messageItems(m) {
		r.Output = append(r.Output, it.raw)
	}
	return r
}

// getResponse is GET /openai/v1/responses/{id}.
func (s *Server) getResponse(c *call) error {
	_, m, rec, err := s.storedResponse(c.r.Context(), c.tenant, c.r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, outputOf(rec, m))
	return nil
}

// deleteResponse is DELETE /openai/v1/responses/{id}: refused once found,
// as an item's deletion is.
func (s *Server) deleteResponse(c *call) error {
	if _, _, _, err := s.storedResponse(c.r.Context(), c.tenant, c.r.PathValue("id")); err != nil {
		return err
	}
	return fmt.Errorf("%w: deleting a response is not supported: chatmem's conversations are append-only; delete its conversation instead", chatmem.ErrInvalid)
}

// listResponseInputItems is GET /openai/v1/responses/{id}/input_items: the
// items the response stored from its input.
func (s *Server) listResponseInputItems(c *call) error {
	p, err := readPageQuery(c)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	key, m, rec, err := s.storedResponse(ctx, c.tenant, c.r.PathValue("id"))
	if err != nil {
		return err
	}
	items, more, err := s.listItems(ctx, key, rec.InputFrom, m.Seq-1, p)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, newItemList(items, more))
	return nil
}

// Metadata keys that set chatmem's memory per request, as the chat proxy's
// X-Chatmem-* headers do (a header wins over its key).
var metadataHeaders = map[string]string{
	"chatmem_policy": headerPolicy,
	"chatmem_budget": headerBudget,
	"chatmem_turns":  headerTurns,
	"chatmem_facts":  headerFacts,
	"chatmem_scope":  headerScope,
	"chatmem_user":   headerUser,
}

// respTurn is one POST /responses being answered.
type respTurn struct {
	req     responsesRequest
	key     chatmem.Key // zero: nothing stored (store false, no conversation)
	store   bool
	user    string
	pending []chatmem.Message // the input, not yet stored
	last    int64             // the conversation's LastSeq the reply is appended after
	// cachedLast is set when last came from the tail cache, which may be
	// behind the store: createResponse checks it after the window's read.
	cachedLast bool
	inFrom     int64 // the first seq of the input
	seq        int64 // the reply's seq
	nonce      string
	tokens     int // chatmem's count of the prompt
	obj        responseObject
	// receipt is the window's receipt, stored with the reply (nil:
	// none); sent is when the upstream request went out, requestID the
	// upstream's X-Request-Id, upModel and upID the model and ID its
	// reply named.
	receipt       *chatmem.Receipt
	sent          time.Time
	requestID     string
	upModel, upID string
	// idemKey and fingerprint are the request's Idempotency-Key and
	// its body's digest ("": none).
	idemKey, fingerprint string
	// created: the turn makes its conversation (none was named, or a
	// branch); preAppended: the turn stored messages before the
	// upstream call (a new conversation's input, a branch's history);
	// committed: the reply was stored.
	created, preAppended, committed bool
	// forkOf is the conversation a branch from an earlier response is
	// copied from, up to forkUpto, the seq of the response branched from
	// (zero: no branch), and forkUser its user.
	forkOf   chatmem.Key
	forkUpto int64
	forkUser string
	// replayed: the reply's append found the response another request
	// with the same Idempotency-Key stored first, which is the answer.
	replayed bool
}

// createResponse is POST /openai/v1/responses.
func (s *Server) createResponse(c *call) error {
	if c.up == nil {
		return errNoUpstream
	}
	var req responsesRequest
	raw, err := s.readOpenAIBody(c, &req)
	if err != nil {
		return err
	}
	idemKey := ""
	if v, ok := c.r.Header["Idempotency-Key"]; ok {
		if len(v) != 1 || v[0] == "" {
			return fmt.Errorf("%w: Idempotency-Key must not be empty", chatmem.ErrInvalid)
		}
		if err := checkIdempotencyKey(v[0]); err != nil {
			return err
		}
		idemKey = v[0]
	}
	t, err := s.prepareResponse(c, req, idemKey)
	if err != nil {
		return err
	}
	// The request's policy and fields are checked before anything is
	// stored (a branch's history, a new conversation's input).
	p, err := proxyPolicy(c.up, t.headers(c.r.Header))
	if err != nil {
		return err
	}
	var reserve []chatmem.Message
	if req.Instructions != nil && *req.Instructions != "" {
		reserve = []chatmem.Message{{Role: chatmem.RoleSystem, Content: *req.Instructions}}
	}
	fields, err := chatFields(req)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	if t.idemKey != "" {
		t.fingerprint = requestFingerprint(raw)
		// A retry whose response is stored gets it, and the upstream is
		// not called again. A branch's retry looks in the original first:
		// the first attempt, made when the response it follows was the
		// newest, went there.
		m, err := s.storedResponseUnder(ctx, t)
		if err == nil && m == nil && t.forkOf.ID != "" {
			orig := *t
			orig.key = t.forkOf
			m, err = s.storedResponseUnder(ctx, &orig)
		}
		if err != nil {
			return err
		}
		if m != nil {
			return s.replayResponse(c, t, *m)
		}
	}
	if err := s.allowProxy(ctx, c.tenant); err != nil {
		return err
	}
	defer s.dropOrphanInput(ctx, t)
	if t.forkOf.ID != "" {
		if err := s.forkResponse(ctx, t); err != nil {
			return err
		}
	}
	if t.store && t.last > 0 && t.last == int64(len(t.pending)) {
		if err := s.lineUpOrphanInput(ctx, t); err != nil {
			return err
		}
	}
	started := s.mem.Now()
	var window []chatmem.Message
	var win chatmem.Window
	switch {
	case t.key.ID == "":
		window = t.pending
	case t.last == 0 && t.store:
		// A new conversation: Context cannot read it before it exists, so
		// its input is appended first.
		// The input is marked, so that a retry after a failure that
		// left it lines up with it (lineUpOrphanInput).
		zero := int64(0)
		marked := make([]chatmem.Message, len(t.pending))
		for i, m := range t.pending {
			marked[i] = m.Clone()
			if marked[i].Metadata == nil {
				marked[i].Metadata = map[string]string{}
			}
			marked[i].Metadata[metaResponseInput] = "1"
		}
		res, err := s.mem.Append(ctx, t.key, marked, chatmem.AppendOptions{ExpectedLastSeq: &zero, User: t.user, Started: started})
		if err != nil {
			return err
		}
		t.preAppended = true
		t.inFrom = res.Messages[0].Seq
		t.pending, t.last = nil, res.Conversation.LastSeq
		fallthrough
	default:
		w, err := s.responseWindow(ctx, t, p, reserve)
		if err != nil {
			return err
		}
		window, win = w.Messages, w
		t.tokens = w.Tokens + w.Reserved
	}
	if t.inFrom == 0 {
		t.inFrom = t.last + 1
	}
	t.seq = t.last + int64(len(t.pending)) + 1
	t.obj.ID = "resp_" + t.nonce
	if t.store {
		t.obj.ID = responseID(t.nonce, t.seq, t.key.ID)
	}
	body, at, n, sent, err := chatBody(fields, reserve, window)
	if err != nil {
		return err
	}
	if t.store && win.Receipt != nil {
		t.receipt = responseReceipt(win, sent, t.last, reserve, body, at, n)
	}
	accept := "application/json"
	if t.stream() {
		accept = "text/event-stream"
	}
	t.sent = time.Now()
	resp, err := s.callUpstream(c, http.MethodPost, c.up.url, body, accept)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	t.requestID = resp.Header.Get("X-Request-Id")
	if t.stream() && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return s.streamResponse(c, resp, t, started)
	}
	b, err := upstreamBody(ctx, resp, c.up.key)
	if err != nil {
		return err
	}
	if err := chatmem.CheckJSONText(b); err != nil {
		return &upstreamError{status: http.StatusBadGateway, msg: "the upstream response's text is not valid UTF-8", err: err}
	}
	var cc struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content   *string            `json:"content"`
				Refusal   *string            `json:"refusal"`
				ToolCalls []chatmem.ToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *chatUsage `json:"usage"`
	}
	err = json.Unmarshal(b, &cc)
	s.recordUsage(ctx, t.callInfo(c), cc.Usage.ledger())
	if err != nil || len(cc.Choices) == 0 {
		return &upstreamError{status: http.StatusBadGateway, msg: "upstream response is not a chat completion", err: err}
	}
	t.upModel, t.upID = cc.Model, cc.ID
	ch := cc.Choices[0]
	content := ""
	if ch.Message.Content != nil {
		content = *ch.Message.Content
	} else if ch.Message.Refusal != nil {
		content = *ch.Message.Refusal
	}
	m, err := s.finishResponse(ctx, t, content, ch.Message.ToolCalls, cc.Usage, ch.FinishReason, started)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, outputOf(responseRecord{Response: t.obj}, m))
	return nil
}

// responseWindow reads the window of t's conversation with its input as
// pending messages, as of t.last: the state of the conversation the reply
// is made from, which its append is conditional on. When t.last came
// from the tail cache, the read (which brings the cache up to date with
// what was appended since) must leave the cache where it was: else the
// cache was behind the store (another replica appended), and the
// conversation's end is read from the store and the window read again. A
// steady turn on a replica that has the conversation cached so reads
// once: one round trip on Redis and PostgreSQL, and one more for the
// append of the input with the reply.
func (s *Server) responseWindow(ctx context.Context, t *respTurn, p chatmem.Policy, reserve []chatmem.Message) (chatmem.Window, error) {
	opts := chatmem.ContextOptions{Pending: t.pending, Reserve: reserve, Shared: true, Receipt: s.receipts}
	w, err := s.mem.Context(ctx, t.key, p, opts)
	if !t.cachedLast {
		return w, err
	}
	t.cachedLast = false
	if errors.Is(err, chatmem.ErrNotFound) {
		return w, fmt.Errorf("%w: conversation %q not found", chatmem.ErrNotFound, t.key.ID)
	}
	if _, last, _, ok := s.mem.CachedTail(t.key, 0); err == nil && ok && last == t.last {
		return w, nil
	}
	conv, err := s.mem.Conversation(ctx, t.key)
	if errors.Is(err, chatmem.ErrNotFound) {
		return w, fmt.Errorf("%w: conversation %q not found", chatmem.ErrNotFound, t.key.ID)
	}
	if err != nil {
		return w, err
	}
	t.last = conv.LastSeq
	return s.mem.Context(ctx, t.key, p, opts)
}

// stream reports whether the request streams.
func (t *respTurn) stream() bool { return t.req.Stream != nil && *t.req.Stream }

// headers are the request's headers with the metadata's chatmem_* keys as
// the X-Chatmem-* headers they stand for, where the header is not set.
func (t *respTurn) headers(h http.Header) http.Header {
	out, cloned := h, false
	for k, name := range metadataHeaders {
		v, ok := t.req.Metadata[k]
		if !ok || h.Get(name) != "" {
			continue
		}
		if name == headerUser {
			continue // read by prepareResponse
		}
		if !cloned {
			out, cloned = h.Clone(), true
		}
		out.Set(name, v)
	}
	return out
}

// prepareResponse checks the request and finds where it goes: the
// conversation, the previous response's conversation, or a new one. Nothing
// is stored by a request it refuses.
func (s *Server) prepareResponse(c *call, req responsesRequest, idemKey string) (*respTurn, error) {
	ctx := c.r.Context()
	t := &respTurn{req: req, store: req.Store == nil || *req.Store, nonce: newOpenAIID("")[:24]}
	if t.store {
		// Nothing is stored without store, so there is nothing a retry
		// could get back.
		t.idemKey = idemKey
	}
	if req.Background {
		return nil, fmt.Errorf("%w: background responses are not supported", chatmem.ErrInvalid)
	}
	if req.Model == "" {
		return nil, fmt.Errorf("%w: model is required", chatmem.ErrInvalid)
	}
	if err := checkOpenAIMetadata(req.Metadata); err != nil {
		return nil, err
	}
	var convID string
	if len(req.Conversation) > 0 && string(req.Conversation) != "null" {
		var ref conversationRef
		if json.Unmarshal(req.Conversation, &convID) != nil {
			if json.Unmarshal(req.Conversation, &ref) != nil || ref.ID == "" {
				return nil, fmt.Errorf("%w: conversation must be an ID or an object with an id", chatmem.ErrInvalid)
			}
			convID = ref.ID
		}
	}
	if convID != "" && req.PreviousResponseID != "" {
		return nil, fmt.Errorf("%w: previous_response_id and conversation cannot be used together", chatmem.ErrInvalid)
	}
	// The input.
	var raw []json.RawMessage
	var text string
	switch {
	case len(req.Input) == 0 || string(req.Input) == "null":
		return nil, fmt.Errorf("%w: input is required", chatmem.ErrInvalid)
	case json.Unmarshal(req.Input, &text) == nil:
		b, _ := json.Marshal(map[string]string{"role": "user", "content": text})
		raw = []json.RawMessage{b}
	case json.Unmarshal(req.Input, &raw) != nil || len(raw) == 0:
		return nil, fmt.Errorf("%w: input must be a string or a non-empty array of items", chatmem.ErrInvalid)
	}
	var err error
	if t.pending, err = itemsToMessages(raw, s.itemLimits(), true); err != nil {
		return nil, err
	}
	// Where it goes.
	switch {
	case convID != "":
		if err := chatmem.ValidateID(convID); err != nil {
			return nil, fmt.Errorf("%w: conversation %q not found", chatmem.ErrNotFound, convID)
		}
		t.key = chatmem.Key{Tenant: c.tenant, ID: convID}
		t.obj.Conversation = &conversationRef{ID: convID}
		if _, last, _, ok := s.mem.CachedTail(t.key, 0); ok {
			// Where the conversation ends as the tail cache knows it,
			// with no read: createResponse checks it against the
			// window's read (responseWindow).
			t.last, t.cachedLast = last, true
			break
		}
		conv, err := s.mem.Conversation(ctx, t.key)
		if errors.Is(err, chatmem.ErrNotFound) {
			return nil, fmt.Errorf("%w: conversation %q not found", chatmem.ErrNotFound, convID)
		}
		if err != nil {
			return nil, err
		}
		t.last = conv.LastSeq
	case req.PreviousResponseID != "":
		key, prev, rec, err := s.storedResponse(ctx, c.tenant, req.PreviousResponseID)
		if err != nil {
			return nil, err
		}
		conv, err := s.mem.Conversation(ctx, key)
		if err != nil {
			return nil, err
		}
		t.key, t.last = key, prev.Seq
		t.obj.Conversation = rec.Response.Conversation
		t.obj.PreviousResponseID = &req.PreviousResponseID
		if conv.LastSeq != prev.Seq && !t.store {
			return nil, fmt.Errorf("%w: previous_response_id %q is not the latest response of its chain; branching from an earlier response needs store", chatmem.ErrConflict, req.PreviousResponseID)
		}
		if conv.LastSeq != prev.Seq {
			// A branch from an earlier response: a conversation of its
			// own (forkResponse), the original one left as it is.
			t.forkOf, t.forkUser, t.obj.Conversation, t.created = key, conv.User, nil, true
			t.forkUpto = prev.Seq
			t.key.ID = newOpenAIID("conv_")
			if t.idemKey != "" {
				// A retry's branch is where its first attempt left it
				// (forkResponse).
				t.key.ID = idemConversationID(t.idemKey)
			}
		}
	case t.store && t.idemKey != "":
		// The conversation a retry finds again: named after the key.
		t.key, t.created = chatmem.Key{Tenant: c.tenant, ID: idemConversationID(t.idemKey)}, true
		conv, err := s.mem.Conversation(ctx, t.key)
		switch {
		case errors.Is(err, chatmem.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			t.last = conv.LastSeq
		}
	case t.store:
		t.key, t.created = chatmem.Key{Tenant: c.tenant, ID: newOpenAIID("conv_")}, true
	}
	user := c.r.Header.Get(headerUser)
	if user == "" {
		user = req.Metadata["chatmem_user"]
	}
	if t.key.ID != "" {
		k := t.key
		if t.forkOf.ID != "" {
			k = t.forkOf // the branch is the original's user's
		}
		if t.user, err = s.proxyUser(ctx, k, user); err != nil {
			return nil, err
		}
	}
	if t.forkUser != "" {
		t.user = t.forkUser
	}
	// The object, as far as the request says.
	o := &t.obj
	o.Object, o.CreatedAt, o.Status, o.Model = "response", s.mem.Now().Unix(), "completed", req.Model
	o.Instructions, o.MaxOutputTokens, o.Temperature, o.TopP = req.Instructions, req.MaxOutputTokens, req.Temperature, req.TopP
	o.ParallelToolCalls = req.ParallelToolCalls == nil || *req.ParallelToolCalls
	o.Store, o.Truncation, o.Metadata = t.store, "disabled", req.Metadata
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	o.Tools = req.Tools
	if o.Tools == nil {
		o.Tools = []json.RawMessage{}
	}
	o.ToolChoice = req.ToolChoice
	if len(o.ToolChoice) == 0 {
		o.ToolChoice = json.RawMessage(`"auto"`)
	}
	o.Text = req.Text
	if len(o.Text) == 0 {
		o.Text = json.RawMessage(`{"format":{"type":"text"}}`)
	}
	if req.User != "" {
		o.User = &req.User
	}
	return t, nil
}

// chatUsage is a chat completion's usage.
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// ledger returns u as the ledger reads it (nil for nil).
func (u *chatUsage) ledger() *upstreamUsage {
	if u == nil {
		return nil
	}
	out := &upstreamUsage{PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens), TotalTokens: int64(u.TotalTokens)}
	if d := u.PromptTokensDetails; d != nil {
		out.PromptTokensDetails = &struct {
			CachedTokens int64 `json:"cached_tokens"`
		}{int64(d.CachedTokens)}
	}
	if d := u.CompletionTokensDetails; d != nil {
		out.CompletionTokensDetails = &struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		}{int64(d.ReasoningTokens)}
	}
	return out
}

// callInfo is who the response's upstream call is counted for.
func (t *respTurn) callInfo(c *call) callInfo {
	return callInfo{tenant: c.tenant, user: t.user, conversation: t.key.ID, model: t.req.Model, kind: chatmem.CallResponses}
}

func (u *chatUsage) responses() *responseUsage {
	if u == nil {
		return nil
	}
	r := &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	if u.PromptTokensDetails != nil {
		r.InputTokensDetails.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		r.OutputTokensDetails.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return r
}

// finishResponse completes t's object with the reply and, when the
// response is stored, commits the input and the reply in one append,
// after the conversation's state the reply was made from (a concurrent
// change is a conflict, and nothing of this response is stored). It
// returns the reply's message, with its Seq.
func (s *Server) finishResponse(ctx context.Context, t *respTurn, content string, calls []chatmem.ToolCall, u *chatUsage, finish string, started time.Time) (chatmem.Message, error) {
	t.obj.Usage = u.responses()
	if finish == "length" {
		t.obj.Status = "incomplete"
		t.obj.IncompleteDetails = &incomplete{Reason: "max_output_tokens"}
	}
	for i := range calls {
		if calls[i].Type == "" {
			calls[i].Type = "function"
		}
	}
	m := chatmem.Message{Role: chatmem.RoleAssistant, Content: content, ToolCalls: calls, Seq: t.seq, Metadata: map[string]string{}}
	if content == "" && len(calls) == 0 {
		// An empty reply: kept as an empty message item, which no chat
		// message can hold.
		m.Content = "[message item]"
		m.Metadata[metaItem] = `{"type":"message","id":"msg_0","status":"completed","role":"assistant","content":[{"type":"output_text","text":"","annotations":[],"logprobs":[]}]}`
	}
	if !t.store {
		return m, nil
	}
	rec := responseRecord{Response: t.obj, InputFrom: t.inFrom}
	b, _ := json.Marshal(rec)
	if len(b) > maxRecordBytes {
		rec.Response.Tools, rec.Response.Instructions = []json.RawMessage{}, nil
		b, _ = json.Marshal(rec)
	}
	m.Metadata[metaResponse] = string(b)
	if u != nil && u.PromptTokens > 0 {
		m.Metadata[MetaPromptTokensUpstream] = strconv.Itoa(u.PromptTokens)
		m.Metadata[MetaPromptTokensChatmem] = strconv.Itoa(t.tokens)
	}
	msgs := append(t.pending[:len(t.pending):len(t.pending)], m)
	for i := range msgs {
		msgs[i].Seq = 0
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingWriteTimeout)
	defer cancel()
	last := t.last
	opts := chatmem.AppendOptions{ExpectedLastSeq: &last, User: t.user, Started: started}
	opts.Receipt = t.encodeReceipt(u)
	if t.idemKey != "" {
		opts.IdempotencyKey, opts.Fingerprint = responseKey(t.idemKey), t.fingerprint
	}
	res, err := s.mem.Append(wctx, t.key, msgs, opts)
	if errors.Is(err, chatmem.ErrConflict) {
		return m, fmt.Errorf("%w: conversation %q changed while the response was made; nothing of it was stored, retry", chatmem.ErrConflict, t.key.ID)
	}
	if err != nil {
		return m, fmt.Errorf("store the response: %w", err)
	}
	t.committed = true
	stored := res.Messages[len(res.Messages)-1]
	if res.Replayed {
		t.replayed = true
		// A request with the same Idempotency-Key stored its response
		// first: that one is the answer.
		var rec responseRecord
		if json.Unmarshal([]byte(stored.Metadata[metaResponse]), &rec) != nil {
			return m, fmt.Errorf("store the response: the Idempotency-Key's append holds no response")
		}
		t.obj = rec.Response
	}
	return stored, nil
}

// chatRequestBody is the Chat Completions request for a response.
type chatRequestBody struct {
	Model             string          `json:"model"`
	Messages          json.RawMessage `json:"messages"`
	Tools             []chatwire.Tool `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	MaxTokens         *int            `json:"max_completion_tokens,omitempty"`
	ResponseFormat    any             `json:"response_format,omitempty"`
	ReasoningEffort   string          `json:"reasoning_effort,omitempty"`
	User              string          `json:"user,omitempty"`
	SafetyIdentifier  string          `json:"safety_identifier,omitempty"`
	PromptCacheKey    string          `json:"prompt_cache_key,omitempty"`
	ServiceTier       string          `json:"service_tier,omitempty"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     any             `json:"stream_options,omitempty"`
}

// chatFields translates the request's fields but its input: the function
// tools, the tool choice, the sampling and output fields. Its errors
// refuse the request, before anything is stored.
func chatFields(req responsesRequest) (*chatRequestBody, error) {
	var body chatRequestBody
	body.Model, body.ParallelToolCalls, body.Temperature, body.TopP, body.MaxTokens = req.Model, req.ParallelToolCalls, req.Temperature, req.TopP, req.MaxOutputTokens
	body.User, body.SafetyIdentifier, body.PromptCacheKey, body.ServiceTier = req.User, req.SafetyIdentifier, req.PromptCacheKey, req.ServiceTier
	if req.Reasoning != nil {
		body.ReasoningEffort = req.Reasoning.Effort
	}
	if req.Stream != nil && *req.Stream {
		body.Stream = true
		body.StreamOptions = map[string]bool{"include_usage": true}
	}
	for i, raw := range req.Tools {
		var tl struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		}
		if err := json.Unmarshal(raw, &tl); err != nil {
			return nil, fmt.Errorf("%w: tools[%d] is not a tool object", chatmem.ErrInvalid, i)
		}
		if tl.Type != "function" {
			return nil, fmt.Errorf("%w: tools[%d]: tool type %q is not supported: chatmem sends function tools to a Chat Completions upstream", chatmem.ErrInvalid, i, tl.Type)
		}
		if tl.Name == "" {
			return nil, fmt.Errorf("%w: tools[%d]: a function tool needs a name", chatmem.ErrInvalid, i)
		}
		var ct chatwire.Tool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters, ct.Function.Strict = tl.Name, tl.Description, tl.Parameters, tl.Strict
		body.Tools = append(body.Tools, ct)
	}
	if len(req.ToolChoice) > 0 && string(req.ToolChoice) != "null" {
		var mode string
		var fn struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		switch {
		case json.Unmarshal(req.ToolChoice, &mode) == nil:
			if mode != "auto" && mode != "none" && mode != "required" {
				return nil, fmt.Errorf("%w: tool_choice %q (want auto, none or required)", chatmem.ErrInvalid, mode)
			}
			body.ToolChoice = mode
		case json.Unmarshal(req.ToolChoice, &fn) == nil && fn.Type == "function" && fn.Name != "":
			body.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": fn.Name}}
		default:
			return nil, fmt.Errorf("%w: tool_choice must be auto, none, required or a function", chatmem.ErrInvalid)
		}
	}
	if len(req.Text) > 0 && string(req.Text) != "null" {
		var text struct {
			Format *struct {
				Type        string          `json:"type"`
				Name        string          `json:"name"`
				Description string          `json:"description,omitempty"`
				Schema      json.RawMessage `json:"schema"`
				Strict      *bool           `json:"strict,omitempty"`
			} `json:"format"`
		}
		if err := json.Unmarshal(req.Text, &text); err != nil {
			return nil, fmt.Errorf("%w: text must be an object with a format", chatmem.ErrInvalid)
		}
		if f := text.Format; f != nil {
			switch f.Type {
			case "text":
			case "json_object":
				body.ResponseFormat = map[string]string{"type": "json_object"}
			case "json_schema":
				body.ResponseFormat = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": f.Name, "description": f.Description, "schema": f.Schema, "strict": f.Strict}}
			default:
				return nil, fmt.Errorf("%w: text.format type %q (want text, json_object or json_schema)", chatmem.ErrInvalid, f.Type)
			}
		}
	}
	return &body, nil
}

// chatBody is the Chat Completions request body: fields with the
// instructions and the window as its messages (only what can go to the
// model). The messages array is spliced into the encoded fields, not
// encoded again with them, at at, n bytes long: the receipt keeps the
// body without it (proxyReceipt), and ReplayRequest puts the messages,
// encoded the same way, back. sent are the window's messages that went.
func chatBody(body *chatRequestBody, reserve, window []chatmem.Message) (b []byte, at, n int, sent []chatmem.Message, err error) {
	msgs := []byte{'['}
	for i, list := range [][]chatmem.Message{reserve, window} {
		for _, m := range list {
			if !upstreamable(m) {
				continue
			}
			if i == 1 {
				sent = append(sent, m)
			}
			if len(msgs) > 1 {
				msgs = append(msgs, ',')
			}
			if msgs, err = appendOpenAIMessage(msgs, m); err != nil {
				return nil, 0, 0, nil, err
			}
		}
	}
	msgs = append(msgs, ']')
	body.Messages = json.RawMessage(`[]`)
	frame, err := json.Marshal(body)
	if err != nil {
		return nil, 0, 0, nil, err
	}
	// Model is the first field, and a JSON string holds no unescaped
	// quote: the first `,"messages":[]` is the field.
	const field = `,"messages":`
	at = bytes.Index(frame, []byte(field+"[]"))
	if at < 0 {
		return nil, 0, 0, nil, fmt.Errorf("chat body: no messages field in %.64s", frame)
	}
	at += len(field)
	b = make([]byte, 0, len(frame)+len(msgs))
	b = append(append(append(b, frame[:at]...), msgs...), frame[at+2:]...)
	return b, at, len(msgs), sent, nil
}

// responseReceipt is the receipt of a response's window w: the runs of
// it that went upstream (sent: the messages chatBody did not skip; those
// it skipped, metadata markers and items stored as sent, are left out),
// and the request's frame, as the chat proxy's (proxyReceipt), the
// instructions being the request's own system message.
func responseReceipt(w chatmem.Window, sent []chatmem.Message, last int64, reserve []chatmem.Message, body []byte, at, n int) *chatmem.Receipt {
	r := *w.Receipt
	if skipped := len(w.Messages) - len(sent); skipped > 0 {
		r.Sent = chatmem.SentSpans(sent, last)
		r.LeftOut += skipped
	}
	var system []systemMessage
	for _, m := range reserve {
		raw, err := appendOpenAIMessage(nil, m)
		if err != nil {
			return nil
		}
		system = append(system, systemMessage{raw: raw, msg: m})
	}
	w.Receipt = &r
	return proxyReceipt(w, -1, 0, system, body, at, n)
}

// encodeReceipt returns t's receipt, completed with what the upstream
// reported, in its stored form (nil: none to store).
func (t *respTurn) encodeReceipt(u *chatUsage) []byte {
	if t.receipt == nil {
		return nil
	}
	up := &chatmem.UpstreamUse{Model: t.upModel, RequestID: t.requestID, ChatmemTokens: t.tokens,
		LatencyMillis: time.Since(t.sent).Milliseconds()}
	if up.Model == "" {
		up.Model = t.req.Model
	}
	if up.RequestID == "" {
		up.ResponseID = t.upID
	}
	if u != nil {
		up.InputTokens, up.OutputTokens = u.PromptTokens, u.CompletionTokens
		if d := u.PromptTokensDetails; d != nil {
			up.CachedTokens = d.CachedTokens
		}
		if d := u.CompletionTokensDetails; d != nil {
			up.ReasoningTokens = d.ReasoningTokens
		}
	}
	t.receipt.Upstream = up
	b, err := chatmem.EncodeReceipt(t.receipt)
	if errors.Is(err, chatmem.ErrTooLarge) && t.receipt.Request != nil {
		// A request frame too large to keep: the receipt is kept
		// without it, and replay says so.
		t.receipt.Request = nil
		b, err = chatmem.EncodeReceipt(t.receipt)
	}
	if err != nil {
		return nil
	}
	return b
}

// responseInstructions returns the instructions of the response stored
// at seq, as the system message chatBody sent them, or nothing if the
// message holds no response or its record kept no instructions.
func responseInstructions(ctx context.Context, mem *chatmem.Memory, key chatmem.Key, seq int64) ([]json.RawMessage, error) {
	msgs, err := mem.Messages(ctx, key, seq-1, 1)
	if err != nil || len(msgs) != 1 || msgs[0].Seq != seq {
		return nil, err
	}
	var rec responseRecord
	if json.Unmarshal([]byte(msgs[0].Metadata[metaResponse]), &rec) != nil || rec.Response.Instructions == nil {
		return nil, nil
	}
	raw, err := appendOpenAIMessage(nil, chatmem.Message{Role: chatmem.RoleSystem, Content: *rec.Response.Instructions})
	if err != nil {
		return nil, err
	}
	return []json.RawMessage{raw}, nil
}

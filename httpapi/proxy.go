package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/chatwire"
	"github.com/chatmem/chatmem/internal/sse"
)

// Upstream is the OpenAI-compatible model server the chat proxy
// (POST /v1/chat/completions) forwards to.
type Upstream struct {
	// BaseURL is the OpenAI-compatible base URL, such as
	// https://api.openai.com/v1; requests go to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent to the upstream as "Authorization: Bearer APIKey". It
	// is never logged, and never taken from the client's request.
	APIKey string
	// HTTPClient sends the upstream requests. Nil: a client with dial, TLS
	// and response-header timeouts and no overall timeout (a stream lasts as
	// long as the model writes). Its Transport may translate the OpenAI
	// chat-completions wire format to another provider's.
	HTTPClient *http.Client
	// Policy is the default context policy, which the X-Chatmem-* headers
	// override per request. The zero value means token_budget 4000.
	Policy chatmem.Policy
	// OnDiverge is what a request whose history diverges from the stored
	// conversation gets: DivergeRewind (the default: the conversation
	// follows the client's branch), DivergeRefuse or DivergeFork.
	OnDiverge string
	// Unnamed is what a request that names no conversation gets:
	// UnnamedForward (the default: sent as it is, without memory, and
	// answered with X-Chatmem-Memory: off) or UnnamedRefuse (400).
	Unnamed string
	// DeriveConversation names the conversation of a request that names
	// none from the request itself: a hash of the tenant, the end user
	// (X-Chatmem-User, else the body's user, else safety_identifier) and
	// the first user message (derivedID). A request without an end user
	// is not derived: two users must never share a conversation.
	DeriveConversation bool
	// Auth is whose credential the upstream gets: UpstreamAuthServer (the
	// default: APIKey) or UpstreamAuthPassthrough (the client's own
	// Authorization header, relayed as it came, for deployments where
	// each client brings its own model API key; APIKey must be empty).
	// Under passthrough, clients of a server with API keys present their
	// chatmem key in X-Chatmem-Key.
	Auth string
}

// Whose credential the upstream gets (Upstream.Auth).
const (
	UpstreamAuthServer      = "server"
	UpstreamAuthPassthrough = "passthrough"
)

// UpstreamAuthModes are the accepted values of Upstream.Auth.
var UpstreamAuthModes = []string{UpstreamAuthServer, UpstreamAuthPassthrough}

// DefaultProxyPolicy is the policy a zero Upstream.Policy stands for.
var DefaultProxyPolicy = chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 4000}

// upstream is a checked Upstream.
type upstream struct {
	base      string // BaseURL without a trailing slash
	url       string // base + "/chat/completions"
	key       string
	client    *http.Client
	policy    chatmem.Policy
	onDiverge string
	unnamed   string
	derive    bool
	// passthrough relays the client's Authorization to the upstream.
	passthrough bool
	models      modelsCache
}

func newUpstream(u Upstream) (*upstream, error) {
	base, err := url.Parse(u.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("%w: upstream base URL must be an absolute http or https URL", chatmem.ErrInvalid)
	}
	p := u.Policy
	if p.Kind == "" {
		p = DefaultProxyPolicy
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("upstream policy: %w", err)
	}
	onDiverge := u.OnDiverge
	if onDiverge == "" {
		onDiverge = DivergeRewind
	}
	if !slices.Contains(DivergeModes, onDiverge) {
		return nil, fmt.Errorf("%w: upstream OnDiverge %q: want one of %s", chatmem.ErrInvalid, u.OnDiverge, strings.Join(DivergeModes, ", "))
	}
	unnamed := u.Unnamed
	if unnamed == "" {
		unnamed = UnnamedForward
	}
	if !slices.Contains(UnnamedModes, unnamed) {
		return nil, fmt.Errorf("%w: upstream Unnamed %q: want one of %s", chatmem.ErrInvalid, u.Unnamed, strings.Join(UnnamedModes, ", "))
	}
	switch u.Auth {
	case "", UpstreamAuthServer, UpstreamAuthPassthrough:
	default:
		return nil, fmt.Errorf("%w: upstream Auth %q: want one of %s", chatmem.ErrInvalid, u.Auth, strings.Join(UpstreamAuthModes, ", "))
	}
	passthrough := u.Auth == UpstreamAuthPassthrough
	if passthrough && u.APIKey != "" {
		return nil, fmt.Errorf("%w: upstream: an API key and passthrough auth exclude each other", chatmem.ErrInvalid)
	}
	client := u.HTTPClient
	if client == nil {
		client = defaultUpstreamClient()
	}
	trimmed := strings.TrimSuffix(u.BaseURL, "/")
	return &upstream{base: trimmed, url: trimmed + "/chat/completions", key: u.APIKey, client: client, policy: p,
		onDiverge: onDiverge, unnamed: unnamed, derive: u.DeriveConversation, passthrough: passthrough}, nil
}

// authorization is the Authorization header the upstream gets for r:
// the server's key as a bearer token, none without one, or under
// passthrough r's own.
func (u *upstream) authorization(r *http.Request) string {
	if u.passthrough {
		return r.Header.Get("Authorization")
	}
	if u.key == "" {
		return ""
	}
	return "Bearer " + u.key
}

// upstreamFor returns the tenant's upstream: its own, else the server's.
func (s *Server) upstreamFor(tenant string) *upstream {
	if up, ok := s.ups[tenant]; ok {
		return up
	}
	return s.up
}

// tenantUpstreams checks the tenants' own upstreams; each takes the
// server's auth mode (def's; server auth without one).
func tenantUpstreams(in map[string]Upstream, def *upstream) (map[string]*upstream, error) {
	out := make(map[string]*upstream, len(in))
	for tenant, u := range in {
		if err := chatmem.ValidateID(tenant); err != nil {
			return nil, fmt.Errorf("upstream of tenant %q: %w", tenant, err)
		}
		if u.Auth != "" {
			return nil, fmt.Errorf("%w: upstream of tenant %s: Auth is the server's (Options.Upstream)", chatmem.ErrInvalid, tenant)
		}
		if def != nil && def.passthrough {
			u.Auth = UpstreamAuthPassthrough
		}
		up, err := newUpstream(u)
		if err != nil {
			return nil, fmt.Errorf("upstream of tenant %s: %w", tenant, err)
		}
		out[tenant] = up
	}
	return out, nil
}

// defaultUpstreamClient bounds connecting and waiting for the response
// headers (a non-streaming completion sends its headers only when the
// model is done, hence the generous wait), but not the body, which a
// stream writes for as long as the model does.
func defaultUpstreamClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ResponseHeaderTimeout = 5 * time.Minute
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t}
}

// The headers of the chat proxy.
const (
	headerConversation = "X-Chatmem-Conversation"
	// headerUser names the user a conversation the turn creates belongs to.
	headerUser   = "X-Chatmem-User"
	headerPolicy = "X-Chatmem-Policy"
	headerBudget = "X-Chatmem-Budget"
	headerTurns  = "X-Chatmem-Turns"
	headerFacts  = "X-Chatmem-Facts"
	headerScope  = "X-Chatmem-Scope"
	// headerCache is the window's cache mode: stable or off.
	headerCache        = "X-Chatmem-Cache"
	headerWindowTokens = "X-Chatmem-Window-Tokens"
	// headerKey carries the chatmem API key on the proxy's routes under
	// passthrough auth, where Authorization is the upstream's.
	headerKey = "X-Chatmem-Key"
	// headerMemory is "off" on the answer to a request that named no
	// conversation: it went to the upstream without memory.
	headerMemory = "X-Chatmem-Memory"
	// headerRetry says the request was read as a retry of the stored
	// turn: its reply is not stored.
	headerRetry = "X-Chatmem-Retry"
)

// Metadata keys of a stored reply: the prompt tokens of its turn as the
// upstream reported them and as chatmem counted them.
const (
	MetaPromptTokensUpstream = "prompt_tokens_upstream"
	MetaPromptTokensChatmem  = "prompt_tokens_chatmem"
)

// maxUpstreamBody bounds a non-streaming upstream response and
// maxUpstreamError an upstream error body.
const (
	maxUpstreamBody  = 64 << 20
	maxUpstreamError = 1 << 20
)

// errNoUpstream answers the chat proxy on a server without an upstream.
var errNoUpstream = fmt.Errorf("%w: no upstream configured", chatmem.ErrUnavailable)

// chatCompletions is the chat proxy. Without X-Chatmem-Conversation it
// forwards the request as it is; with it, system (and developer) messages
// are not stored but sent first, as this request's pinned system prompt;
// the others are lined up with the stored conversation (reconcile: the
// full history, a trimmed one and only the new message all work) and
// what it does not hold yet is stored; the stored context under the
// policy replaces the messages; every other field goes to the upstream
// untouched; and a successful reply is stored. A request that asks a
// stored turn again (its messages are stored, followed by their reply)
// appends nothing and is answered by a new completion over the history up
// to that turn, which is not stored (X-Chatmem-Retry: true), unless
// Upstream.OnDiverge is DivergeRewind (the default), under which it is a
// regeneration: the stored reply is replaced by the new one. A request
// whose history diverges from the stored one (an edited message) rewinds
// the conversation to the last message they share and stores the
// request's branch (DivergeRewind), is refused (DivergeRefuse: 409
// history_diverged) or is stored as a fork (DivergeFork: forkID, named in
// the response's X-Chatmem-Conversation).
// A reply that does not complete (an upstream error, a client that goes
// away, a stream that breaks before [DONE]) is not stored, partial or
// whole, so the history stays valid; the turn's own messages are stored
// all the same. Errors are in the OpenAI shape.
//
// The proxy commits before it acknowledges: a reply is stored before the
// client gets it whole. A non-streaming response is written only after the
// commit; a stream's deltas are relayed as they come, but its ending (the
// chunk with finish_reason, any usage chunk after it, and data: [DONE]) is
// held until the commit, and a commit that fails ends the stream with an
// error event instead. So a read through any endpoint, on any replica,
// made once the client has the reply, finds the turn, and a crash after
// that loses nothing the client was given.
//
// A turn is two store writes, one round trip each on Redis and PostgreSQL
// once the process has the conversation in its tail cache: the turn's
// messages are appended and the window read in one call (Memory.Turn),
// the request's history lined up with the cache's copy of the stored
// conversation, which the append is conditional on; then the reply is
// appended (commitTurn), which keeps the cache current for the next turn.
// When no reply comes, the turn's messages stay stored without one.
//
// With an Idempotency-Key the turn's messages are appended under
// that key, and the reply under a key derived from it (replyKey). A retry
// with the same key and body gets the stored reply without a call to the
// upstream (Idempotent-Replayed: true); a retry of a request that failed
// before its reply was stored calls the upstream again with the history
// its messages were stored in. The key with another body is refused
// (422, idempotency_key_reused).
func (s *Server) chatCompletions(c *call) error {
	if err := s.proxyChat(c); err != nil {
		s.writeOpenAIError(c.w, c.r, err)
	}
	return nil
}

// errKeyReused answers a request whose Idempotency-Key an earlier request
// with another body used: it neither replays that request nor runs.
var errKeyReused = fmt.Errorf("%w: the Idempotency-Key was used with another request body; use a new key for a new request", chatmem.ErrIdempotencyKeyReused)

func (s *Server) proxyChat(c *call) error {
	if c.up == nil {
		return errNoUpstream
	}
	body, err := readBody(c.w, c.r, s.limits.MaxBodyBytes)
	if err != nil {
		return err
	}
	// Decoding would turn invalid UTF-8 into U+FFFD: refuse it, the
	// pass-through too.
	if err := chatmem.CheckJSONText(body); err != nil {
		return err
	}
	req, err := parseChatRequest(body)
	if err != nil {
		return err
	}
	id, err := s.conversationOf(c, req)
	if err != nil {
		return err
	}
	if id == "" {
		if c.up.unnamed == UnnamedRefuse {
			s.metrics.proxyUnnamed.WithLabelValues("refused").Inc()
			return errUnnamed
		}
		if err := s.allowProxy(c.r.Context(), c.tenant); err != nil {
			return err
		}
		s.metrics.proxyUnnamed.WithLabelValues("forwarded").Inc()
		c.w.Header().Set(headerMemory, "off")
		return s.forward(c, body, req.model, req.stream, nil)
	}
	c.w.Header().Set(headerConversation, id)
	t := &turn{key: chatmem.Key{Tenant: c.tenant, ID: id}, started: s.mem.Now()}
	if t.policy, err = proxyPolicy(c.up, c.r.Header); err != nil {
		return err
	}
	if t.user, err = s.proxyUser(c.r.Context(), t.key, c.r.Header.Get(headerUser)); err != nil {
		return err
	}
	if v, ok := c.r.Header["Idempotency-Key"]; ok {
		if len(v) != 1 || v[0] == "" {
			return fmt.Errorf("%w: Idempotency-Key must not be empty", chatmem.ErrInvalid)
		}
		if err := checkIdempotencyKey(v[0]); err != nil {
			return err
		}
		t.idemKey = v[0]
		t.fingerprint = requestFingerprint(body)
	}
	system, msgs, err := s.splitMessages(req.messages)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	if t.idemKey != "" {
		// A retry whose reply is stored gets it, and the upstream is not
		// called again.
		reply, err := s.storedReply(ctx, t)
		if err != nil {
			return err
		}
		if reply != nil {
			return s.replay(c, req.stream, req.model, *reply)
		}
	}
	// A replay costs nothing: only a call to the upstream is refused over
	// the tenant's proxy spend limit.
	if err := s.allowProxy(ctx, c.tenant); err != nil {
		return err
	}
	// The request's system prompt counts against the budget, with the
	// conversation's tokenizer.
	reserve := make([]chatmem.Message, len(system))
	for i, m := range system {
		reserve[i] = m.msg
	}
	// The window is only encoded: it may share the cache's metadata.
	copts := chatmem.ContextOptions{Reserve: reserve, Shared: true, Receipt: s.receipts}
	p := t.policy
	// The request is lined up with the tail cache's copy of the stored
	// conversation when it can be, and the turn's append is conditional
	// on it: if another writer got in first (another replica, or a
	// rewind), the append fails, and the request is lined up again with
	// what the store holds.
	id, user := t.key.ID, t.user
	useCache, rewound := true, 0
	var w chatmem.Window
	var upto int64 // the last Seq of the history the turn is answered from; -1: all of the window
	for {
		todo, rec, err := s.lineUp(c, t, system, msgs, useCache, &rewound)
		if err != nil {
			return err
		}
		w, upto, err = s.proxyTurn(ctx, t, todo, rec, copts)
		if errors.Is(err, chatmem.ErrConflict) && rec.cached && useCache {
			useCache, t.key.ID, t.user = false, id, user
			c.w.Header().Set(headerConversation, id)
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	s.metrics.contextTokens.WithLabelValues(string(p.Kind)).Observe(float64(w.Tokens))
	t.tokens = w.Tokens + w.Reserved
	// The body is the client's with the messages spliced in: its other
	// fields go as they came, and nothing is decoded and encoded again.
	size := 2
	for _, m := range system {
		size += len(m.raw) + 1
	}
	for _, m := range w.Messages {
		size += len(m.Content) + len(m.Name) + len(m.ToolCallID) + 48
	}
	msgsJSON := make([]byte, 0, size)
	msgsJSON = append(msgsJSON, '[')
	for _, m := range system {
		if len(msgsJSON) > 1 {
			msgsJSON = append(msgsJSON, ',')
		}
		msgsJSON = append(msgsJSON, m.raw...)
	}
	skipped := 0
	stable, stableLen := len(system), w.StableLen() // the request messages of the window's stable part
	for i, m := range w.Messages {
		if upto >= 0 && m.Seq > upto {
			// Messages stored after the turn's own (another client's turn
			// on the conversation, or, for a retry whose first attempt got
			// no reply, what came after it): send the history the turn's
			// messages were stored in.
			t.tokens -= m.Tokens
			skipped++
			continue
		}
		if len(msgsJSON) > 1 {
			msgsJSON = append(msgsJSON, ',')
		}
		if msgsJSON, err = appendOpenAIMessage(msgsJSON, m); err != nil {
			return err
		}
		if i < stableLen {
			stable++
		}
	}
	msgsJSON = append(msgsJSON, ']')
	c.w.Header().Set(headerWindowTokens, strconv.Itoa(t.tokens))
	if p.Cache == chatmem.CacheStable {
		// An upstream transport that marks cache breakpoints marks one
		// at the end of the stable part.
		c.r = c.r.WithContext(chatmem.WithCachePrefix(c.r.Context(), stable))
	}
	upstreamBody, at := req.withMessagesAt(msgsJSON, promptCacheKey(t))
	if w.Receipt != nil {
		t.receipt = proxyReceipt(w, upto, skipped, system, upstreamBody, at, len(msgsJSON))
	}
	return s.forward(c, upstreamBody, req.model, req.stream, t)
}

// lineUp reconciles the request's non-system messages (msgs) with the
// stored conversation, as Upstream.OnDiverge says for a divergence (see
// chatCompletions), and returns those still to append. useCache lets
// reconcile answer from the tail cache (rec.cached: the append must then
// be conditional on rec.last); rewound counts the rewinds made for the
// request, at most one. It may move t to a fork (t.key, t.user and the
// X-Chatmem-Conversation header) or mark it a retry.
func (s *Server) lineUp(c *call, t *turn, system []systemMessage, msgs []chatmem.Message, useCache bool, rewound *int) ([]chatmem.Message, reconciliation, error) {
	ctx := c.r.Context()
	for forks := 0; ; forks++ {
		rec, err := s.reconcile(ctx, t.key, msgs, useCache)
		if err != nil {
			return nil, rec, err
		}
		if rec.shape == shapeNew {
			s.metrics.proxyHistory.WithLabelValues("continued").Inc()
			return msgs[rec.from:], rec, nil
		}
		if c.up.onDiverge == DivergeRewind && *rewound == 0 && (rec.shape == shapeRetry || rec.shape == shapeDiverged) {
			// The conversation follows the client's branch: back to the
			// last message the request shares with it, then as usual.
			to := rec.upto // a regeneration: its reply replaces the stored one
			if rec.shape == shapeDiverged {
				to = rec.seq - 1
			}
			// At the revision read too, so that it never cuts a branch
			// another process wrote back to the same LastSeq since (a
			// store that cannot check it rewinds on LastSeq alone).
			last, rev := rec.last, rec.revision
			opts := chatmem.RewindOptions{ExpectedLastSeq: &last}
			if _, ok := s.mem.Store().(chatmem.RevisionRewinder); ok {
				opts.ExpectedRevision = &rev
			}
			if _, err := s.mem.Rewind(ctx, t.key, to, opts); err != nil {
				return nil, rec, err
			}
			s.metrics.proxyHistory.WithLabelValues("rewound").Inc()
			*rewound++
			continue
		}
		if rec.shape == shapeRetry {
			t.retry = true
			c.w.Header().Set(headerRetry, "true")
			s.metrics.proxyHistory.WithLabelValues("retry").Inc()
			return nil, rec, nil
		}
		if c.up.onDiverge != DivergeFork || forks == maxForks {
			s.metrics.proxyHistory.WithLabelValues("refused").Inc()
			return nil, rec, &errDiverged{index: requestIndex(system, rec.from), seq: rec.seq, ended: rec.from == len(msgs)}
		}
		// The client's branch, from the conversation's first message,
		// is a conversation of its own.
		s.metrics.proxyHistory.WithLabelValues("forked").Inc()
		t.key.ID = forkID(t.key.ID, msgs[:min(rec.from+1, len(msgs))])
		t.user = rec.user
		c.w.Header().Set(headerConversation, t.key.ID)
	}
}

// proxyTurn appends the turn's new messages (todo) and reads the window
// to send in one call, Memory.Turn: one store round trip when the tail
// cache holds the conversation, as it does from a process's second turn
// on, since the reply's append (commitTurn) keeps it current. The append
// is conditional on rec.last and rec.revision when reconcile answered
// from the cache (ErrConflict if the conversation moved on or was
// rewritten), and made under the
// request's Idempotency-Key if it has one. With nothing to append (a
// retry of a stored turn, or of one whose reply was not stored), the
// window is read alone. upto is the Seq of the last message of the
// history the turn is answered from (-1: the whole window): the turn's
// own messages, or the retried turn's.
func (s *Server) proxyTurn(ctx context.Context, t *turn, todo []chatmem.Message, rec reconciliation, copts chatmem.ContextOptions) (_ chatmem.Window, upto int64, _ error) {
	upto = -1
	if rec.shape == shapeRetry {
		upto = rec.upto
	}
	if len(todo) == 0 {
		w, err := timed(s, "context", func() (chatmem.Window, error) {
			return s.mem.Context(ctx, t.key, t.policy, copts)
		})
		return w, upto, err
	}
	opts := chatmem.AppendOptions{IdempotencyKey: t.idemKey, Fingerprint: t.fingerprint, User: t.user, Started: t.started}
	if rec.cached {
		last, rev := rec.last, rec.revision
		opts.ExpectedLastSeq, opts.ExpectedRevision = &last, &rev
	}
	var res chatmem.AppendResult
	w, err := timed(s, "turn", func() (w chatmem.Window, err error) {
		res, w, err = s.mem.Turn(ctx, t.key, todo, opts, t.policy, copts)
		return w, err
	})
	if res.Replayed && !sameMessages(res.Messages, todo) {
		return chatmem.Window{}, upto, errKeyReused
	}
	t.owner = res.Conversation.User
	if n := len(res.Messages); n > 0 {
		// The turn is answered from the history up to its own messages:
		// another client's turn appended meanwhile is not this one's.
		upto = res.Messages[n-1].Seq
	}
	return w, upto, err
}

// turn is one chat proxy request with a conversation: where its reply is
// stored and what chatmem counted for it.
type turn struct {
	key    chatmem.Key
	user   string // X-Chatmem-User, empty if none
	policy chatmem.Policy
	tokens int // chatmem's count of the prompt sent
	// idemKey is the request's Idempotency-Key, and fingerprint the
	// digest of its body that a retry must match.
	idemKey, fingerprint string
	// retry is set for a request that asks a stored turn again: its
	// reply is not stored (the turn keeps the one it has).
	retry bool

	// started is when the turn began: its appends cannot re-create a
	// conversation of a user erased since (AppendOptions.Started).
	started time.Time

	// receipt is the window's receipt, stored with the reply (nil: none
	// kept); sent is when the upstream request went out, and requestID
	// the upstream's ID for it.
	receipt   *chatmem.Receipt
	sent      time.Time
	requestID string

	// owner is the stored conversation's user, as the turn's append found
	// it: the user its usage is counted for when the request named none.
	owner string
}

// pendingWriteTimeout bounds writing a turn's reply after its client may
// have gone away.
const pendingWriteTimeout = 10 * time.Second

// systemMessage is a system (or developer) message of the request: sent
// as the client wrote it, counted as a system message.
type systemMessage struct {
	raw   json.RawMessage
	msg   chatmem.Message
	index int // in the request's messages
}

// requestIndex returns the index in the request's messages of the i-th
// message that is not a system message (len of them: the index after
// the last).
func requestIndex(system []systemMessage, i int) int {
	for _, m := range system {
		if m.index <= i {
			i++
		}
	}
	return i
}

// splitMessages decodes the request's messages into its system prompt and
// the messages to append, which are checked as an append's are.
func (s *Server) splitMessages(raw json.RawMessage) ([]systemMessage, []chatmem.Message, error) {
	list, ok := splitArray(raw)
	if !ok {
		if err := json.Unmarshal(raw, &list); err != nil {
			list = nil
		}
	}
	if len(list) == 0 {
		return nil, nil, fmt.Errorf("%w: messages is required: a non-empty array of chat messages", chatmem.ErrInvalid)
	}
	if len(list) > s.limits.MaxMessages {
		return nil, nil, fmt.Errorf("%w: %d messages in one request, over the limit of %d", chatmem.ErrTooLarge, len(list), s.limits.MaxMessages)
	}
	limits := chatmem.Limits{MaxContentBytes: s.limits.MaxContentBytes, MaxBatch: s.limits.MaxMessages}
	var system []systemMessage
	var msgs []chatmem.Message
	for i, r := range list {
		// Most messages have the plain shape, decoded as json.Unmarshal
		// would without its reflection; the others go through it.
		m, plain := plainMessage(r)
		if err := unmarshalUnless(plain, r, &m); err != nil {
			var head struct {
				Role string `json:"role"`
			}
			if json.Unmarshal(r, &head) != nil {
				return nil, nil, fmt.Errorf("%w: message %d is not a chat message object", chatmem.ErrInvalid, i)
			}
			if !errors.Is(err, chatmem.ErrInvalid) {
				err = fmt.Errorf("%w: %s", chatmem.ErrInvalid, strings.TrimPrefix(err.Error(), "json: "))
			}
			return nil, nil, fmt.Errorf("message %d: %w", i, err)
		}
		// Only the chat fields are kept: seq, tokens, created_at and
		// metadata are the store's to set.
		m = chatmem.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		if m.Role == chatmem.RoleSystem || m.Role == "developer" {
			m.Role = chatmem.RoleSystem
			if err := m.Validate(limits); err != nil {
				return nil, nil, fmt.Errorf("message %d: %w", i, err)
			}
			system = append(system, systemMessage{raw: r, msg: m, index: i})
			continue
		}
		if err := m.Validate(limits); err != nil {
			return nil, nil, fmt.Errorf("message %d: %w", i, err)
		}
		msgs = append(msgs, m)
	}
	return system, msgs, nil
}

// promptCacheKey is the prompt_cache_key a turn under a cache-stable
// window sends, "" otherwise: one per conversation, so that the
// provider routes its requests to the same cache, named by a hash that
// tells the provider neither the tenant nor the conversation's ID.
// Anthropic upstreams (the chat completions transport) read it as the
// request to mark cache breakpoints.
func promptCacheKey(t *turn) string {
	if t == nil || t.policy.Cache != chatmem.CacheStable {
		return ""
	}
	h := sha256.Sum256([]byte(t.key.Tenant + "\x00" + t.key.ID))
	return "chatmem-" + hex.EncodeToString(h[:16])
}

// proxyPolicy returns the server's policy with the request's X-Chatmem-*
// headers applied. Bad values wrap chatmem.ErrInvalid.
func proxyPolicy(up *upstream, h http.Header) (chatmem.Policy, error) {
	p := up.policy
	if v := h.Get(headerPolicy); v != "" {
		p.Kind = chatmem.PolicyKind(v)
		if !slices.Contains(chatmem.Policies, p.Kind) {
			return p, fmt.Errorf("%w: header %s: unknown policy %q (want one of %s)", chatmem.ErrInvalid, headerPolicy, v, policyNames())
		}
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{headerBudget, &p.Budget}, {headerTurns, &p.Turns}} {
		v := h.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, fmt.Errorf("%w: header %s must be a positive integer, got %q", chatmem.ErrInvalid, f.name, v)
		}
		*f.dst = n
	}
	if v := h.Get(headerFacts); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return p, fmt.Errorf("%w: header %s must be true or false, got %q", chatmem.ErrInvalid, headerFacts, v)
		}
		p.Facts = b
	}
	switch v := h.Get(headerCache); v {
	case "":
	case "off":
		p.Cache, p.LowWater = "", 0
	case chatmem.CacheStable:
		p.Cache = v
	default:
		return p, fmt.Errorf("%w: header %s must be %s or off, got %q", chatmem.ErrInvalid, headerCache, chatmem.CacheStable, v)
	}
	if p.Cache == chatmem.CacheStable && (p.Kind == chatmem.PolicyAll || p.Kind == chatmem.PolicyLastTurns) && h.Get(headerCache) == "" {
		p.Cache, p.LowWater = "", 0 // the server's default mode, for a policy that has none
	}
	if v := h.Get(headerScope); v != "" {
		var err error
		if p.Scope, err = scopeParam(v, p); err != nil {
			return p, fmt.Errorf("%w: header %s: %w", chatmem.ErrInvalid, headerScope, err)
		}
	} else if p.Kind != up.policy.Kind {
		p.Scope = "" // the default's scope belongs to the default's policy
	}
	if p.Kind == chatmem.PolicyLastTurns && p.Turns == 0 {
		p.Turns = chatmem.DefaultTurns
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("headers %s: %w", headerPolicy, err)
	}
	return p, nil
}

// openAIMessage is a chat message as the OpenAI API takes it.
type openAIMessage struct {
	Role       chatmem.Role       `json:"role"`
	Content    *string            `json:"content"`
	Name       string             `json:"name,omitempty"`
	ToolCalls  []chatmem.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string             `json:"tool_call_id,omitempty"`
}

// MarshalOpenAIMessage returns m as an OpenAI chat message parameter:
// role, content (null for an assistant message with only tool calls),
// name, tool_calls (type "function" where unset) and tool_call_id; none of
// chatmem's own fields (seq, tokens, created_at, metadata).
func MarshalOpenAIMessage(m chatmem.Message) ([]byte, error) {
	o := openAIMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		o.Content = &m.Content
	}
	if len(m.ToolCalls) > 0 {
		o.ToolCalls = slices.Clone(m.ToolCalls)
		for i := range o.ToolCalls {
			if o.ToolCalls[i].Type == "" {
				o.ToolCalls[i].Type = "function"
			}
		}
	}
	return json.Marshal(o)
}

// forward sends body, a request for model, to the upstream and relays
// its answer; with t, it stores the reply in t's conversation before the
// client has it whole (commitTurn): a non-streaming response is written
// after the commit, a stream's ending is held until it (relayStream).
// Nothing is written after the response, so the handler is done once the
// client has it.
func (s *Server) forward(c *call, body []byte, model string, stream bool, t *turn) error {
	ctx := c.r.Context()
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	if t != nil && t.receipt != nil {
		t.sent = time.Now()
	}
	resp, err := s.callUpstream(c, http.MethodPost, c.up.url, body, accept)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	ci := callInfo{tenant: c.tenant, model: model, kind: chatmem.CallChat}
	if t != nil {
		ci.user, ci.conversation = cmp.Or(t.user, t.owner), t.key.ID
		t.requestID = resp.Header.Get("X-Request-Id")
	}
	if stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return s.relayStream(c, resp, t, ci)
	}
	b, err := upstreamBody(ctx, resp, c.up.key)
	if err != nil {
		return err
	}
	if t == nil {
		// Without memory the answer is relayed as it came; only its usage
		// is read, for the ledger.
		var cc struct {
			Usage *usage `json:"usage"`
		}
		_ = json.Unmarshal(b, &cc)
		s.recordUsage(ctx, ci, cc.Usage)
	}
	if t != nil {
		// Only what storing the reply needs is decoded; the client gets the
		// upstream's bytes, once the turn is committed. Decoding would turn
		// invalid UTF-8 into U+FFFD: such a reply is refused, not stored
		// rewritten.
		if err := chatmem.CheckJSONText(b); err != nil {
			return &upstreamError{status: http.StatusBadGateway, msg: "the upstream response's text is not valid UTF-8", err: err}
		}
		var cc chatCompletion
		if err := json.Unmarshal(b, &cc); err != nil {
			s.recordUsage(ctx, ci, nil) // the upstream answered: a call made
			return &upstreamError{status: http.StatusBadGateway, msg: "upstream response is not a chat completion", err: err}
		}
		s.recordUsage(ctx, ci, cc.Usage)
		var reply *chatmem.Message
		if len(cc.Choices) > 0 {
			msg := cc.Choices[0].Message
			content := ""
			if msg.Content != nil {
				content = *msg.Content
			}
			if cc.Usage != nil {
				cc.Usage.model = cc.Model
			}
			reply = s.replyMessage(t, content, msg.ToolCalls, cc.Usage)
			t.upstream(cc.Model, cc.ID, cc.Usage)
		}
		stored, err := s.commitTurn(ctx, t, reply)
		if err != nil {
			return err
		}
		if stored != nil {
			// A concurrent request with the same Idempotency-Key stored
			// its reply first: answer that one, the one kept.
			return s.replay(c, false, model, *stored)
		}
	}
	h := c.w.Header()
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		h.Set("Content-Type", ct)
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	c.w.WriteHeader(resp.StatusCode)
	_, _ = c.w.Write(b)
	return nil
}

// callUpstream sends the client's request on to the upstream (body, if
// not nil, as JSON) with the upstream's credential and this request's ID,
// relays the upstream's headers clients read, and returns a successful
// response; an upstream that fails or answers an error status is the
// error to answer.
func (s *Server) callUpstream(c *call, method, url string, body []byte, accept string) (*http.Response, error) {
	ctx := c.r.Context()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, traced := s.startUpstream(ctx, c.up.client, method, url, body)
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		traced.fail(err)
		return nil, fmt.Errorf("upstream request: %w", err)
	}
	if s.tracer != nil {
		s.tracer.Inject(ctx, req.Header.Set)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if auth := c.up.authorization(c.r); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if id := infoOf(ctx).id; id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	resp, err := c.up.client.Do(req)
	if err != nil {
		err = transportError(ctx, err)
		traced.fail(err)
		return nil, err
	}
	relayHeaders(c.w.Header(), resp.Header)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		err := upstreamStatusError(resp, c.up.key)
		traced.fail(err)
		return nil, err
	}
	resp.Body = traced.watch(resp)
	return resp, nil
}

// upstreamBody reads an upstream's answer that is not a stream, at most
// maxUpstreamBody bytes, with key masked: a model can be made to repeat
// what it was sent, a gateway the headers it got, and the upstream key
// never reaches the client.
func upstreamBody(ctx context.Context, resp *http.Response, key string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody+1))
	if err != nil {
		return nil, transportError(ctx, err)
	}
	if len(b) > maxUpstreamBody {
		return nil, &upstreamError{status: http.StatusBadGateway, msg: fmt.Sprintf("upstream response over %d bytes", maxUpstreamBody)}
	}
	return redactKey(b, key), nil
}

// redactKey masks every occurrence of key in b.
func redactKey(b []byte, key string) []byte {
	if key == "" || !bytes.Contains(b, []byte(key)) {
		return b
	}
	return bytes.ReplaceAll(b, []byte(key), []byte("[upstream key]"))
}

// replyMessage is the message a reply is stored as, with the prompt tokens
// as the upstream reported them beside chatmem's count and, for a request
// with an Idempotency-Key, the fingerprint of the request a retry must
// match; nil for a reply with neither content nor tool calls (a refusal,
// an empty completion), which has nothing to store.
func (s *Server) replyMessage(t *turn, content string, calls []chatmem.ToolCall, u *usage) *chatmem.Message {
	if content == "" && len(calls) == 0 {
		return nil
	}
	for i := range calls {
		if calls[i].Type == "" {
			calls[i].Type = "function"
		}
	}
	msg := &chatmem.Message{Role: chatmem.RoleAssistant, Content: content, ToolCalls: calls}
	if u != nil && u.PromptTokens > 0 {
		msg.Metadata = map[string]string{
			MetaPromptTokensUpstream: strconv.FormatInt(u.PromptTokens, 10),
			MetaPromptTokensChatmem:  strconv.Itoa(t.tokens),
		}
		s.metrics.observePromptTokens(int(u.PromptTokens), t.tokens)
	}
	if u != nil && u.PromptTokensDetails != nil {
		s.metrics.observeCachedTokens(t.key.Tenant, u.model, int(u.PromptTokensDetails.CachedTokens))
	}
	if t.idemKey != "" {
		if msg.Metadata == nil {
			msg.Metadata = map[string]string{}
		}
		msg.Metadata[MetaRequestFingerprint] = t.fingerprint
	}
	return msg
}

// commitTurn stores the turn's reply (nil: none to store) before it goes
// out: the proxy's one append of a reply, under the reply's idempotency
// key if the request has one. The turn's own messages are stored already
// (proxyTurn). Memory.Append makes it conditional on the tail cache's
// last message, the turn's own, and extends the cache with the reply, so
// that the next turn's lines up and assembles its window from the cache
// with one store write (another writer in between costs a second
// attempt, not the reply). The commit does not end with the request: a
// client that goes away now leaves the turn stored. An error means
// nothing of the reply was stored, and the client must not be told it
// was. stored is the reply a concurrent request with the same
// Idempotency-Key stored first, if it did.
func (s *Server) commitTurn(ctx context.Context, t *turn, reply *chatmem.Message) (stored *chatmem.Message, _ error) {
	if reply == nil || t.retry {
		return nil, nil
	}
	msgs := []chatmem.Message{*reply}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingWriteTimeout)
	defer cancel()
	opts := chatmem.AppendOptions{User: t.user, Started: t.started}
	if t.idemKey != "" {
		opts.IdempotencyKey, opts.Fingerprint = replyKey(t.idemKey), t.fingerprint
	}
	if reply != nil && !t.retry && t.receipt != nil {
		// Kept with the reply, in the same write.
		b, err := chatmem.EncodeReceipt(t.receipt)
		if errors.Is(err, chatmem.ErrTooLarge) && t.receipt.Request != nil {
			// A request frame too large to keep (a huge tools list, say):
			// the receipt is kept without it, and replay says so.
			t.receipt.Request = nil
			b, err = chatmem.EncodeReceipt(t.receipt)
		}
		if err == nil {
			opts.Receipt = b
			if up := t.receipt.Upstream; up != nil && s.mem.KeepsReceipts() {
				// The receipt holds the prompt tokens (input_tokens,
				// chatmem_tokens): the reply's metadata does not repeat
				// them, and reads of the messages take them from it
				// (withPromptTokens).
				msgs[0].Metadata = withoutPromptTokens(msgs[0].Metadata)
			}
		}
	}
	res, err := timed(s, "append", func() (chatmem.AppendResult, error) {
		return s.mem.Append(wctx, t.key, msgs, opts)
	})
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "chat proxy: turn not stored, reply withheld",
			slog.String("request_id", infoOf(ctx).id), slog.String("conversation", t.key.ID), slog.String("error", err.Error()))
		return nil, fmt.Errorf("store the turn: %w", err)
	}
	if res.Replayed && len(res.Messages) > 0 {
		m := res.Messages[len(res.Messages)-1]
		if m.Metadata[MetaRequestFingerprint] != t.fingerprint {
			return nil, errKeyReused
		}
		return &m, nil
	}
	return nil, nil
}

// relayHeaders copies to the client's response the upstream's headers
// that OpenAI clients read: the processing time, the API version, the
// rate limits and when to retry. The upstream's request ID comes as
// X-Upstream-Request-Id, since X-Request-Id is this server's own, the one
// its log lines and error messages name.
func relayHeaders(dst, src http.Header) {
	for k, v := range src {
		switch {
		case k == "Openai-Processing-Ms", k == "Openai-Version", k == "Retry-After", k == "Retry-After-Ms",
			strings.HasPrefix(k, "X-Ratelimit-"):
			dst[k] = slices.Clone(v)
		case k == "X-Request-Id":
			dst["X-Upstream-Request-Id"] = slices.Clone(v)
		}
	}
}

// chatCompletion is what the proxy reads of an upstream chat completion.
type chatCompletion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string            `json:"content"`
			ToolCalls []chatmem.ToolCall `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// usage is a chat completion's usage (upstreamUsage).
type usage = upstreamUsage

// relayStream copies the upstream's server-sent events to the client as
// they come, one flush per event, and assembles the reply from the chunks'
// deltas. The stream's ending (the chunk with a finish_reason and every
// event after it) is held back: when data: [DONE] arrives the turn is
// committed, and only then is the ending relayed. A commit that fails, a
// stream that stops before [DONE], an event over sse.MaxEventBytes and,
// with a turn, an event that is not a chunk whose text can be stored as
// it came (an upstream error event, JSON that does not decode, invalid
// UTF-8) end the client's stream with an error event and without the
// ending, so no client holds a reply as complete that is not stored.
// Without a turn the events are not decoded: the client gets the
// upstream's bytes.
func (s *Server) relayStream(c *call, resp *http.Response, t *turn, ci callInfo) error {
	h := c.w.Header()
	h.Set("Content-Type", resp.Header.Get("Content-Type"))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(c.w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlasts a server's write timeout
	c.w.WriteHeader(resp.StatusCode)
	_ = rc.Flush()

	ctx := c.r.Context()
	key := c.up.key
	// fail ends the stream with an error event (ev, or one in the OpenAI
	// shape for err when ev is nil) and notes why on the log; the turn's
	// messages stay stored, without a reply.
	fail := func(where string, ev []byte, err error) error {
		if ev != nil {
			_, _ = c.w.Write(ev)
			_ = rc.Flush()
		} else {
			s.streamError(c, rc, err)
		}
		s.streamBroken(c, t, where, err)
		return nil
	}
	var acc streamReply
	var held []byte // the ending, relayed after the commit
	// The call is counted once, when the stream ends however it ends,
	// with the usage its last usage chunk reported (a client that did not
	// ask for stream_options.include_usage gets none: the call is counted
	// without tokens).
	defer func() { s.recordUsage(ctx, ci, acc.usage) }()
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			// The headers are sent: tell the client in the stream, as
			// OpenAI does, and keep the partial reply out of the history
			// (the turn's own messages are written first, so the client's
			// next turn finds them).
			msg := "the upstream stream failed"
			if errors.Is(err, sse.ErrEventTooLarge) {
				msg = fmt.Sprintf("an upstream stream event is over the limit of %d bytes", sse.MaxEventBytes)
			}
			return fail("upstream read", nil, &upstreamError{status: http.StatusBadGateway, msg: msg, err: err})
		}
		raw := redactKey(ev.Raw, key)
		if t == nil && bytes.Contains(ev.Data, []byte(`"usage"`)) {
			acc.usageOf(ev.Data)
		}
		if t != nil && len(ev.Data) > 0 {
			done, err := acc.event(redactKey(ev.Data, key))
			switch {
			case errors.Is(err, errUpstreamEvent):
				// The upstream's own error event, in the OpenAI shape:
				// the client gets it as the stream's end.
				return fail("upstream stream", raw, err)
			case err != nil:
				return fail("upstream stream", nil, &upstreamError{status: http.StatusBadGateway, msg: "the upstream stream sent an event that is not a chat completion chunk", err: err})
			case done && ctx.Err() != nil:
				return fail("client", nil, context.Cause(ctx))
			case done:
				// data: [DONE]: store the turn, then end the stream.
				content := string(redactKey([]byte(acc.content.String()), key))
				t.upstream(acc.model, acc.id, acc.usage)
				stored, cerr := s.commitTurn(ctx, t, s.replyMessage(t, content, acc.calls(), acc.usage))
				if cerr == nil && stored != nil && stored.Content != content {
					cerr = fmt.Errorf("%w: a concurrent request with the same Idempotency-Key stored another reply", chatmem.ErrConflict)
				}
				if cerr != nil {
					s.streamError(c, rc, cerr)
					s.streamBroken(c, t, "commit", cerr)
					return nil
				}
				held = append(held, raw...)
				_, _ = c.w.Write(endEvent(held))
				_ = rc.Flush()
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10)) // what may follow [DONE]
				return nil
			}
		}
		if t != nil && (acc.finished || held != nil) {
			held = append(held, raw...)
			continue
		}
		if _, werr := c.w.Write(raw); werr != nil {
			return fail("client write", nil, werr)
		}
		if ferr := rc.Flush(); ferr != nil {
			return fail("client flush", nil, ferr)
		}
	}
	if t == nil {
		return nil
	}
	// The upstream ended without data: [DONE]: the reply is not stored, so
	// the client does not get its ending either.
	return fail("upstream stream", nil, &upstreamError{status: http.StatusBadGateway, msg: "the upstream stream ended before data: [DONE]", err: errors.New("ended without data: [DONE]")})
}

// endEvent returns b, the stream's ending up to data: [DONE], with the
// blank line that ends the [DONE] event if the upstream's stream ended
// before it.
func endEvent(b []byte) []byte {
	switch {
	case bytes.HasSuffix(b, []byte("\n\n")), bytes.HasSuffix(b, []byte("\n\r\n")):
		return b
	case bytes.HasSuffix(b, []byte("\n")):
		return append(b, '\n')
	}
	return append(b, "\n\n"...)
}

// streamError ends a stream whose headers are sent with an error event in
// the OpenAI shape, which OpenAI's SDKs raise as an error.
func (s *Server) streamError(c *call, rc *http.ResponseController, err error) {
	d := openAIErrorDetail{Message: "the upstream stream failed", Type: "upstream_error", Code: "unavailable"}
	var ue *upstreamError
	if !errors.As(err, &ue) {
		status, code := classify(err)
		d = openAIErrorDetail{Message: "the reply could not be stored; retry the request", Type: chatwire.ErrorType(status), Code: code}
	} else if ue.msg != "" {
		d.Message = ue.msg
	}
	ev, _ := json.Marshal(openAIErrorBody{Error: d})
	_, _ = fmt.Fprintf(c.w, "data: %s\n\n", ev)
	_ = rc.Flush()
}

// streamBroken notes on the request's log line that the stream stopped
// early, so nothing of the reply was stored.
func (s *Server) streamBroken(c *call, t *turn, where string, err error) {
	info := infoOf(c.r.Context())
	info.code = "stream_incomplete"
	if t != nil {
		s.log.LogAttrs(c.r.Context(), slog.LevelWarn, "chat proxy: stream incomplete, reply not stored",
			slog.String("request_id", info.id), slog.String("conversation", t.key.ID), slog.String("where", where), slog.String("error", err.Error()))
	}
}

// streamReply assembles a streamed reply from its chat.completion.chunk
// events: choice 0's content deltas, and its tool-call deltas by index
// (id and function name from the first delta that has them, arguments
// concatenated).
type streamReply struct {
	id      string // the first chunk's
	content strings.Builder
	tools   []chatmem.ToolCall
	usage   *usage
	model   string // the model the chunks name
	// finished is set by the first chunk with a finish_reason: the
	// stream's ending begins.
	finished bool
}

type chunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int             `json:"index"`
		FinishReason json.RawMessage `json:"finish_reason"`
		Delta        struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// usageOf keeps the usage of the chunk data, if it is one that has it.
func (a *streamReply) usageOf(data []byte) {
	var ch struct {
		Usage *usage `json:"usage"`
	}
	if json.Unmarshal(data, &ch) == nil && ch.Usage != nil {
		a.usage = ch.Usage
	}
}

// maxStreamToolCalls bounds the tool-call index a stream may use.
const maxStreamToolCalls = 1024

// errUpstreamEvent is streamReply.event's error for the upstream's own
// error event.
var errUpstreamEvent = errors.New("the upstream sent an error event")

// event takes the data of one event of the stream and reports whether it
// was the final [DONE]. An error means the reply cannot be stored as it
// came: the data is not a chunk, carries text that decoding would rewrite
// (invalid UTF-8, a lone surrogate escape: chatmem.CheckJSONText), has a
// tool-call index out of range, or is an error (errUpstreamEvent).
func (a *streamReply) event(data []byte) (done bool, _ error) {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return true, nil
	}
	if err := chatmem.CheckJSONText(data); err != nil {
		return false, err
	}
	var ch chunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return false, err
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		return false, errUpstreamEvent
	}
	if ch.Model != "" {
		a.model = ch.Model
	}
	if ch.Usage != nil {
		a.usage = ch.Usage
		a.usage.model = a.model
	}
	if a.id == "" {
		a.id = ch.ID
	}
	for _, c := range ch.Choices {
		if len(c.FinishReason) > 0 && string(c.FinishReason) != "null" {
			a.finished = true
		}
		if c.Index != 0 {
			continue
		}
		if c.Delta.Content != nil {
			a.content.WriteString(*c.Delta.Content)
		}
		for _, d := range c.Delta.ToolCalls {
			if d.Index < 0 || d.Index >= maxStreamToolCalls {
				return false, fmt.Errorf("tool call index %d out of range", d.Index)
			}
			for len(a.tools) <= d.Index {
				a.tools = append(a.tools, chatmem.ToolCall{})
			}
			tc := &a.tools[d.Index]
			if d.ID != "" {
				tc.ID = d.ID
			}
			if d.Type != "" {
				tc.Type = d.Type
			}
			tc.Function.Name += d.Function.Name
			tc.Function.Arguments += d.Function.Arguments
		}
	}
	return false, nil
}

// calls returns the assembled tool calls, without the index gaps a stream
// may have left.
func (a *streamReply) calls() []chatmem.ToolCall {
	var out []chatmem.ToolCall
	for _, tc := range a.tools {
		if tc.ID != "" || tc.Function.Name != "" {
			out = append(out, tc)
		}
	}
	return out
}

// upstreamError is an upstream failure as the client sees it: the
// upstream's own error body (relayed as it is) or a message, with the
// status to answer.
type upstreamError struct {
	status int
	body   []byte // the upstream's error body in the OpenAI shape; nil: msg
	msg    string
	err    error // the cause, for the log
}

func (e *upstreamError) Error() string {
	s := fmt.Sprintf("upstream %d", e.status)
	if e.msg != "" {
		s += ": " + e.msg
	}
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *upstreamError) Unwrap() error { return e.err }

// transportError turns a failed upstream call into the answer for the
// client: 504 for a timeout, 502 for anything else, and the client's own
// cancellation as it is.
func transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("upstream call: %w", context.Cause(ctx))
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return &upstreamError{status: http.StatusGatewayTimeout, msg: "the upstream timed out", err: err}
	}
	return &upstreamError{status: http.StatusBadGateway, msg: "the upstream cannot be reached", err: err}
}

// upstreamStatusError reads an upstream error response. A body in the
// OpenAI error shape is relayed as it is; any other is summed up in one.
// Either way the upstream key is masked: a gateway that echoes the
// Authorization header it got must not hand the server's key to clients or
// logs.
func upstreamStatusError(resp *http.Response, key string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamError))
	b = redactKey(b, key)
	var e struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != nil && e.Error.Message != "" {
		return &upstreamError{status: resp.StatusCode, body: b}
	}
	snippet := strings.TrimSpace(string(b))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "..."
	}
	msg := fmt.Sprintf("the upstream answered %s", resp.Status)
	if snippet != "" {
		msg += ": " + snippet
	}
	return &upstreamError{status: resp.StatusCode, msg: msg}
}

// openAIErrorBody is the OpenAI API's error shape, which the chat proxy
// answers in so that OpenAI clients report its errors as the model's.
// Code is one of the Error codes; Type is the OpenAI error type.
type openAIErrorBody struct {
	Error openAIErrorDetail `json:"error"`
}

type openAIErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// writeOpenAIError answers the chat proxy's errors as writeError answers
// the others', in the OpenAI shape. An upstream's error body is relayed
// with its status; the upstream's other failures answer the upstream's
// status (502 or 504 when there was none) with a message saying so.
func (s *Server) writeOpenAIError(w http.ResponseWriter, r *http.Request, err error) {
	info := infoOf(r.Context())
	var ue *upstreamError
	if errors.As(err, &ue) {
		info.code, info.err = "upstream_error", err
		if ue.body != nil {
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(ue.status)
			_, _ = w.Write(ue.body)
			return
		}
		writeJSON(w, ue.status, openAIErrorBody{Error: openAIErrorDetail{Message: ue.msg, Type: "upstream_error", Code: codeForStatus(ue.status)}})
		return
	}
	status, code := classify(err)
	var param *string
	if de := (*errDiverged)(nil); errors.As(err, &de) {
		code, param = codeDiverged, &paramMessages
	}
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		status, code = statusClientClosed, "client_closed_request"
	}
	info.code, info.err = code, err
	msg := err.Error()
	switch {
	case errors.Is(err, errNoUpstream):
		msg = "no upstream configured"
	case status == http.StatusServiceUnavailable:
		msg = "a backend is unavailable; retry later"
	case status >= 500:
		msg = "internal error; the server's log has the details under request " + info.id
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="chatmem"`)
	}
	typ := chatwire.ErrorType(status)
	if errors.Is(err, chatmem.ErrBudgetExhausted) {
		typ = "insufficient_quota" // OpenAI's type for a quota used up
	}
	writeJSON(w, status, openAIErrorBody{Error: openAIErrorDetail{Message: msg, Type: typ, Param: param, Code: code}})
}

// paramMessages is the param a history_diverged error names.
var paramMessages = "messages"

// codeForStatus is the error code of the table for an upstream status
// without an error body: the table's code for it, else invalid_request for
// a 4xx and unavailable for a 5xx.
func codeForStatus(status int) string {
	for _, e := range errorCodes {
		if e.status == status {
			return e.code
		}
	}
	if status < 500 {
		return "invalid_request"
	}
	return "unavailable"
}

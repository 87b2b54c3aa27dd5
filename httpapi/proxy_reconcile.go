package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/chatmem/chatmem"
)

// What the proxy does with a request that diverges from the stored
// conversation (Upstream.OnDiverge).
const (
	// DivergeRewind (the default) takes the stored conversation back to
	// the last message the request shares with it (Memory.Rewind: the
	// messages after it and everything derived from them go) and stores
	// the request's branch, so that the conversation is what the client
	// shows: an edited message replaces the old one and what followed it,
	// and a request that asks a stored turn again (a regeneration) has its
	// new reply stored in place of the old one.
	DivergeRewind = "rewind"
	// DivergeRefuse answers 409 history_diverged, naming the first
	// message that differs; nothing is stored.
	DivergeRefuse = "refuse"
	// DivergeFork stores the client's branch as a conversation of its own
	// (forkID), named in the response's X-Chatmem-Conversation.
	DivergeFork = "fork"
)

// DivergeModes are the accepted values of Upstream.OnDiverge.
var DivergeModes = []string{DivergeRewind, DivergeRefuse, DivergeFork}

// The request's history as it compares with the stored conversation.
const (
	// shapeNew: the request's messages from reconciliation.from on are new
	// (all of them when nothing matched; none when the stored tail already
	// ends with all of them, a retry of a turn whose reply was not stored).
	shapeNew = iota
	// shapeRetry: every message of the request is stored, followed by the
	// reply to its last one: the turn is asked again.
	shapeRetry
	// shapeDiverged: the request is the conversation's history from its
	// first message, but differs from the stored one at a message.
	shapeDiverged
)

// reconciliation is how a request's messages line up with the stored
// conversation.
type reconciliation struct {
	shape int
	// from is the index of the request's first new message (shapeNew) or
	// of the first message that differs (shapeDiverged; len(msgs) when the
	// request ends before the stored history does).
	from int
	// upto is the Seq of the request's last message in the store
	// (shapeRetry): the history its reply is asked over.
	upto int64
	// seq is the Seq of the first stored message that differs from the
	// request (shapeDiverged).
	seq int64
	// last and revision are the conversation's LastSeq and Revision as
	// reconcile read them (shapeDiverged, shapeRetry): a rewind is
	// conditional on both, so it never cuts a branch written since the
	// read, even one rewound and appended back to the same LastSeq.
	last int64
	// user is the user the conversation belongs to (shapeDiverged): its
	// fork belongs to the same one.
	user string
	// cached is set when the tail cache answered (shapeNew, with
	// something new), as of LastSeq last and Revision revision: the
	// append of the new messages must be conditional on both, since the
	// cache may be behind the store, or hold messages another process
	// rewound since and appended others in their place.
	cached   bool
	revision int64
}

// reconcile lines the request's non-system messages (msgs) up with the
// stored conversation, reading at most 2*len(msgs)+2 stored messages,
// whatever the length of the history: the newest len(msgs)+1 and, only
// when those do not continue the request, the first len(msgs)+1.
//
// The rules, in this order (messages are equal when role, content, name,
// tool_call_id and tool calls are; stored system messages are left out of
// the comparison, as the request's are):
//
//  1. Continuation: the longest run of stored messages at the end of the
//     conversation that equals the request's first messages is already
//     stored, and the rest of the request is new. A client that sends the
//     full history, one that trims it (drops its oldest messages) and one
//     that sends only the new message all continue the conversation.
//     Since the run is the longest one, a request whose first messages
//     repeat the conversation's last ones ("ok" answered with "ok") is
//     read as overlapping them as far as they match.
//  2. Retry: with two or more messages, a request whose messages are the
//     stored ones just before the conversation's last message, which is
//     not a user message (the reply to the request), asks for the same
//     turn again: nothing is appended. A single message repeated after
//     its reply is a new message (users say "yes" twice); send an
//     Idempotency-Key to make single-message retries safe.
//  3. Divergence: with two or more messages, a request that starts with
//     the conversation's first message but differs from the stored
//     history further on (an earlier message edited, a reply dropped to
//     be regenerated) diverges at its first differing message.
//  4. Otherwise every message of the request is new.
//
// A conversation that does not exist yet has every message new.
//
// With useCache, the newest stored messages come from this process's
// tail cache when it holds them (Memory.CachedTail), with no read: the
// steady turn of a client that sends the new message, a trimmed history,
// or a history the cache holds all of. The cache answers only a
// continuation with something new (rule 1, or a single message), whose
// append is then conditional on the conversation's last message and
// revision as the cache knows them (rec.cached); the other rules, and a cache that does not
// reach back far enough, read the store.
func (s *Server) reconcile(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, useCache bool) (reconciliation, error) {
	n := len(msgs)
	if useCache {
		if tail, last, rev, ok := s.mem.CachedTail(key, n+1); ok {
			j := overlap(tail, msgs)
			if (j > 0 || n < 2) && j < n {
				return reconciliation{shape: shapeNew, from: j, cached: true, last: last, revision: rev}, nil
			}
		}
	}
	conv, err := s.mem.Conversation(ctx, key)
	if errors.Is(err, chatmem.ErrNotFound) {
		return reconciliation{}, nil
	}
	if err != nil {
		return reconciliation{}, err
	}
	want := n + 1
	after := max(conv.LastSeq-int64(want), 0)
	tail, err := s.storedRange(ctx, key, after, want)
	if err != nil {
		return reconciliation{}, err
	}
	tail = withoutSystem(tail)
	if j := overlap(tail, msgs); j > 0 {
		return reconciliation{shape: shapeNew, from: j}, nil
	}
	if n < 2 {
		return reconciliation{shape: shapeNew}, nil
	}
	if k := len(tail); k == n+1 && tail[k-1].Role != chatmem.RoleUser && sameMessages(tail[:n], msgs) {
		return reconciliation{shape: shapeRetry, upto: tail[n-1].Seq, last: conv.LastSeq, revision: conv.Revision}, nil
	}
	head := tail
	if after > 0 {
		// The tail does not reach the first message: read the head.
		if head, err = s.storedRange(ctx, key, 0, want); err != nil {
			return reconciliation{}, err
		}
		head = withoutSystem(head)
	}
	m := 0
	for m < len(head) && m < n && sameMessage(head[m], msgs[m]) {
		m++
	}
	if m == 0 || m == len(head) {
		// Nothing in common with the conversation's start; or the first
		// n+1 stored messages start the request, which holds n: the
		// stored history is shorter than the request, all of it the
		// request's start, which rule 1 takes but for stored system
		// messages in between.
		return reconciliation{shape: shapeNew}, nil
	}
	// m < len(head): a message differs, or the request ends first.
	return reconciliation{shape: shapeDiverged, from: m, seq: head[m].Seq, last: conv.LastSeq, revision: conv.Revision, user: conv.User}, nil
}

// storedRange reads up to limit stored messages after Seq after, oldest
// first: the one read of stored messages reconciliation makes.
func (s *Server) storedRange(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.Message, error) {
	return s.mem.Messages(ctx, key, after, limit)
}

// withoutSystem returns msgs without its system messages (in place).
func withoutSystem(msgs []chatmem.Message) []chatmem.Message {
	return slices.DeleteFunc(msgs, func(m chatmem.Message) bool { return m.Role == chatmem.RoleSystem })
}

// overlap returns the length of the longest run of stored's last messages
// that equals sent's first ones (Knuth-Morris-Pratt over sent, then one
// pass over stored: O(len(sent)+len(stored)) comparisons).
func overlap(stored, sent []chatmem.Message) int {
	if len(stored) == 0 || len(sent) == 0 {
		return 0
	}
	// fail[i] is the length of the longest proper prefix of sent[:i+1]
	// that is also its suffix.
	fail := make([]int, len(sent))
	for i, k := 1, 0; i < len(sent); i++ {
		for k > 0 && !sameMessage(sent[i], sent[k]) {
			k = fail[k-1]
		}
		if sameMessage(sent[i], sent[k]) {
			k++
		}
		fail[i] = k
	}
	k := 0
	for i := range stored {
		for k > 0 && (k == len(sent) || !sameMessage(stored[i], sent[k])) {
			k = fail[k-1]
		}
		if sameMessage(stored[i], sent[k]) {
			k++
		}
	}
	return k
}

// sameMessage reports whether stored holds the chat fields of sent: role,
// content, name, tool_call_id, and tool calls (a missing type is
// "function"; arguments that differ only in JSON white space are the
// same, since clients such as LangChain parse them and write them anew).
//
// A stored message marked redacted (chatmem.MetaRedacted) holds sent
// whatever the content and the tool calls' names and arguments, if the
// role, name, tool_call_id and tool call IDs agree: clients still hold the
// original text and resend it, and the redacted message stands for it, so
// a redaction never makes the proxy rewind, fork, refuse or append the
// original again.
func sameMessage(stored, sent chatmem.Message) bool {
	redacted := stored.Metadata[chatmem.MetaRedacted] != ""
	return stored.Role == sent.Role && (redacted || stored.Content == sent.Content) && stored.Name == sent.Name &&
		stored.ToolCallID == sent.ToolCallID &&
		slices.EqualFunc(stored.ToolCalls, sent.ToolCalls, func(a, b chatmem.ToolCall) bool {
			return a.ID == b.ID && (redacted || a.Function.Name == b.Function.Name && sameArguments(a.Function.Arguments, b.Function.Arguments)) &&
				(a.Type == b.Type || a.Type == "" || b.Type == "")
		})
}

// sameArguments reports whether two tool calls' arguments are equal, or
// the same JSON but for white space.
func sameArguments(a, b string) bool {
	if a == b {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, []byte(a)) == nil && json.Compact(&cb, []byte(b)) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

// errDiverged answers a request whose history diverges from the stored
// conversation under DivergeRefuse.
type errDiverged struct {
	index int   // the first differing index of the request's messages (system messages counted)
	seq   int64 // the stored message it differs from
	ended bool  // the request ends at index, before stored message seq
}

func (e *errDiverged) Error() string {
	if e.ended {
		return fmt.Sprintf("the request's messages end before the stored conversation's message %d: they diverge from it at messages[%d]; name a new conversation for another branch", e.seq, e.index)
	}
	return fmt.Sprintf("the request's messages diverge from the stored conversation at messages[%d], which differs from its stored message %d; name a new conversation for another branch", e.index, e.seq)
}

func (e *errDiverged) Unwrap() error { return chatmem.ErrConflict }

// codeDiverged is the error code of errDiverged.
const codeDiverged = "history_diverged"

// maxForks bounds how many forks one request follows: a fork of a fork is
// reconciled too, up to this depth.
const maxForks = 8

// forkID is the conversation that holds the branch of conversation id
// whose messages up to and including the first differing one are branch:
// the same branch always forks into the same conversation, so a client
// that goes on naming the original conversation keeps reaching its
// branch.
func forkID(id string, branch []chatmem.Message) string {
	h := sha256.New()
	h.Write([]byte(id))
	for _, m := range branch {
		b, _ := MarshalOpenAIMessage(m)
		h.Write(strconv.AppendInt(nil, int64(len(b)), 10))
		h.Write(b)
	}
	sum := ".fork-" + hex.EncodeToString(h.Sum(nil)[:8])
	if len(id) > chatmem.MaxIDLen-len(sum) {
		id = id[:chatmem.MaxIDLen-len(sum)]
	}
	return id + sum
}

package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/chatmem/chatmem"
)

// MetaRequestFingerprint is the metadata key of a stored reply that holds
// the fingerprint (requestFingerprint) of the request it answered, when
// that request had an Idempotency-Key: a retry must match it.
const MetaRequestFingerprint = "request_fingerprint"

// requestFingerprint is the SHA-256 of a request body, in hex: a retry
// sends the same bytes.
func requestFingerprint(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// replyKey is the idempotency key a reply is stored under, derived from
// the request's Idempotency-Key (whose own key stores the turn's
// messages). The separator is not ASCII, which a client's key is, so no
// key of a client's is another's reply key.
func replyKey(key string) string { return "reply\u00b7" + key }

// probeSeq is a LastSeq no conversation reaches. An append under an
// idempotency key that expects it replays the key's append if there was
// one, and otherwise fails with ErrConflict and writes nothing (the key is
// checked before ExpectedLastSeq): a lookup of the key that every store
// answers (storetest's IdempotencyProbe).
const probeSeq = math.MaxInt64

// storedReply returns the reply stored for the turn's Idempotency-Key, nil
// if there is none yet, or an error wrapping ErrIdempotencyKeyReused if
// the key's reply answered another request (the store compares the
// fingerprints; the reply's metadata holds it too, for keys stored before
// stores kept fingerprints).
func (s *Server) storedReply(ctx context.Context, t *turn) (*chatmem.Message, error) {
	probe := []chatmem.Message{{Role: chatmem.RoleAssistant, Content: "probe"}}
	seq := int64(probeSeq)
	res, err := timed(s, "append", func() (chatmem.AppendResult, error) {
		return s.mem.Append(ctx, t.key, probe, chatmem.AppendOptions{IdempotencyKey: replyKey(t.idemKey), Fingerprint: t.fingerprint, ExpectedLastSeq: &seq, User: t.user, Started: t.started})
	})
	switch {
	case errors.Is(err, chatmem.ErrConflict):
		return nil, nil // no reply under the key
	case err != nil:
		return nil, err
	case !res.Replayed || len(res.Messages) == 0:
		return nil, fmt.Errorf("idempotency key lookup of %s: an append with LastSeq %d was not refused", t.key, seq)
	}
	reply := res.Messages[len(res.Messages)-1]
	if reply.Metadata[MetaRequestFingerprint] != t.fingerprint {
		return nil, errKeyReused
	}
	return &reply, nil
}

// sameMessages reports whether stored holds the chat fields of sent.
func sameMessages(stored, sent []chatmem.Message) bool {
	if len(stored) != len(sent) {
		return false
	}
	for i, m := range sent {
		if !sameMessage(stored[i], m) {
			return false
		}
	}
	return true
}

// replay answers a retried request with the reply stored for it, in the
// shape the request asked for: a chat.completion, or its chunks and data:
// [DONE]. Idempotent-Replayed: true says so, as the REST API's replays do.
func (s *Server) replay(c *call, stream bool, model string, reply chatmem.Message) error {
	id := "chatcmpl-chatmem-" + strconv.FormatInt(reply.Seq, 10)
	created := reply.CreatedAt.Unix()
	finish := "stop"
	if len(reply.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	msg := openAIMessage{Role: chatmem.RoleAssistant, ToolCalls: reply.ToolCalls}
	if reply.Content != "" || len(reply.ToolCalls) == 0 {
		msg.Content = &reply.Content
	}
	h := c.w.Header()
	h.Set("Idempotent-Replayed", "true")
	if !stream {
		writeJSON(c.w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		})
		return nil
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	c.w.WriteHeader(http.StatusOK)
	event := func(delta any, finish any) {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		})
		_, _ = fmt.Fprintf(c.w, "data: %s\n\n", b)
	}
	first := map[string]any{"role": "assistant", "content": reply.Content}
	if len(reply.ToolCalls) > 0 {
		calls := make([]map[string]any, len(reply.ToolCalls))
		for i, tc := range reply.ToolCalls {
			calls[i] = map[string]any{"index": i, "id": tc.ID, "type": "function", "function": tc.Function}
		}
		first["tool_calls"] = calls
	}
	event(first, nil)
	event(map[string]any{}, finish)
	_, _ = fmt.Fprint(c.w, "data: [DONE]\n\n")
	_ = http.NewResponseController(c.w).Flush()
	return nil
}

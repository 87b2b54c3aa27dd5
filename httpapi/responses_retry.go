package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/chatmem/chatmem"
)

// metaResponseInput marks an input message a response stored before its
// upstream call (a conversation's first turn), so that a retry after a
// failure that left it there lines up with it (lineUpOrphanInput).
const metaResponseInput = "openai.response_input"

// responseKey is the idempotency key a response's append is stored under,
// derived from the request's Idempotency-Key (the separator is not ASCII,
// which a client's key is, so no key of a client's, or of the chat
// proxy's, is a response's).
func responseKey(key string) string { return "response\u00b7" + key }

// idemConversationID is the conversation a response with Idempotency-Key
// key and no conversation starts: a retry finds it again.
func idemConversationID(key string) string {
	h := sha256.Sum256([]byte("chatmem responses conversation\x00" + key))
	return "conv_" + hex.EncodeToString(h[:24])
}

// storedResponseUnder returns the reply of the response stored under t's
// Idempotency-Key, nil if there is none yet, or an error wrapping
// chatmem.ErrIdempotencyKeyReused if the key's response answered another
// request body. It is the chat proxy's probe (storedReply): an append
// under the key that expects a LastSeq no conversation reaches replays the
// key's append if there was one, and writes nothing otherwise.
func (s *Server) storedResponseUnder(ctx context.Context, t *respTurn) (*chatmem.Message, error) {
	probe := []chatmem.Message{{Role: chatmem.RoleAssistant, Content: "probe"}}
	seq := int64(probeSeq)
	res, err := s.mem.Append(ctx, t.key, probe, chatmem.AppendOptions{IdempotencyKey: responseKey(t.idemKey), Fingerprint: t.fingerprint, ExpectedLastSeq: &seq, User: t.user})
	switch {
	case errors.Is(err, chatmem.ErrConflict), errors.Is(err, chatmem.ErrNotFound):
		return nil, nil
	case errors.Is(err, chatmem.ErrIdempotencyKeyReused):
		return nil, errKeyReused
	case err != nil:
		return nil, err
	case !res.Replayed || len(res.Messages) == 0:
		return nil, fmt.Errorf("idempotency key lookup of %s: an append with LastSeq %d was not refused", t.key, seq)
	}
	reply := res.Messages[len(res.Messages)-1]
	if _, ok := reply.Metadata[metaResponse]; !ok {
		return nil, errKeyReused
	}
	return &reply, nil
}

// replayResponse answers a retried request with the response stored for
// its Idempotency-Key: the object, or, streaming, the events of its
// output items and response.completed. Idempotent-Replayed: true says so.
func (s *Server) replayResponse(c *call, t *respTurn, m chatmem.Message) error {
	var rec responseRecord
	if err := json.Unmarshal([]byte(m.Metadata[metaResponse]), &rec); err != nil {
		return fmt.Errorf("replay the response: %w", err)
	}
	obj := outputOf(rec, m)
	c.w.Header().Set("Idempotent-Replayed", "true")
	if !t.stream() {
		writeJSON(c.w, http.StatusOK, obj)
		return nil
	}
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	c.w.WriteHeader(http.StatusOK)
	w := &respStream{c: c, rc: http.NewResponseController(c.w)}
	start := obj
	start.Status, start.Output, start.Usage = "in_progress", []json.RawMessage{}, nil
	w.emit("response.created", map[string]any{"response": start})
	w.emit("response.in_progress", map[string]any{"response": start})
	for i, raw := range obj.Output {
		var it struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			Arguments string `json:"arguments"`
			Name      string `json:"name"`
			CallID    string `json:"call_id"`
			Role      string `json:"role"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(raw, &it)
		// Added in progress, as the live stream adds it (streamResponse).
		added := any(raw)
		switch it.Type {
		case "message":
			added = map[string]any{"type": "message", "id": it.ID, "status": "in_progress", "role": it.Role, "content": []any{}}
		case "function_call":
			added = json.RawMessage(functionCallJSON(it.ID, chatmem.ToolCall{ID: it.CallID, Function: chatmem.FunctionCall{Name: it.Name}}, "in_progress"))
		}
		w.emit("response.output_item.added", map[string]any{"output_index": i, "item": added})
		switch it.Type {
		case "message":
			for j, part := range it.Content {
				p := outputTextPart{Type: "output_text", Text: part.Text, Annotations: []any{}, Logprobs: []any{}}
				empty := p
				empty.Text = ""
				w.emit("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": i, "content_index": j, "part": empty})
				w.emit("response.output_text.delta", map[string]any{"item_id": it.ID, "output_index": i, "content_index": j, "delta": p.Text, "logprobs": []any{}})
				w.emit("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": j, "text": p.Text, "logprobs": []any{}})
				w.emit("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": j, "part": p})
			}
		case "function_call":
			w.emit("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": i, "delta": it.Arguments})
			w.emit("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "name": it.Name, "arguments": it.Arguments})
		}
		w.emit("response.output_item.done", map[string]any{"output_index": i, "item": raw})
	}
	w.emit("response.completed", map[string]any{"response": obj})
	return nil
}

// lineUpOrphanInput lines a retry up with the input its first attempt
// stored before the upstream call failed, when the server could not take
// it back (dropOrphanInput; a crash, say): if the conversation holds just
// that input, marked, the turn answers it instead of storing it again.
func (s *Server) lineUpOrphanInput(ctx context.Context, t *respTurn) error {
	stored, err := s.mem.Messages(ctx, t.key, 0, len(t.pending))
	if err != nil {
		if errors.Is(err, chatmem.ErrNotFound) {
			return nil
		}
		return err
	}
	for _, m := range stored {
		if m.Metadata[metaResponseInput] == "" {
			return nil
		}
	}
	if int64(len(stored)) == t.last && sameMessages(stored, t.pending) {
		t.pending, t.inFrom = nil, 1
	}
	return nil
}

// dropOrphanInput takes back the input a conversation's first turn stored
// before the upstream call when no reply was stored after it (the
// upstream failed, the stream broke, the client went away): the
// conversation the turn created is deleted, an existing one rewound to
// empty, conditional on nothing else having been appended. A failure is
// logged; a retry then lines up with the input (lineUpOrphanInput).
func (s *Server) dropOrphanInput(ctx context.Context, t *respTurn) {
	if !t.preAppended || t.committed {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingWriteTimeout)
	defer cancel()
	// Conditional on the LastSeq this turn left: a request with the same
	// Idempotency-Key that lined up with the input (or the branch) and
	// stored its reply after it keeps it. A conversation the turn created
	// is deleted once it is empty; an attempt that stores new input in it
	// between the rewind and the delete loses it (Delete cannot be
	// conditional), and answers an error, not a reply that is gone.
	last := t.last
	_, err := s.mem.Rewind(wctx, t.key, 0, chatmem.RewindOptions{ExpectedLastSeq: &last})
	if err == nil && t.created {
		err = s.mem.Delete(wctx, t.key)
	}
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "responses: the input of a failed first turn was not taken back",
			slog.String("conversation", t.key.ID), slog.String("error", err.Error()))
	}
}

// forkResponse copies the history a branch answers from, messages 1 to
// t.last of t.forkOf, into the branch's new conversation t.key (as the
// chat proxy stores a diverging request's branch, DivergeFork): the
// branch is a conversation of its own, and the original, with the
// responses after the one branched from, stays as it was. The copy
// costs a read and a write of that history, once per branch; the
// conversation-scoped facts, summary and receipts are not copied.
// A retry whose branch exists copies what its first attempt left
// uncopied; a branch past the response branched from, with no response
// stored under the key (createResponse looked), is a conflict.
func (s *Server) forkResponse(ctx context.Context, t *respTurn) error {
	upto := t.forkUpto
	var next int64
	if conv, err := s.mem.Conversation(ctx, t.key); err == nil {
		next = conv.LastSeq
	} else if !errors.Is(err, chatmem.ErrNotFound) {
		return err
	}
	if next > upto {
		return fmt.Errorf("%w: the branch's conversation %q holds %d messages, past the %d it branches from; retry with another Idempotency-Key", chatmem.ErrConflict, t.key.ID, next, upto)
	}
	t.last = next // where a failure rewinds from (dropOrphanInput)
	const chunk = 500
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingWriteTimeout)
	defer cancel()
	t.preAppended = next < upto // from here on, a failure deletes the branch
	for next < upto {
		msgs, err := s.mem.Messages(wctx, t.forkOf, next, int(min(chunk, upto-next)))
		if err != nil {
			return fmt.Errorf("branch from %s: %w", t.forkOf, err)
		}
		if len(msgs) == 0 {
			return fmt.Errorf("%w: branch from %s: messages after %d are gone", chatmem.ErrConflict, t.forkOf, next)
		}
		for i := range msgs {
			msgs[i] = msgs[i].Clone()
			msgs[i].Seq, msgs[i].Tokens = 0, 0
			delete(msgs[i].Metadata, metaResponseInput)
		}
		last := next
		res, err := s.mem.Append(wctx, t.key, msgs, chatmem.AppendOptions{ExpectedLastSeq: &last, User: t.user})
		if err != nil {
			return fmt.Errorf("branch from %s: %w", t.forkOf, err)
		}
		next = res.Conversation.LastSeq
		t.last = next
	}
	return nil
}

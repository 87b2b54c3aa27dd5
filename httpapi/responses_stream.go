package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/sse"
)

// respStream writes a response's events, numbering them.
type respStream struct {
	c   *call
	rc  *http.ResponseController
	seq int
	err error // the first write error
}

// emit writes one event: fields, with its type and sequence_number.
func (w *respStream) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = w.seq
	w.seq++
	b, err := json.Marshal(fields)
	if err != nil {
		b = []byte(`{}`)
	}
	if w.err != nil {
		return
	}
	if _, err := fmt.Fprintf(w.c.w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
		w.err = err
		return
	}
	w.err = w.rc.Flush()
}

// streamCall is a function call being streamed.
type streamCall struct {
	out   int // output_index
	id    string
	tc    chatmem.ToolCall
	added bool
}

// streamResponse relays the upstream's chat completion chunks as the
// Responses event sequence: response.created and response.in_progress;
// for the text, response.output_item.added, response.content_part.added,
// response.output_text.delta per chunk, then .done events; for each
// function call, response.output_item.added,
// response.function_call_arguments.delta and .done, and
// response.output_item.done. When the upstream's stream is done the
// response is stored, and only then is response.completed sent: a client
// that has it has a stored response. A failure (of the upstream or the
// commit) ends the stream with response.failed and stores nothing of the
// response.
func (s *Server) streamResponse(c *call, resp *http.Response, t *respTurn, started time.Time) error {
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(c.w)
	_ = rc.SetWriteDeadline(time.Time{})
	c.w.WriteHeader(http.StatusOK)
	w := &respStream{c: c, rc: rc}
	ctx := c.r.Context()

	snapshot := func(status string) responseObject {
		o := t.obj
		o.Status, o.Output = status, []json.RawMessage{}
		return o
	}
	w.emit("response.created", map[string]any{"response": snapshot("in_progress")})
	w.emit("response.in_progress", map[string]any{"response": snapshot("in_progress")})

	seq := strconv.FormatInt(t.seq, 10)
	msgID := "msg_" + seq
	outputs := 0
	textOut, textOpen := -1, false
	var text strings.Builder
	var calls []*streamCall
	byIndex := map[int]*streamCall{}
	var usage *chatUsage
	finish := ""
	// Counted once, however the stream ends.
	defer func() { s.recordUsage(ctx, t.callInfo(c), usage.ledger()) }()

	closeText := func() {
		if !textOpen {
			return
		}
		textOpen = false
		// A key split over two events escaped their redaction.
		part := outputTextPart{Type: "output_text", Text: string(redactKey([]byte(text.String()), c.up.key)), Annotations: []any{}, Logprobs: []any{}}
		w.emit("response.output_text.done", map[string]any{"item_id": msgID, "output_index": textOut, "content_index": 0, "text": part.Text, "logprobs": []any{}})
		w.emit("response.content_part.done", map[string]any{"item_id": msgID, "output_index": textOut, "content_index": 0, "part": part})
		w.emit("response.output_item.done", map[string]any{"output_index": textOut, "item": json.RawMessage(messageItemOf(chatmem.Message{Role: chatmem.RoleAssistant, Content: part.Text}, msgID).raw)})
	}
	fail := func(code, msg string) error {
		o := snapshot("failed")
		o.Error = &responseFailure{Code: code, Message: msg}
		w.emit("response.failed", map[string]any{"response": o})
		info := infoOf(ctx)
		info.code = "stream_incomplete"
		return nil
	}

	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return fail("server_error", "the upstream stream ended before data: [DONE]")
		}
		if err != nil {
			return fail("server_error", "the upstream stream failed")
		}
		if w.err != nil || ctx.Err() != nil {
			return nil // the client is gone: nothing is stored
		}
		data := redactKey(ev.Data, c.up.key)
		if len(data) == 0 {
			continue
		}
		if string(data) == "[DONE]" {
			break
		}
		if chatmem.CheckJSONText(data) != nil {
			return fail("server_error", "the upstream stream sent text that is not valid UTF-8")
		}
		var ch struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				Index        int     `json:"index"`
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					Content   *string `json:"content"`
					Refusal   *string `json:"refusal"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *chatUsage      `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(data, &ch); err != nil {
			return fail("server_error", "the upstream stream sent an event that is not a chat completion chunk")
		}
		if len(ch.Error) > 0 && string(ch.Error) != "null" {
			return fail("server_error", "the upstream stream ended with an error")
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
		if ch.Model != "" {
			t.upModel, t.upID = ch.Model, ch.ID
		}
		for _, choice := range ch.Choices {
			if choice.Index != 0 {
				continue
			}
			if choice.FinishReason != nil {
				finish = *choice.FinishReason
			}
			delta := choice.Delta.Content
			if delta == nil {
				delta = choice.Delta.Refusal
			}
			if delta != nil && *delta != "" {
				if textOut < 0 {
					textOut, textOpen = outputs, true
					outputs++
					w.emit("response.output_item.added", map[string]any{"output_index": textOut, "item": map[string]any{"type": "message", "id": msgID, "status": "in_progress", "role": "assistant", "content": []any{}}})
					w.emit("response.content_part.added", map[string]any{"item_id": msgID, "output_index": textOut, "content_index": 0, "part": outputTextPart{Type: "output_text", Annotations: []any{}, Logprobs: []any{}}})
				}
				if textOpen {
					text.WriteString(*delta)
					w.emit("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": textOut, "content_index": 0, "delta": *delta, "logprobs": []any{}})
				}
			}
			for _, d := range choice.Delta.ToolCalls {
				sc := byIndex[d.Index]
				if sc == nil {
					if len(calls) >= maxStreamToolCalls {
						return fail("server_error", "the upstream stream sent too many tool calls")
					}
					// The text item stays open: text the model sends after
					// a call goes on in it, to the client and to the store.
					sc = &streamCall{out: outputs, id: "fc_" + seq + "_" + strconv.Itoa(len(calls))}
					outputs++
					byIndex[d.Index] = sc
					calls = append(calls, sc)
				}
				if d.ID != "" {
					sc.tc.ID = d.ID
				}
				sc.tc.Function.Name += d.Function.Name
				if !sc.added && sc.tc.ID != "" && sc.tc.Function.Name != "" {
					sc.added = true
					w.emit("response.output_item.added", map[string]any{"output_index": sc.out, "item": json.RawMessage(functionCallJSON(sc.id, chatmem.ToolCall{ID: sc.tc.ID, Function: chatmem.FunctionCall{Name: sc.tc.Function.Name}}, "in_progress"))})
					if sc.tc.Function.Arguments != "" {
						w.emit("response.function_call_arguments.delta", map[string]any{"item_id": sc.id, "output_index": sc.out, "delta": sc.tc.Function.Arguments})
					}
				}
				sc.tc.Function.Arguments += d.Function.Arguments
				if sc.added && d.Function.Arguments != "" {
					w.emit("response.function_call_arguments.delta", map[string]any{"item_id": sc.id, "output_index": sc.out, "delta": d.Function.Arguments})
				}
			}
		}
	}
	closeText()
	var tcs []chatmem.ToolCall
	for _, sc := range calls {
		if !sc.added {
			return fail("server_error", "the upstream stream sent a tool call without an id or a name")
		}
		sc.tc.Type = "function"
		// A key split over two events escaped their redaction.
		sc.tc.Function.Arguments = string(redactKey([]byte(sc.tc.Function.Arguments), c.up.key))
		tcs = append(tcs, sc.tc)
		w.emit("response.function_call_arguments.done", map[string]any{"item_id": sc.id, "output_index": sc.out, "name": sc.tc.Function.Name, "arguments": sc.tc.Function.Arguments})
		w.emit("response.output_item.done", map[string]any{"output_index": sc.out, "item": json.RawMessage(functionCallJSON(sc.id, sc.tc, "completed"))})
	}
	if w.err != nil || ctx.Err() != nil {
		return nil
	}
	m, err := s.finishResponse(ctx, t, string(redactKey([]byte(text.String()), c.up.key)), tcs, usage, finish, started)
	if err != nil {
		_, code := classify(err)
		msg := "the response could not be stored; retry the request"
		if errors.Is(err, chatmem.ErrConflict) {
			msg = err.Error()
		}
		return fail(code, msg)
	}
	if t.replayed {
		// A request with the same Idempotency-Key stored its response
		// first, and this stream's deltas are not it: the client is told
		// to retry, which replays the stored response, not given a
		// response.completed that contradicts what it was sent.
		w.emit("error", map[string]any{"code": "idempotency_key_in_use", "param": nil,
			"message": "a request with the same Idempotency-Key stored its response first; this stream's output was not stored, retry the request to get the stored response"})
		infoOf(ctx).code = "stream_incomplete"
		return nil
	}
	w.emit("response.completed", map[string]any{"response": outputOf(responseRecord{Response: t.obj}, m)})
	return nil
}

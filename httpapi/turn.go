package httpapi

import (
	"fmt"

	"github.com/chatmem/chatmem"
)

// turn is one turn of a chatbot in one request: the append of POST
// .../messages (same body, If-Match and Idempotency-Key) and the context
// read of GET .../context (same query parameters), made by Memory.Turn in
// as few store round trips as the store allows. Bad input of either part
// changes nothing. When the append lands but the window cannot be
// assembled (a budget too small for it, ErrBudgetTooSmall's 422), the
// answer is the window's error with the conversation's new ETag: the
// append stands, and a retry with the same Idempotency-Key replays it.
func (s *Server) turn(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	p, copts, err := contextParams(c)
	if err != nil {
		return err
	}
	if copts.Preview {
		return fmt.Errorf("%w: parameter preview is for context reads: a turn appends, so it is traffic", chatmem.ErrInvalid)
	}
	msgs, opts, err := s.appendRequest(c)
	if err != nil {
		return err
	}
	var w chatmem.Window
	res, err := timed(s, "turn", func() (chatmem.AppendResult, error) {
		res, win, err := s.mem.Turn(c.r.Context(), key, msgs, opts, p, copts)
		w = win
		return res, err
	})
	if err != nil {
		if res.Conversation.LastSeq > 0 {
			// The append landed and only the window failed: the ETag
			// says where the conversation now ends.
			c.w.Header().Set("ETag", etag(res.Conversation.LastSeq))
		}
		return err
	}
	status := appendStatus(c, res)
	writeJSON(c.w, status, TurnResponse{
		Appended: AppendResponse{Messages: nonNil(res.Messages), Conversation: conversationOf(key.ID, res.Conversation)},
		Window:   s.sentWindow(p, w),
	})
	return nil
}

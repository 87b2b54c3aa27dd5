package httpapi

import (
	"fmt"
	"net/http"

	"github.com/chatmem/chatmem"
)

// rewindConversation answers POST /v1/conversations/{id}/rewind: the
// conversation is taken back to message to_seq (chatmem.Memory.Rewind),
// conditionally on If-Match (the last seq as the client knows it; without
// it, the last seq the server reads first), and the answer is the
// conversation after it, with its ETag.
func (s *Server) rewindConversation(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	var opts chatmem.RewindOptions
	if opts.ExpectedLastSeq, err = ifMatch(c.r); err != nil {
		return err
	}
	body, err := readBody(c.w, c.r, s.limits.MaxBodyBytes)
	if err != nil {
		return err
	}
	var req RewindRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.ToSeq == nil {
		return fmt.Errorf("%w: to_seq is required: the last message to keep (0: none)", chatmem.ErrInvalid)
	}
	conv, err := timed(s, "rewind", func() (chatmem.Conversation, error) {
		return s.mem.Rewind(c.r.Context(), key, *req.ToSeq, opts)
	})
	if err != nil {
		return err
	}
	c.w.Header().Set("ETag", etag(conv.LastSeq))
	writeJSON(c.w, http.StatusOK, conversationOf(key.ID, conv))
	return nil
}

package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/chatmem/chatmem"
)

// redactMessage answers POST /v1/conversations/{id}/messages/{seq}/redact:
// message seq's content is replaced (chatmem.Memory.Redact), conditionally
// on If-Match (the last seq as the client knows it; without it, the last
// seq the server reads first), and the answer is the conversation and the
// message after it, with the conversation's ETag. The reason, if any, goes
// to the log with the conversation and seq; the old and new contents do
// not.
func (s *Server) redactMessage(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	seq, err := strconv.ParseInt(c.r.PathValue("seq"), 10, 64)
	if err != nil || seq < 1 {
		return fmt.Errorf("%w: the message's seq must be a positive decimal integer, not %q", chatmem.ErrInvalid, c.r.PathValue("seq"))
	}
	var opts chatmem.RedactOptions
	if opts.ExpectedLastSeq, err = ifMatch(c.r); err != nil {
		return err
	}
	body, err := readBody(c.w, c.r, s.limits.MaxBodyBytes)
	if err != nil {
		return err
	}
	var req RedactRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	if req.Content == nil {
		return fmt.Errorf("%w: content is required: the message's new text", chatmem.ErrInvalid)
	}
	if len(req.Reason) > maxRedactReason {
		return fmt.Errorf("%w: reason is %d bytes, over the limit of %d", chatmem.ErrTooLarge, len(req.Reason), maxRedactReason)
	}
	opts.ClearToolCalls = req.ClearToolCalls
	type result struct {
		conv chatmem.Conversation
		msg  chatmem.Message
	}
	res, err := timed(s, "redact", func() (result, error) {
		conv, msg, err := s.mem.Redact(c.r.Context(), key, seq, *req.Content, opts)
		return result{conv, msg}, err
	})
	if err != nil {
		return err
	}
	s.log.InfoContext(c.r.Context(), "message redacted", "tenant", key.Tenant, "conversation", key.ID, "seq", seq, "reason", req.Reason)
	c.w.Header().Set("ETag", etag(res.conv.LastSeq))
	writeJSON(c.w, http.StatusOK, RedactResponse{Conversation: conversationOf(key.ID, res.conv), Message: res.msg})
	return nil
}

// maxRedactReason bounds a redaction's reason, which goes to the log.
const maxRedactReason = 1024

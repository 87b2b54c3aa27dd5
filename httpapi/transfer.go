package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/transfer"
)

// ndjsonType is the media type of exports and of import answers.
const ndjsonType = "application/x-ndjson"

// streamGrace is how long a streamed export or import may take for each
// conversation it moves: the server's read and write timeouts bound a
// whole request, so a stream pushes them forward as it goes.
const streamGrace = time.Minute

// extendDeadlines pushes the connection's read and write deadlines
// streamGrace ahead (where the writer allows it).
func extendDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	at := time.Now().Add(streamGrace)
	_ = rc.SetReadDeadline(at)
	_ = rc.SetWriteDeadline(at)
}

// startNDJSON sends the headers of a streamed NDJSON answer.
func startNDJSON(w http.ResponseWriter) *bufio.Writer {
	h := w.Header()
	h.Set("Content-Type", ndjsonType)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return bufio.NewWriterSize(w, 64<<10)
}

// exportConversation streams one conversation as chatmem/v1 NDJSON.
func (s *Server) exportConversation(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	if _, err := query(c.r); err != nil {
		return err
	}
	if _, err := s.mem.Conversation(c.r.Context(), key); err != nil {
		return err
	}
	bw := startNDJSON(c.w)
	err = s.mem.Export(func(st chatmem.Store) error {
		if err := transfer.WriteHeader(bw); err != nil {
			return err
		}
		_, err := transfer.WriteConversation(c.r.Context(), st, key, bw)
		return err
	})
	s.endStream(c, bw, err)
	return nil
}

// exportTenant streams one page of the tenant's conversations as
// chatmem/v1 NDJSON, the last page followed by the records of the users
// with facts and no live conversation; the X-Chatmem-Next header (and a
// Link with rel="next") gives the after= of the next page.
func (s *Server) exportTenant(c *call) error {
	q, err := query(c.r, "after", "limit")
	if err != nil {
		return err
	}
	after := q.Get("after")
	if after != "" {
		if err := chatmem.ValidateID(after); err != nil {
			return fmt.Errorf("parameter after: %w", err)
		}
	}
	limit, err := intParam(q, "limit", defaultListLimit, 1, maxPageLimit)
	if err != nil {
		return err
	}
	page, err := s.mem.List(c.r.Context(), c.tenant, chatmem.PageRequest{After: after, Limit: int(limit)})
	if err != nil {
		return err
	}
	ids := make([]string, len(page.Conversations))
	for i, conv := range page.Conversations {
		ids[i] = conv.Key.ID
	}
	if page.Next != "" {
		c.w.Header().Set("X-Chatmem-Next", page.Next)
		c.w.Header().Set("Link", fmt.Sprintf(`</v1/export?after=%s&limit=%d>; rel="next"`, page.Next, limit))
	}
	bw := startNDJSON(c.w)
	err = s.mem.Export(func(st chatmem.Store) error {
		err := transfer.Export(c.r.Context(), st, c.tenant, bw, transfer.ExportOptions{IDs: ids, Progress: func(int64, int64) { extendDeadlines(c.w) }})
		if err != nil || page.Next != "" {
			return err
		}
		// The last page brings the users no conversation brought: those
		// with facts and no live conversation.
		return transfer.WriteUsersWithoutConversations(c.r.Context(), st, c.tenant, bw, func() { extendDeadlines(c.w) })
	})
	s.endStream(c, bw, err)
	return nil
}

// endStream flushes a streamed answer. An error after the status was sent
// cannot change it: it ends the stream with an error line, and the details
// go to the log.
func (s *Server) endStream(c *call, bw *bufio.Writer, err error) {
	if err != nil {
		info := infoOf(c.r.Context())
		info.err = err
		status, code := classify(err)
		msg := err.Error()
		if status >= 500 {
			msg = "internal error; the server's log has the details under request " + info.id
		}
		b, _ := json.Marshal(errorBody{Error: errorDetail{Code: code, Message: msg}})
		bw.Write(append(b, '\n'))
	}
	_ = bw.Flush()
}

// importResultLine is the last line of an import's answer.
type importResultLine struct {
	Totals transfer.Totals `json:"totals"`
}

// importNDJSON reads a chatmem/v1 stream into the caller's tenant and
// answers with one line per conversation, then the totals. A bad header is
// a 400 before anything is read; what follows is answered line by line.
func (s *Server) importNDJSON(c *call) error {
	q, err := query(c.r, "on_conflict")
	if err != nil {
		return err
	}
	policy, err := transfer.ParseConflict(q.Get("on_conflict"))
	if err != nil {
		return err
	}
	body := http.MaxBytesReader(c.w, c.r.Body, s.limits.MaxImportBytes)
	var bw *bufio.Writer
	var forget func(chatmem.Key)
	each := func(r transfer.Result) error {
		switch r.Status {
		case transfer.StatusCreated, transfer.StatusResumed, transfer.StatusReplaced:
			if r.Conversation != "" {
				forget(chatmem.Key{Tenant: c.tenant, ID: r.Conversation})
			}
		}
		extendDeadlines(c.w)
		if bw == nil {
			bw = startNDJSON(c.w)
		}
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = bw.Write(append(b, '\n'))
		return err
	}
	// An import is held to what an append is: the server's content limit,
	// and a tokenizer the server resolves.
	opts := transfer.ImportOptions{
		OnConflict: policy,
		Limits:     chatmem.Limits{MaxContentBytes: s.limits.MaxContentBytes},
		Tokenizer:  func(name string) error { _, err := s.mem.Counter(name); return err },
	}
	var totals transfer.Totals
	err = s.mem.Import(func(st chatmem.Store, f func(chatmem.Key)) error {
		forget = f
		var err error
		totals, err = transfer.Import(c.r.Context(), st, c.tenant, body, opts, each)
		return err
	})
	if bw == nil {
		if err != nil {
			return fromBodyError(err)
		}
		bw = startNDJSON(c.w)
	}
	if err == nil {
		b, _ := json.Marshal(importResultLine{Totals: totals})
		bw.Write(append(b, '\n'))
	}
	s.endStream(c, bw, fromBodyError(err))
	return nil
}

// fromBodyError turns a body over MaxImportBytes into ErrTooLarge.
func fromBodyError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return fmt.Errorf("%w: the import body is over the limit of %d bytes", chatmem.ErrTooLarge, tooBig.Limit)
	}
	return err
}

package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/transfer"
)

// The user routes (/v1/users/{user}/...): a user is an ID of the caller's
// tenant, as a conversation is, and its facts have the shape of a
// conversation's.

// userKey returns the key of the user the path names, in the caller's
// tenant.
func (c *call) userKey() (chatmem.Key, error) {
	id := c.r.PathValue("user")
	if err := chatmem.ValidateUser(id); err != nil {
		return chatmem.Key{}, fmt.Errorf("user: %w", err)
	}
	return chatmem.Key{Tenant: c.tenant, ID: id}, nil
}

// userConversations lists the conversations of user (GET
// /v1/conversations?user=).
func (s *Server) userConversations(c *call, user string, page chatmem.PageRequest) (chatmem.Page, error) {
	if err := chatmem.ValidateUser(user); err != nil {
		return chatmem.Page{}, fmt.Errorf("parameter user: %w", err)
	}
	return s.mem.UserConversations(c.r.Context(), chatmem.Key{Tenant: c.tenant, ID: user}, page)
}

// historyParam reads ?history=true|false of GET .../facts.
func historyParam(c *call) (bool, error) {
	q, err := query(c.r, "history")
	if err != nil || !q.Has("history") {
		return false, err
	}
	h, err := strconv.ParseBool(q.Get("history"))
	if err != nil {
		return false, fmt.Errorf("%w: parameter history must be true or false, got %q", chatmem.ErrInvalid, q.Get("history"))
	}
	return h, nil
}

// writeHistory answers with every value the facts have had, oldest first.
func (s *Server) writeHistory(c *call, read func(context.Context) ([]chatmem.Fact, error)) error {
	facts, err := timed(s, "fact_history", func() ([]chatmem.Fact, error) { return read(c.r.Context()) })
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, factsResponse{Facts: nonNil(facts)})
	return nil
}

// userFacts are a user's facts as the generic facts handlers below use
// them.
type userFacts struct {
	s    *Server
	user chatmem.Key
}

func (u userFacts) current(ctx context.Context) ([]chatmem.Fact, error) {
	return timed(u.s, "user_facts", func() ([]chatmem.Fact, error) { return u.s.mem.UserFacts(ctx, u.user) })
}

func (u userFacts) set(ctx context.Context, facts []chatmem.Fact) error {
	if len(facts) == 0 {
		return nil
	}
	_, err := timed(u.s, "set_user_facts", func() (struct{}, error) {
		return struct{}{}, u.s.mem.SetUserFacts(ctx, u.user, facts)
	})
	return err
}

func (u userFacts) delete(ctx context.Context, name string) error {
	_, err := timed(u.s, "delete_user_fact", func() (struct{}, error) {
		return struct{}{}, u.s.mem.DeleteUserFact(ctx, u.user, name)
	})
	return err
}

func (u userFacts) write(c *call) error {
	facts, err := u.current(c.r.Context())
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, factsResponse{Facts: nonNil(facts)})
	return nil
}

func (s *Server) userFactsOf(c *call) (userFacts, error) {
	user, err := c.userKey()
	return userFacts{s: s, user: user}, err
}

// getUserFacts answers with the user's current facts, or with
// ?history=true every value they have had, oldest first.
func (s *Server) getUserFacts(c *call) error {
	u, err := s.userFactsOf(c)
	if err != nil {
		return err
	}
	history, err := historyParam(c)
	if err != nil {
		return err
	}
	if history {
		return s.writeHistory(c, func(ctx context.Context) ([]chatmem.Fact, error) {
			return s.mem.UserFactHistory(ctx, u.user, "")
		})
	}
	return u.write(c)
}

// patchUserFacts sets the facts in the body and leaves the others.
func (s *Server) patchUserFacts(c *call) error {
	u, err := s.userFactsOf(c)
	if err != nil {
		return err
	}
	facts, err := s.readFacts(c)
	if err != nil {
		return err
	}
	if err := u.set(c.r.Context(), facts); err != nil {
		return err
	}
	return u.write(c)
}

// putUserFacts makes the body the user's facts: it sets those in the body
// (all or none, validated first), then deletes the keys it does not name.
func (s *Server) putUserFacts(c *call) error {
	u, err := s.userFactsOf(c)
	if err != nil {
		return err
	}
	facts, err := s.readFacts(c)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	if err := u.set(ctx, facts); err != nil {
		return err
	}
	keep := make(map[string]bool, len(facts))
	for _, f := range facts {
		keep[f.Key] = true
	}
	current, err := u.current(ctx)
	if err != nil {
		return err
	}
	for _, f := range current {
		if !keep[f.Key] {
			if err := u.delete(ctx, f.Key); err != nil && !errors.Is(err, chatmem.ErrNotFound) {
				return err
			}
		}
	}
	return u.write(c)
}

// deleteUserFacts deletes the user fact named by ?key= (404 if there is
// none), or every user fact without it.
func (s *Server) deleteUserFacts(c *call) error {
	u, err := s.userFactsOf(c)
	if err != nil {
		return err
	}
	q, err := query(c.r, "key")
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	if q.Has("key") {
		name := q.Get("key")
		if err := chatmem.ValidateFactKey(name); err != nil {
			return fmt.Errorf("parameter key: %w", err)
		}
		if err := u.delete(ctx, name); err != nil {
			return err
		}
	} else {
		current, err := u.current(ctx)
		if err != nil {
			return err
		}
		for _, f := range current {
			if err := u.delete(ctx, f.Key); err != nil && !errors.Is(err, chatmem.ErrNotFound) {
				return err
			}
		}
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteUser erases the user and everything held about them. It may be
// repeated: after a failure, calling it again finishes the job.
func (s *Server) deleteUser(c *call) error {
	user, err := c.userKey()
	if err != nil {
		return err
	}
	n, err := timed(s, "delete_user", func() (int, error) { return s.mem.DeleteUser(c.r.Context(), user) })
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, DeleteUserResponse{DeletedConversations: n})
	return nil
}

// exportPage is how many conversations, and messages, the export reads at
// a time.
const exportPage = 1000

// exportUser streams everything held about the user as NDJSON: by
// default (or with format=chatmem) as a chatmem/v1 file
// (exportUserChatmem), which POST /v1/import reads, so there is one
// export format; with format=records as UserExportLine records, one line
// per conversation, for a reader that wants them grouped so. Once the first
// line is sent the status is 200; a failure after that ends the stream
// early (the last line is then not a complete record) and is logged.
func (s *Server) exportUser(c *call) error {
	user, err := c.userKey()
	if err != nil {
		return err
	}
	q, err := query(c.r, "format")
	if err != nil {
		return err
	}
	switch q.Get("format") {
	case "", "chatmem":
		return s.exportUserChatmem(c, user)
	case "records":
	default:
		return fmt.Errorf("%w: parameter format %q (want chatmem, the default, or records)", chatmem.ErrInvalid, q.Get("format"))
	}
	ctx := c.r.Context()
	facts, err := s.mem.UserFactHistory(ctx, user, "")
	if err != nil {
		return err
	}
	h := c.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("X-Content-Type-Options", "nosniff")
	c.w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(c.w)
	flush := func() {
		if f, ok := c.w.(http.Flusher); ok {
			f.Flush()
		}
	}
	if err := enc.Encode(UserExportLine{Type: "user", User: user.ID, Facts: nonNil(facts)}); err != nil {
		return nil // the client went away
	}
	flush()
	page := chatmem.PageRequest{Limit: exportPage}
	for {
		p, err := s.mem.UserConversations(ctx, user, page)
		if err != nil {
			s.exportFailed(ctx, user, err)
			return nil
		}
		for _, conv := range p.Conversations {
			line, err := s.userExportLine(ctx, user, conv)
			if errors.Is(err, chatmem.ErrNotFound) {
				continue // deleted meanwhile
			}
			if err != nil {
				s.exportFailed(ctx, user, err)
				return nil
			}
			if err := enc.Encode(line); err != nil {
				return nil
			}
			flush()
		}
		if p.Next == "" {
			return nil
		}
		page.After = p.Next
	}
}

// exportUserChatmem streams the user's data as chatmem/v1
// (transfer.ExportUser): the header, the user's record and each of the
// user's conversations, as GET /v1/export writes them.
func (s *Server) exportUserChatmem(c *call, user chatmem.Key) error {
	bw := startNDJSON(c.w)
	err := s.mem.Export(func(st chatmem.Store) error {
		return transfer.ExportUser(c.r.Context(), st, user, &deadlineWriter{w: bw, rw: c.w})
	})
	s.endStream(c, bw, err)
	return nil
}

// deadlineWriter pushes the connection's deadlines forward as a stream
// is written, at most once a second.
type deadlineWriter struct {
	w    io.Writer
	rw   http.ResponseWriter
	last time.Time
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(d.last) > time.Second {
		d.last = now
		extendDeadlines(d.rw)
	}
	return d.w.Write(p)
}

// userExportLine reads one conversation of the user for the export.
func (s *Server) userExportLine(ctx context.Context, user chatmem.Key, conv chatmem.Conversation) (UserExportLine, error) {
	key := conv.Key
	var msgs []chatmem.Message
	for after := int64(0); ; {
		batch, err := s.mem.Messages(ctx, key, after, exportPage)
		if err != nil {
			return UserExportLine{}, err
		}
		msgs = append(msgs, batch...)
		if len(batch) < exportPage {
			break
		}
		after = batch[len(batch)-1].Seq
	}
	s.withPromptTokens(ctx, key, msgs)
	facts, err := s.mem.FactHistory(ctx, key, "")
	if err != nil {
		return UserExportLine{}, err
	}
	line := UserExportLine{Type: "conversation", User: user.ID, Messages: nonNil(msgs), Facts: nonNil(facts)}
	out := conversationOf(key.ID, conv)
	line.Conversation = &out
	if sum, err := s.mem.Summary(ctx, key); err == nil {
		line.Summary = &sum
	} else if !errors.Is(err, chatmem.ErrNotFound) {
		return UserExportLine{}, err
	}
	return line, nil
}

func (s *Server) exportFailed(ctx context.Context, user chatmem.Key, err error) {
	s.log.ErrorContext(ctx, "user export ended early", "user", user.String(), "err", err)
}

// proxyUser checks the chat proxy's X-Chatmem-User header before the
// upstream call: a malformed user is 400, and a conversation that exists
// and is not that user's is 409, so that no reply is produced that could
// not be stored. It returns the user (empty without the header).
func (s *Server) proxyUser(ctx context.Context, key chatmem.Key, user string) (string, error) {
	if user == "" {
		return "", nil
	}
	if err := chatmem.ValidateUser(user); err != nil {
		return "", fmt.Errorf("header %s: %w", headerUser, err)
	}
	conv, err := s.mem.Conversation(ctx, key)
	switch {
	case errors.Is(err, chatmem.ErrNotFound):
		return user, nil
	case err != nil:
		return "", err
	case conv.User != user:
		return "", fmt.Errorf("%w: conversation %s does not belong to user %q", chatmem.ErrConflict, key.ID, user)
	}
	return user, nil
}

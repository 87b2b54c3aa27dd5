package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"

	"github.com/chatmem/chatmem"
)

// The search routes: POST /v1/conversations/{id}/search and POST
// /v1/users/{user}/search find the stored messages that hold a query's
// words, with the ranking MCP's search_memory and chatmem.Memory.Search
// use. They are POST, not GET, so that a query of any length (and text a
// URL would need to escape) travels in the body; they change nothing.

// readSearch reads and checks a search body; userRoute refuses a scope,
// which only the conversation route takes.
func (s *Server) readSearch(c *call, userRoute bool) (SearchRequest, error) {
	body, err := readBody(c.w, c.r, s.limits.MaxBodyBytes)
	if err != nil {
		return SearchRequest{}, err
	}
	var req SearchRequest
	if err := decodeStrict(body, &req); err != nil {
		return SearchRequest{}, err
	}
	if strings.TrimSpace(req.Query) == "" {
		return SearchRequest{}, fmt.Errorf("%w: query is required: the words to look for", chatmem.ErrInvalid)
	}
	if req.Limit == 0 {
		req.Limit = chatmem.DefaultSearchLimit
	}
	if req.Limit < 1 || req.Limit > chatmem.MaxSearchLimit {
		return SearchRequest{}, fmt.Errorf("%w: limit %d is outside 1..%d", chatmem.ErrInvalid, req.Limit, chatmem.MaxSearchLimit)
	}
	switch {
	case userRoute && req.Scope != "" && req.Scope != chatmem.ScopeUser:
		return SearchRequest{}, fmt.Errorf("%w: scope %q: a user's search covers all of the user's conversations; leave scope out", chatmem.ErrInvalid, req.Scope)
	case !userRoute && req.Scope != "" && req.Scope != chatmem.ScopeConversation && req.Scope != chatmem.ScopeUser:
		return SearchRequest{}, fmt.Errorf("%w: scope must be %q or %q, got %q", chatmem.ErrInvalid, chatmem.ScopeConversation, chatmem.ScopeUser, req.Scope)
	}
	return req, nil
}

// searchConversation answers POST /v1/conversations/{id}/search: the
// conversation's messages, or with scope "user" those of every
// conversation of its user (400 when it has none).
func (s *Server) searchConversation(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	req, err := s.readSearch(c, false)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	if req.Scope == chatmem.ScopeUser {
		conv, err := timed(s, "conversation", func() (chatmem.Conversation, error) { return s.mem.Conversation(ctx, key) })
		if err != nil {
			return err
		}
		if conv.User == "" {
			return fmt.Errorf("%w: scope user: conversation %q is bound to no user", chatmem.ErrInvalid, key.ID)
		}
		return s.writeSearch(c, req, key.ID, func() ([]chatmem.Hit, error) {
			return s.mem.SearchUser(ctx, chatmem.Key{Tenant: key.Tenant, ID: conv.User}, req.Query, req.Limit)
		})
	}
	return s.writeSearch(c, req, key.ID, func() ([]chatmem.Hit, error) {
		return s.mem.Search(ctx, key, req.Query, req.Limit)
	})
}

// searchUser answers POST /v1/users/{user}/search: the messages of all of
// the user's conversations at once. An unknown user has no hits.
func (s *Server) searchUser(c *call) error {
	user, err := c.userKey()
	if err != nil {
		return err
	}
	req, err := s.readSearch(c, true)
	if err != nil {
		return err
	}
	return s.writeSearch(c, req, "", func() ([]chatmem.Hit, error) {
		return s.mem.SearchUser(c.r.Context(), user, req.Query, req.Limit)
	})
}

// writeSearch runs the search and answers its hits; conv names the hits
// that carry no conversation of their own (a conversation's search).
func (s *Server) writeSearch(c *call, req SearchRequest, conv string, search func() ([]chatmem.Hit, error)) error {
	hits, err := timed(s, "search", search)
	if err != nil {
		return err
	}
	out := SearchResponse{Query: req.Query, Hits: make([]SearchHit, len(hits))}
	for i, h := range hits {
		m := h.Message
		out.Hits[i] = SearchHit{
			Conversation: cmp.Or(h.Conversation, conv), Seq: m.Seq, Time: m.CreatedAt,
			Role: string(m.Role), Name: m.Name, Text: m.Content, Score: h.Score,
		}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// listUsers answers GET /v1/users?after=&limit=.
func (s *Server) listUsers(c *call) error {
	q, err := query(c.r, "after", "limit")
	if err != nil {
		return err
	}
	after := q.Get("after")
	if after != "" {
		if err := chatmem.ValidateUser(after); err != nil {
			return fmt.Errorf("parameter after: %w", err)
		}
	}
	limit, err := intParam(q, "limit", defaultListLimit, 1, maxPageLimit)
	if err != nil {
		return err
	}
	page, err := timed(s, "users", func() (chatmem.UserPage, error) {
		return s.mem.Users(c.r.Context(), c.tenant, chatmem.PageRequest{After: after, Limit: int(limit)})
	})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, UserList{Users: nonNil(page.Users), Next: page.Next})
	return nil
}

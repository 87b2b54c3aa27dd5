package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/chatmem/chatmem"
)

// userPath returns the path of user, or of its sub-resource.
func userPath(user, sub string) string {
	p := "/v1/users/" + url.PathEscape(user)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// UserConversations returns one page of the user's conversations with IDs
// after after (limit 0: the server's default of 50).
func (c *Client) UserConversations(ctx context.Context, user, after string, limit int) (ConversationPage, error) {
	return c.list(ctx, url.Values{"user": {user}}, after, limit)
}

// Users returns one page of the caller's users (those with a fact or a
// live conversation) with IDs after after, in byte order (limit 0: the
// server's default of 50), as chatmem.Memory.Users does.
func (c *Client) Users(ctx context.Context, after string, limit int) (UserList, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out UserList
	_, err := c.do(ctx, http.MethodGet, "/v1/users", q, nil, nil, &out)
	return out, err
}

// UserFacts returns the user's current facts, ordered by key, as
// chatmem.Memory.UserFacts does.
func (c *Client) UserFacts(ctx context.Context, user string) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodGet, userPath(user, "facts"), nil, nil)
}

// UserFactHistory returns every value the user's facts have had, oldest
// first: with name empty those of every key that has a value now,
// otherwise the named one's (chatmem.ErrNotFound if it never had one), as
// chatmem.Memory.UserFactHistory does.
func (c *Client) UserFactHistory(ctx context.Context, user, name string) ([]chatmem.Fact, error) {
	h, err := c.facts(ctx, http.MethodGet, userPath(user, "facts"), url.Values{"history": {"true"}}, nil)
	return historyOf(h, err, name)
}

// FactHistory returns every value the conversation's facts have had,
// oldest first: with name empty those of every key that has a value now,
// otherwise the named one's (chatmem.ErrNotFound if it never had one), as
// chatmem.Memory.FactHistory does.
func (c *Client) FactHistory(ctx context.Context, id, name string) ([]chatmem.Fact, error) {
	h, err := c.facts(ctx, http.MethodGet, convPath(id, "facts"), url.Values{"history": {"true"}}, nil)
	return historyOf(h, err, name)
}

// historyOf keeps the values of the named fact (all with name empty).
func historyOf(h []chatmem.Fact, err error, name string) ([]chatmem.Fact, error) {
	if err != nil || name == "" {
		return h, err
	}
	var out []chatmem.Fact
	for _, f := range h {
		if f.Key == name {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("chatmem api: %w: fact %q has no value", chatmem.ErrNotFound, name)
	}
	return out, nil
}

// SetUserFacts sets the user's facts, leaving the others as they are,
// and returns the facts after (PATCH /v1/users/{user}/facts), as
// chatmem.Memory.SetUserFacts does.
func (c *Client) SetUserFacts(ctx context.Context, user string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodPatch, userPath(user, "facts"), nil, factsBody(facts))
}

// ReplaceUserFacts makes facts the user's facts (deleting the keys it
// does not name) and returns the facts after (PUT .../facts).
func (c *Client) ReplaceUserFacts(ctx context.Context, user string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodPut, userPath(user, "facts"), nil, factsBody(facts))
}

// PatchUserFacts is SetUserFacts.
//
// Deprecated: use SetUserFacts, the library's name.
func (c *Client) PatchUserFacts(ctx context.Context, user string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.SetUserFacts(ctx, user, facts)
}

// PutUserFacts is ReplaceUserFacts.
//
// Deprecated: use ReplaceUserFacts.
func (c *Client) PutUserFacts(ctx context.Context, user string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.ReplaceUserFacts(ctx, user, facts)
}

// Search returns up to limit of the conversation's messages that hold the
// query's words, best first (limit 0: the server's default of 10), as
// chatmem.Memory.Search does.
func (c *Client) Search(ctx context.Context, id, query string, limit int) (SearchResponse, error) {
	var out SearchResponse
	_, err := c.do(ctx, http.MethodPost, convPath(id, "search"), nil, nil, SearchRequest{Query: query, Limit: limit}, &out)
	return out, err
}

// SearchUser returns up to limit of the messages of all of the user's
// conversations that hold the query's words, best first, each naming its
// conversation, as chatmem.Memory.SearchUser does.
func (c *Client) SearchUser(ctx context.Context, user, query string, limit int) (SearchResponse, error) {
	var out SearchResponse
	_, err := c.do(ctx, http.MethodPost, userPath(user, "search"), nil, nil, SearchRequest{Query: query, Limit: limit}, &out)
	return out, err
}

// DeleteUserFact deletes the user's named fact (chatmem.ErrNotFound if it
// has no value).
func (c *Client) DeleteUserFact(ctx context.Context, user, key string) error {
	_, err := c.do(ctx, http.MethodDelete, userPath(user, "facts"), url.Values{"key": {key}}, nil, nil, nil)
	return err
}

// DeleteUser erases the user and returns how many conversations it
// deleted.
func (c *Client) DeleteUser(ctx context.Context, user string) (int, error) {
	var out DeleteUserResponse
	_, err := c.do(ctx, http.MethodDelete, userPath(user, ""), nil, nil, nil, &out)
	return out.DeletedConversations, err
}

// ExportUserChatmem writes everything held about the user as a chatmem/v1
// file (header included) to w, which Import reads: the user export's
// default format.
func (c *Client) ExportUserChatmem(ctx context.Context, user string, w io.Writer) error {
	return c.streamTo(ctx, http.MethodGet, userPath(user, "export"), nil, nil, w)
}

// ExportUser reads everything held about the user as records, one line
// per conversation (format=records).
func (c *Client) ExportUser(ctx context.Context, user string) ([]UserExportLine, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+userPath(user, "export")+"?format=records", nil)
	if err != nil {
		return nil, fmt.Errorf("chatmem api: %w: %w", chatmem.ErrInvalid, err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("chatmem api: export user %s: %w", user, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("chatmem api: export user %s: status %d", user, resp.StatusCode)
	}
	var out []UserExportLine
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		var line UserExportLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("chatmem api: export user %s: line %d: %w", user, len(out)+1, err)
		}
		out = append(out, line)
	}
	return out, sc.Err()
}

package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

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

// UserFacts returns the user's current facts, ordered by key, or with
// history every value they have had, oldest first.
func (c *Client) UserFacts(ctx context.Context, user string, history bool) ([]chatmem.Fact, error) {
	var q url.Values
	if history {
		q = url.Values{"history": {"true"}}
	}
	return c.facts(ctx, http.MethodGet, userPath(user, "facts"), q, nil)
}

// FactHistory returns every value the conversation's facts have had,
// oldest first.
func (c *Client) FactHistory(ctx context.Context, id string) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodGet, convPath(id, "facts"), url.Values{"history": {"true"}}, nil)
}

// PatchUserFacts sets the user's facts, leaving the others as they are,
// and returns the facts after.
func (c *Client) PatchUserFacts(ctx context.Context, user string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodPatch, userPath(user, "facts"), nil, factsBody(facts))
}

// PutUserFacts makes facts the user's facts and returns the facts after.
func (c *Client) PutUserFacts(ctx context.Context, user string, facts []FactInput) ([]chatmem.Fact, error) {
	return c.facts(ctx, http.MethodPut, userPath(user, "facts"), nil, factsBody(facts))
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
// file (header included) to w, which Import reads.
func (c *Client) ExportUserChatmem(ctx context.Context, user string, w io.Writer) error {
	return c.streamTo(ctx, http.MethodGet, userPath(user, "export"), url.Values{"format": {"chatmem"}}, nil, w)
}

// ExportUser reads everything held about the user, one line per record.
func (c *Client) ExportUser(ctx context.Context, user string) ([]UserExportLine, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+userPath(user, "export"), nil)
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

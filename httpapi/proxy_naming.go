package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/chatmem/chatmem"
)

// What the proxy does with a request that names no conversation
// (Upstream.Unnamed).
const (
	// UnnamedForward sends it to the upstream as it is, without memory,
	// and says so in X-Chatmem-Memory: off.
	UnnamedForward = "forward"
	// UnnamedRefuse answers 400.
	UnnamedRefuse = "refuse"
)

// UnnamedModes are the accepted values of Upstream.Unnamed.
var UnnamedModes = []string{UnnamedForward, UnnamedRefuse}

// queryConversation is the query parameter that names the conversation,
// for clients that can add a query to their base URL but no header.
const queryConversation = "conversation"

// errUnnamed answers a request that names no conversation under
// UnnamedRefuse.
var errUnnamed = fmt.Errorf("%w: the request names no conversation: send X-Chatmem-Conversation, metadata.conversation_id or ?%s=", chatmem.ErrInvalid, queryConversation)

// conversationOf returns the conversation a chat proxy request names, ""
// if none: the X-Chatmem-Conversation header, else the body's
// metadata.conversation_id, else the ?conversation= query parameter, else,
// with Upstream.DeriveConversation, one derived from the request. A name
// that is not a valid ID wraps chatmem.ErrInvalid, naming where it came
// from.
func (s *Server) conversationOf(c *call, req chatRequest) (string, error) {
	id, from := c.r.Header.Get(headerConversation), "header "+headerConversation
	if id == "" {
		var err error
		if id, err = req.conversationID(); err != nil {
			return "", err
		}
		from = "metadata." + metaConversation
	}
	if id == "" {
		id, from = c.r.URL.Query().Get(queryConversation), "query parameter "+queryConversation
	}
	if id == "" && c.up.derive {
		user := c.r.Header.Get(headerUser)
		if user == "" {
			user = req.user
		}
		return derivedID(c.tenant, user, req.messages), nil
	}
	if id == "" {
		return "", nil
	}
	if err := chatmem.ValidateID(id); err != nil {
		return "", fmt.Errorf("%s: %w", from, err)
	}
	return id, nil
}

// derivedID is the conversation of a request that names none, under
// Upstream.DeriveConversation: "d-" and 128 bits of the SHA-256 of the
// tenant, the end user and the content of the request's first user
// message; "" without an end user or a user message. The same chat, sent
// again with its history, lands in the same conversation; a chat whose
// first message differs (another chat, or an edit of the first message)
// in another. Two chats of one user that open with the same message share
// a conversation: derivation suits clients that send the full history,
// where the first message rarely repeats; name the conversation where
// that matters.
func derivedID(tenant, user string, messages json.RawMessage) string {
	if user == "" {
		return ""
	}
	var list []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(messages, &list) != nil {
		return ""
	}
	for _, m := range list {
		if m.Role != string(chatmem.RoleUser) {
			continue
		}
		content := []byte(m.Content)
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			content = []byte(text) // however the client escaped it
		}
		h := sha256.New()
		for _, part := range [][]byte{[]byte(tenant), []byte(user), content} {
			fmt.Fprintf(h, "%d:", len(part))
			h.Write(part)
		}
		return "d-" + hex.EncodeToString(h.Sum(nil)[:16])
	}
	return ""
}

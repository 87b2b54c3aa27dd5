package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
)

// ResourcePrefix starts every conversation's resource URI:
// chatmem://conversations/{id}.
const ResourcePrefix = "chatmem://conversations/"

// resourcePageSize is how many conversations one resources/list page holds.
const resourcePageSize = 100

// ConversationResource is a conversation's resource: its messages as JSON.
type ConversationResource struct {
	ID      string `json:"id"`
	LastSeq int64  `json:"last_seq"`
	Tokens  int64  `json:"tokens"`
	// Messages are the newest messages, at most Options.MaxResourceMessages,
	// oldest first; FirstSeq is the first one's sequence number (1 unless
	// older messages were left out).
	FirstSeq int64     `json:"first_seq"`
	Messages []Message `json:"messages"`
}

// registerResources adds the conversations as resources: a template for
// reading any of them, and a resources/list that pages through the
// tenant's conversations (the SDK lists only resources added one by one,
// so a middleware answers that method from the store).
func (t *tools) registerResources(s *mcp.Server) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "conversation",
		Title:       "A conversation",
		Description: "A stored conversation: its newest messages (up to a limit) as JSON, oldest first, with sequence numbers, tokens and times.",
		MIMEType:    "application/json",
		URITemplate: ResourcePrefix + "{id}",
	}, t.readResource)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if lr, ok := req.(*mcp.ListResourcesRequest); ok && method == "resources/list" {
				return t.listResources(ctx, lr)
			}
			return next(ctx, method, req)
		}
	})
}

func (t *tools) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	var after string
	if req.Params != nil {
		after = req.Params.Cursor
	}
	if after != "" {
		if err := chatmem.ValidateID(after); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: " + err.Error()}
		}
	}
	page, err := t.mem.List(ctx, t.tenant, chatmem.PageRequest{After: after, Limit: resourcePageSize})
	if err != nil {
		return nil, t.toolError(ctx, "resources/list", err)
	}
	out := &mcp.ListResourcesResult{NextCursor: page.Next, Resources: make([]*mcp.Resource, len(page.Conversations))}
	for i, c := range page.Conversations {
		out.Resources[i] = &mcp.Resource{
			URI:         ResourcePrefix + c.Key.ID,
			Name:        c.Key.ID,
			Description: fmt.Sprintf("Conversation %s: %d messages, %d tokens, updated %s.", c.Key.ID, c.LastSeq, c.Tokens+c.SystemTokens, c.UpdatedAt.UTC().Format("2006-01-02 15:04")),
			MIMEType:    "application/json",
		}
	}
	return out, nil
}

func (t *tools) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, ResourcePrefix)
	if !ok || chatmem.ValidateID(id) != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	key := chatmem.Key{Tenant: t.tenant, ID: id}
	conv, err := t.mem.Conversation(ctx, key)
	if errors.Is(err, chatmem.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, t.toolError(ctx, "resources/read", err)
	}
	after := max(conv.LastSeq-int64(t.maxResource), 0)
	msgs, err := t.mem.Messages(ctx, key, after, t.maxResource)
	if errors.Is(err, chatmem.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri) // deleted meanwhile
	}
	if err != nil {
		return nil, t.toolError(ctx, "resources/read", err)
	}
	res := ConversationResource{ID: id, LastSeq: conv.LastSeq, Tokens: conv.Tokens + conv.SystemTokens, FirstSeq: after + 1, Messages: make([]Message, len(msgs))}
	for i, m := range msgs {
		res.Messages[i] = messageOf(m)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

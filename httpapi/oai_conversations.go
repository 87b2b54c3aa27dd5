package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/chatmem/chatmem"
)

// openAIHandler runs an OpenAI-compatible route, answering its errors in
// OpenAI's shape.
func openAIHandler(f func(*Server, *call) error) func(*Server, *call) error {
	return func(s *Server, c *call) error {
		if err := f(s, c); err != nil {
			s.writeOpenAIError(c.w, c.r, err)
		}
		return nil
	}
}

// conversationObject is OpenAI's conversation object.
type conversationObject struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	CreatedAt int64             `json:"created_at"`
	Metadata  map[string]string `json:"metadata"`
}

// itemList is OpenAI's list of items.
type itemList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

func newItemList(items []item, hasMore bool) itemList {
	l := itemList{Object: "list", Data: make([]json.RawMessage, len(items)), HasMore: hasMore}
	for i, it := range items {
		l.Data[i] = it.raw
	}
	if len(items) > 0 {
		l.FirstID, l.LastID = &items[0].id, &items[len(items)-1].id
	}
	return l
}

// checkOpenAIMetadata applies OpenAI's limits on metadata: 16 pairs, keys
// up to 64 characters, values up to 512.
func checkOpenAIMetadata(md map[string]string) error {
	if len(md) > 16 {
		return fmt.Errorf("%w: metadata has %d pairs, over the limit of 16", chatmem.ErrInvalid, len(md))
	}
	for k, v := range md {
		if utf8.RuneCountInString(k) > 64 || k == "" {
			return fmt.Errorf("%w: metadata key %q must be 1 to 64 characters", chatmem.ErrInvalid, k)
		}
		if utf8.RuneCountInString(v) > 512 {
			return fmt.Errorf("%w: metadata value of %q is over 512 characters", chatmem.ErrInvalid, k)
		}
	}
	return nil
}

// metadataMarker is the system message that holds the conversation's
// metadata.
func metadataMarker(md map[string]string) chatmem.Message {
	if md == nil {
		md = map[string]string{}
	}
	b, _ := json.Marshal(md)
	return chatmem.Message{Role: chatmem.RoleSystem, Content: markerContent, Metadata: map[string]string{metaConvMeta: string(b)}}
}

// decodeOpenAIBody reads a JSON request body into v, refusing text that
// decoding would rewrite.
func (s *Server) decodeOpenAIBody(c *call, v any) error {
	_, err := s.readOpenAIBody(c, v)
	return err
}

// readOpenAIBody is decodeOpenAIBody, returning the body too.
func (s *Server) readOpenAIBody(c *call, v any) ([]byte, error) {
	body, err := readBody(c.w, c.r, s.limits.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	if err := chatmem.CheckJSONText(body); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, fmt.Errorf("%w: body: %v", chatmem.ErrInvalid, err)
	}
	return body, nil
}

// itemLimits are the limits stored items are checked against.
func (s *Server) itemLimits() chatmem.Limits {
	return chatmem.Limits{MaxContentBytes: s.limits.MaxContentBytes, MaxBatch: s.limits.MaxMessages}
}

// newOpenAIID returns prefix followed by 24 random bytes in hex.
func newOpenAIID(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// createConversation is POST /openai/v1/conversations: a new chatmem
// conversation with the items (up to 20) and the metadata, in one append.
func (s *Server) createConversation(c *call) error {
	var req struct {
		Items    []json.RawMessage `json:"items"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := s.decodeOpenAIBody(c, &req); err != nil {
		return err
	}
	if len(req.Items) > maxItemsPerRequest {
		return fmt.Errorf("%w: %d items, over the limit of %d per request", chatmem.ErrInvalid, len(req.Items), maxItemsPerRequest)
	}
	if err := checkOpenAIMetadata(req.Metadata); err != nil {
		return err
	}
	msgs, err := itemsToMessages(req.Items, s.itemLimits(), false)
	if err != nil {
		return err
	}
	if len(req.Metadata) > 0 || len(msgs) == 0 {
		msgs = append([]chatmem.Message{metadataMarker(req.Metadata)}, msgs...)
	}
	key := chatmem.Key{Tenant: c.tenant, ID: newOpenAIID("conv_")}
	user := c.r.Header.Get(headerUser)
	if user != "" {
		if err := chatmem.ValidateUser(user); err != nil {
			return fmt.Errorf("header %s: %w", headerUser, err)
		}
	}
	zero := int64(0)
	res, err := s.mem.Append(c.r.Context(), key, msgs, chatmem.AppendOptions{ExpectedLastSeq: &zero, User: user, Started: s.mem.Now()})
	if err != nil {
		return err
	}
	md := req.Metadata
	if md == nil {
		md = map[string]string{}
	}
	writeJSON(c.w, http.StatusOK, conversationObject{ID: key.ID, Object: "conversation", CreatedAt: res.Conversation.CreatedAt.Unix(), Metadata: md})
	return nil
}

// openAIConversation reads the conversation the path names and its
// metadata (the newest marker's; empty if none).
func (s *Server) openAIConversation(ctx context.Context, c *call) (chatmem.Key, chatmem.Conversation, map[string]string, error) {
	key, err := c.key()
	if err != nil {
		return key, chatmem.Conversation{}, nil, fmt.Errorf("%w: conversation %q not found", chatmem.ErrNotFound, c.r.PathValue("id"))
	}
	conv, err := s.mem.Conversation(ctx, key)
	if err != nil {
		if errors.Is(err, chatmem.ErrNotFound) {
			err = fmt.Errorf("%w: conversation %q not found", chatmem.ErrNotFound, key.ID)
		}
		return key, conv, nil, err
	}
	sys, err := s.mem.SystemMessages(ctx, key)
	if err != nil {
		return key, conv, nil, err
	}
	md := map[string]string{}
	for i := len(sys) - 1; i >= 0; i-- {
		if raw, ok := sys[i].Metadata[metaConvMeta]; ok {
			_ = json.Unmarshal([]byte(raw), &md)
			break
		}
	}
	return key, conv, md, nil
}

// getOpenAIConversation is GET /openai/v1/conversations/{id}.
func (s *Server) getOpenAIConversation(c *call) error {
	key, conv, md, err := s.openAIConversation(c.r.Context(), c)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, conversationObject{ID: key.ID, Object: "conversation", CreatedAt: conv.CreatedAt.Unix(), Metadata: md})
	return nil
}

// updateOpenAIConversation is POST /openai/v1/conversations/{id}: the
// metadata is replaced, by appending a marker that holds it.
func (s *Server) updateOpenAIConversation(c *call) error {
	var req struct {
		Metadata *map[string]string `json:"metadata"`
	}
	if err := s.decodeOpenAIBody(c, &req); err != nil {
		return err
	}
	if req.Metadata == nil {
		return fmt.Errorf("%w: metadata is required", chatmem.ErrInvalid)
	}
	if err := checkOpenAIMetadata(*req.Metadata); err != nil {
		return err
	}
	ctx := c.r.Context()
	key, conv, _, err := s.openAIConversation(ctx, c)
	if err != nil {
		return err
	}
	if _, err := s.mem.Append(ctx, key, []chatmem.Message{metadataMarker(*req.Metadata)}, chatmem.AppendOptions{}); err != nil {
		return err
	}
	md := *req.Metadata
	if md == nil {
		md = map[string]string{}
	}
	writeJSON(c.w, http.StatusOK, conversationObject{ID: key.ID, Object: "conversation", CreatedAt: conv.CreatedAt.Unix(), Metadata: md})
	return nil
}

// deleteOpenAIConversation is DELETE /openai/v1/conversations/{id}: the
// chatmem conversation is deleted, items and all.
func (s *Server) deleteOpenAIConversation(c *call) error {
	ctx := c.r.Context()
	key, _, _, err := s.openAIConversation(ctx, c)
	if err != nil {
		return err
	}
	if err := s.mem.Delete(ctx, key); err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{key.ID, "conversation.deleted", true})
	return nil
}

// createConversationItems is POST /openai/v1/conversations/{id}/items:
// up to 20 items, appended in one append.
func (s *Server) createConversationItems(c *call) error {
	var req struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := s.decodeOpenAIBody(c, &req); err != nil {
		return err
	}
	if len(req.Items) == 0 {
		return fmt.Errorf("%w: items is required: 1 to %d items", chatmem.ErrInvalid, maxItemsPerRequest)
	}
	if len(req.Items) > maxItemsPerRequest {
		return fmt.Errorf("%w: %d items, over the limit of %d per request", chatmem.ErrInvalid, len(req.Items), maxItemsPerRequest)
	}
	if err := checkInclude(c); err != nil {
		return err
	}
	msgs, err := itemsToMessages(req.Items, s.itemLimits(), false)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	key, _, _, err := s.openAIConversation(ctx, c)
	if err != nil {
		return err
	}
	res, err := s.mem.Append(ctx, key, msgs, chatmem.AppendOptions{Started: s.mem.Now()})
	if err != nil {
		return err
	}
	var items []item
	for _, m := range res.Messages {
		items = append(items, messageItems(m)...)
	}
	writeJSON(c.w, http.StatusOK, newItemList(items, false))
	return nil
}

// checkInclude accepts OpenAI's include values, which add fields chatmem
// does not keep (logprobs, search results, encrypted reasoning): the items
// come without them.
func checkInclude(c *call) error {
	for _, v := range c.r.URL.Query()["include"] {
		if v == "" {
			return fmt.Errorf("%w: include must not be empty", chatmem.ErrInvalid)
		}
	}
	return nil
}

// pageQuery is the after, limit and order of a list of items.
type pageQuery struct {
	after   int64 // the seq of the item named by after; 0: none
	afterID string
	limit   int
	asc     bool
}

func readPageQuery(c *call) (pageQuery, error) {
	q := c.r.URL.Query()
	p := pageQuery{limit: 20}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return p, fmt.Errorf("%w: limit must be an integer from 1 to 100, got %q", chatmem.ErrInvalid, v)
		}
		p.limit = n
	}
	switch v := q.Get("order"); v {
	case "", "desc":
	case "asc":
		p.asc = true
	default:
		return p, fmt.Errorf("%w: order must be asc or desc, got %q", chatmem.ErrInvalid, v)
	}
	if v := q.Get("after"); v != "" {
		seq, ok := itemSeq(v)
		if !ok {
			return p, fmt.Errorf("%w: after: no item %q", chatmem.ErrInvalid, v)
		}
		p.after, p.afterID = seq, v
	}
	return p, checkInclude(c)
}

// listItems returns one page of the items of messages lo..hi (seqs,
// inclusive) of the conversation, in p's order, reading only the messages
// of the page (a chunk at a time).
func (s *Server) listItems(ctx context.Context, key chatmem.Key, lo, hi int64, p pageQuery) ([]item, bool, error) {
	var out []item
	want := p.limit + 1
	const chunk = 32
	if p.asc {
		from := lo
		skipping := false
		if p.after > 0 {
			from, skipping = max(p.after, lo), true
		}
		for from <= hi && len(out) < want {
			msgs, err := s.mem.Messages(ctx, key, from-1, int(min(chunk, hi-from+1)))
			if err != nil {
				return nil, false, err
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				for _, it := range messageItems(m) {
					if skipping {
						if it.id == p.afterID {
							skipping = false
						}
						continue
					}
					out = append(out, it)
				}
				skipping = false
			}
			from = msgs[len(msgs)-1].Seq + 1
		}
	} else {
		to := hi
		skipping := false
		if p.after > 0 {
			to, skipping = min(p.after, hi), true
		}
		for to >= lo && len(out) < want {
			from := max(lo, to-chunk+1)
			msgs, err := s.mem.Messages(ctx, key, from-1, int(to-from+1))
			if err != nil {
				return nil, false, err
			}
			for i := len(msgs) - 1; i >= 0; i-- {
				its := messageItems(msgs[i])
				for j := len(its) - 1; j >= 0; j-- {
					if skipping {
						if its[j].id == p.afterID {
							skipping = false
						}
						continue
					}
					out = append(out, its[j])
				}
				skipping = false
			}
			to = from - 1
		}
	}
	if len(out) > p.limit {
		return out[:p.limit], true, nil
	}
	return out, false, nil
}

// listConversationItems is GET /openai/v1/conversations/{id}/items.
func (s *Server) listConversationItems(c *call) error {
	p, err := readPageQuery(c)
	if err != nil {
		return err
	}
	ctx := c.r.Context()
	key, conv, _, err := s.openAIConversation(ctx, c)
	if err != nil {
		return err
	}
	items, more, err := s.listItems(ctx, key, 1, conv.LastSeq, p)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, newItemList(items, more))
	return nil
}

// conversationItem finds the item the path names.
func (s *Server) conversationItem(c *call) (chatmem.Key, item, error) {
	ctx := c.r.Context()
	key, conv, _, err := s.openAIConversation(ctx, c)
	if err != nil {
		return key, item{}, err
	}
	id := c.r.PathValue("item")
	notFound := fmt.Errorf("%w: item %q not found in conversation %q", chatmem.ErrNotFound, id, key.ID)
	seq, ok := itemSeq(id)
	if !ok || seq > conv.LastSeq {
		return key, item{}, notFound
	}
	msgs, err := s.mem.Messages(ctx, key, seq-1, 1)
	if err != nil {
		return key, item{}, err
	}
	for _, m := range msgs {
		for _, it := range messageItems(m) {
			if it.id == id {
				return key, it, nil
			}
		}
	}
	return key, item{}, notFound
}

// getConversationItem is GET /openai/v1/conversations/{id}/items/{item}.
func (s *Server) getConversationItem(c *call) error {
	if err := checkInclude(c); err != nil {
		return err
	}
	_, it, err := s.conversationItem(c)
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, it.raw)
	return nil
}

// deleteConversationItem is DELETE /openai/v1/conversations/{id}/items/{item}.
// The last item goes by a rewind of the conversation to the message before
// the one holding it (chatmem.Memory.Rewind, conditional on the last seq
// read here: a concurrent append makes it 409), with everything derived
// from it (summary, facts, index entries, vectors), and the answer is the
// conversation, as OpenAI answers. Any other item is refused with a 400
// that says why (errItemDelete): chatmem's messages are numbered densely
// and summaries, facts and receipts refer to those numbers, so a message
// in the middle cannot go; its text can (redaction). So is an item that
// shares its message with others (an assistant message's text and
// function calls are one message), and the last item when a metadata
// update was stored after it (the rewind would undo the update).
func (s *Server) deleteConversationItem(c *call) error {
	ctx := c.r.Context()
	key, it, err := s.conversationItem(c)
	if err != nil {
		return err
	}
	_, conv, md, err := s.openAIConversation(ctx, c)
	if err != nil {
		return err
	}
	seq, _ := itemSeq(it.id)
	if seq != conv.LastSeq {
		after, err := s.mem.Messages(ctx, key, seq, int(min(conv.LastSeq-seq, 2)))
		if err != nil {
			return err
		}
		if len(after) > 0 && hidden(after[0]) {
			return fmt.Errorf("%w: deleting item %q is not supported: the conversation's metadata was updated after it, and removing the item would undo that update", chatmem.ErrInvalid, it.id)
		}
		return errItemDelete(key.ID, it.id, seq)
	}
	msgs, err := s.mem.Messages(ctx, key, seq-1, 1)
	if err != nil {
		return err
	}
	if len(msgs) != 1 {
		return fmt.Errorf("%w: item %q changed while it was deleted", chatmem.ErrConflict, it.id)
	}
	if items := messageItems(msgs[0]); len(items) != 1 {
		ids := make([]string, len(items))
		for i, o := range items {
			ids[i] = o.id
		}
		return fmt.Errorf("%w: deleting item %q alone is not supported: it is stored in one message with the items %s, which can only be deleted together (delete them from the last one back, or redact the message: POST /v1/conversations/%s/messages/%d/redact)", chatmem.ErrInvalid, it.id, strings.Join(ids, ", "), key.ID, seq)
	}
	last := conv.LastSeq
	if _, err := s.mem.Rewind(ctx, key, seq-1, chatmem.RewindOptions{ExpectedLastSeq: &last}); err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, conversationObject{ID: key.ID, Object: "conversation", CreatedAt: conv.CreatedAt.Unix(), Metadata: md})
	return nil
}

// errItemDelete is the refusal of the deletion of an item that is not the
// last one.
func errItemDelete(conv, item string, seq int64) error {
	return fmt.Errorf("%w: deleting item %q is not supported: only the last item of a conversation can be deleted "+
		"(chatmem numbers a conversation's messages densely, and its summaries and facts refer to those numbers); "+
		"delete the items after it first, or remove its text with POST /v1/conversations/%s/messages/%d/redact", chatmem.ErrInvalid, item, conv, seq)
}

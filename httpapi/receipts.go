package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/chatmem/chatmem"
)

// proxyReceipt completes the receipt of window w for a proxied turn: the
// runs actually sent (without the skipped messages stored after the
// turn's own, past upto), and the request's frame: body, the upstream's
// body, without the messages array (at..at+n), and the digest of the
// request's own system messages, which went first in the array and are
// not stored.
func proxyReceipt(w chatmem.Window, upto int64, skipped int, system []systemMessage, body []byte, at, n int) *chatmem.Receipt {
	r := *w.Receipt
	if skipped > 0 {
		sent := make([]chatmem.Message, 0, len(w.Messages)-skipped)
		for _, m := range w.Messages {
			if m.Seq <= upto {
				sent = append(sent, m)
			}
		}
		r.Sent = chatmem.SentSpans(sent, 0)
		r.LeftOut += skipped
	}
	frame := make([]byte, 0, len(body)-n)
	frame = append(append(frame, body[:at]...), body[at+n:]...)
	r.Request = &chatmem.RequestFrame{Body: string(frame), At: at, System: len(system)}
	if len(system) > 0 {
		r.Request.SystemHash = systemHash(system)
	}
	return &r
}

// systemHash is the digest of a request's system messages as sent: their
// JSON, in order, comma-separated.
func systemHash(system []systemMessage) string {
	h := sha256.New()
	for i, m := range system {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(m.raw)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// upstream records on the turn's receipt what the upstream reported of
// its reply: the model, the usage and the IDs, and how long the reply
// took since the request went out.
func (t *turn) upstream(model, id string, u *usage) {
	if t == nil || t.receipt == nil {
		return
	}
	// One ID is kept: the request's (X-Request-Id, what the provider's
	// support asks for), else the response's.
	up := &chatmem.UpstreamUse{Model: model, RequestID: t.requestID, ChatmemTokens: t.tokens,
		LatencyMillis: time.Since(t.sent).Milliseconds()}
	if up.RequestID == "" {
		up.ResponseID = id
	}
	if u != nil {
		up.InputTokens, up.OutputTokens = int(u.PromptTokens), int(u.CompletionTokens)
		if d := u.PromptTokensDetails; d != nil {
			up.CachedTokens = int(d.CachedTokens)
		}
		if d := u.CompletionTokensDetails; d != nil {
			up.ReasoningTokens = int(d.ReasoningTokens)
		}
	}
	t.receipt.Upstream = up
}

// listReceipts answers GET /v1/conversations/{id}/receipts: the receipts
// kept with the conversation's replies, oldest first, a page at a time
// (after, limit), as the messages are listed.
func (s *Server) listReceipts(c *call) error {
	rs, next, err := seqPage(s, c, "receipts", s.mem.Receipts, func(r chatmem.ReceiptRecord) int64 { return r.Seq })
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, ReceiptsPage{Receipts: rs, NextAfter: next})
	return nil
}

// getReceipt answers GET /v1/conversations/{id}/messages/{seq}/receipt.
func (s *Server) getReceipt(c *call) error {
	key, err := c.key()
	if err != nil {
		return err
	}
	seq, err := strconv.ParseInt(c.r.PathValue("seq"), 10, 64)
	if err != nil || seq < 1 {
		return fmt.Errorf("%w: seq must be a positive integer, got %q", chatmem.ErrInvalid, c.r.PathValue("seq"))
	}
	r, err := timed(s, "receipts", func() (chatmem.Receipt, error) {
		return s.mem.Receipt(c.r.Context(), key, seq)
	})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, r)
	return nil
}

// ReplayRequest rebuilds, byte for byte, the body the chat proxy sent
// upstream for the reply stored at seq in key's conversation, from the
// receipt kept with it and the messages the store holds (see
// chatmem.Memory.Rebuild, whose *RebuildError names what is missing or
// changed). The request's own system messages were sent but not stored:
// system gives them (each message's JSON as the request had it), and
// they must match the digest the receipt kept; a request that had none
// needs none. A Responses turn's instructions, kept with the response,
// are taken from it when system is empty. It wraps chatmem.ErrNotFound for a conversation or receipt
// that does not exist, and chatmem.ErrInvalid for a receipt that is not a
// proxied request's or system messages that are not those sent.
func ReplayRequest(ctx context.Context, mem *chatmem.Memory, key chatmem.Key, seq int64, system []json.RawMessage) ([]byte, error) {
	r, err := mem.Receipt(ctx, key, seq)
	if err != nil {
		return nil, err
	}
	f := r.Request
	if f == nil || f.At < 0 || f.At > len(f.Body) {
		return nil, fmt.Errorf("%w: the receipt of message %d keeps no request (not a proxied reply, or its request's fields were over the receipt's 1 MiB)", chatmem.ErrInvalid, seq)
	}
	if len(system) == 0 && f.System > 0 {
		// A Responses turn's system message is its instructions, kept
		// with the response.
		if system, err = responseInstructions(ctx, mem, key, seq); err != nil {
			return nil, err
		}
	}
	sys := make([]systemMessage, len(system))
	for i, raw := range system {
		sys[i] = systemMessage{raw: raw}
	}
	switch {
	case len(system) != f.System:
		return nil, fmt.Errorf("%w: the request had %d system messages of its own, which are not stored; %d were given (their digest is %s)",
			chatmem.ErrInvalid, f.System, len(system), f.SystemHash)
	case f.System > 0 && systemHash(sys) != f.SystemHash:
		return nil, fmt.Errorf("%w: the system messages given are not those the request had (digest %s, want %s)",
			chatmem.ErrInvalid, systemHash(sys), f.SystemHash)
	}
	msgs, err := mem.Rebuild(ctx, key, r)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(f.Body) + 64*len(msgs))
	b.WriteString(f.Body[:f.At])
	arr := []byte{'['}
	for _, m := range sys {
		if len(arr) > 1 {
			arr = append(arr, ',')
		}
		arr = append(arr, m.raw...)
	}
	for _, m := range msgs {
		if len(arr) > 1 {
			arr = append(arr, ',')
		}
		if arr, err = appendOpenAIMessage(arr, m); err != nil {
			return nil, err
		}
	}
	b.Write(append(arr, ']'))
	b.WriteString(f.Body[f.At:])
	return b.Bytes(), nil
}

// withoutPromptTokens returns md without the prompt-token keys
// (MetaPromptTokensUpstream, MetaPromptTokensChatmem), which a reply
// stored with its receipt does not repeat; nil if nothing else is left.
func withoutPromptTokens(md map[string]string) map[string]string {
	n := len(md)
	for _, k := range []string{MetaPromptTokensUpstream, MetaPromptTokensChatmem} {
		if _, ok := md[k]; ok {
			n--
		}
	}
	switch n {
	case len(md):
		return md
	case 0:
		return nil
	}
	out := make(map[string]string, n)
	for k, v := range md {
		if k != MetaPromptTokensUpstream && k != MetaPromptTokensChatmem {
			out[k] = v
		}
	}
	return out
}

// withPromptTokens sets, on each assistant message of msgs (a page of
// one conversation's messages, oldest first) stored with a receipt, the
// prompt-token metadata keys the receipt holds (its upstream's
// input_tokens and chatmem_tokens), as replies stored before receipts
// carried them: the proxy keeps them once, in the receipt. The messages'
// metadata maps are replaced, not modified.
func (s *Server) withPromptTokens(ctx context.Context, key chatmem.Key, msgs []chatmem.Message) {
	first := -1
	for i, m := range msgs {
		if m.Role == chatmem.RoleAssistant && m.Metadata[MetaPromptTokensChatmem] == "" {
			first = i
			break
		}
	}
	if first < 0 {
		return
	}
	from, to := msgs[first].Seq, msgs[len(msgs)-1].Seq
	rs, err := s.mem.Receipts(ctx, key, from-1, int(min(to-from+1, 10000)))
	if err != nil {
		if !errors.Is(err, chatmem.ErrInvalid) { // ErrInvalid: a store that keeps no receipts
			// The page is answered without the keys: they are a
			// convenience, and the receipts say why they are missing.
			s.log.LogAttrs(ctx, slog.LevelWarn, "prompt tokens not read from the receipts",
				slog.String("conversation", key.ID), slog.String("error", err.Error()))
		}
		return
	}
	at := make(map[int64]*chatmem.UpstreamUse, len(rs))
	for _, r := range rs {
		if up := r.Receipt.Upstream; up != nil && up.InputTokens > 0 {
			at[r.Seq] = up
		}
	}
	for i := first; i < len(msgs); i++ {
		m := &msgs[i]
		up, ok := at[m.Seq]
		if !ok || m.Role != chatmem.RoleAssistant || m.Metadata[MetaPromptTokensChatmem] != "" {
			continue
		}
		md := make(map[string]string, len(m.Metadata)+2)
		for k, v := range m.Metadata {
			md[k] = v
		}
		md[MetaPromptTokensUpstream] = strconv.Itoa(up.InputTokens)
		md[MetaPromptTokensChatmem] = strconv.Itoa(up.ChatmemTokens)
		m.Metadata = md
	}
}

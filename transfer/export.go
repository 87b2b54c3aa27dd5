package transfer

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/chatmem/chatmem"
)

// pageSize is how many messages one read of a conversation takes, and how
// many conversations one page of a listing holds: what an export keeps in
// memory at once.
const pageSize = 1000

// WriteHeader writes the header line {"format":"chatmem/v1"}.
func WriteHeader(w io.Writer) error {
	_, err := io.WriteString(w, `{"format":"`+Format+`"}`+"\n")
	return err
}

// WriteConversation writes the conversation at key as records (no header):
// its conversation record, its messages oldest first, its summary and its
// facts with their history. It reads the summary and the facts before the
// conversation, and the messages up to the LastSeq it read, so that what it
// writes is consistent while appends go on: no summary or fact refers to a
// message past the conversation's record. It returns the number of
// messages written, and chatmem.ErrNotFound for a conversation that does
// not exist. Its memory follows one page of messages, not the
// conversation's length.
func WriteConversation(ctx context.Context, st chatmem.Store, key chatmem.Key, w io.Writer) (int64, error) {
	var sum *chatmem.Summary
	if ss, ok := st.(chatmem.SummaryStore); ok {
		s, err := ss.Summary(ctx, key)
		switch {
		case err == nil:
			sum = &s
		case !errors.Is(err, chatmem.ErrNotFound):
			return 0, fmt.Errorf("summary of %s: %w", key, err)
		}
	}
	facts, err := factHistory(ctx, st, key)
	if err != nil {
		return 0, err
	}
	conv, err := st.Conversation(ctx, key)
	if err != nil {
		return 0, err
	}
	if err := writeJSONLine(w, conversationRecord(conv)); err != nil {
		return 0, err
	}
	var n int64
	for n < conv.LastSeq {
		msgs, err := st.Range(ctx, key, n, min(pageSize, int(conv.LastSeq-n)))
		if err != nil {
			return n, fmt.Errorf("messages of %s after %d: %w", key, n, err)
		}
		if len(msgs) == 0 {
			return n, fmt.Errorf("messages of %s after %d: none, though its last seq is %d", key, n, conv.LastSeq)
		}
		receipts, err := receiptsOf(ctx, st, key, msgs)
		if err != nil {
			return n, err
		}
		for _, m := range msgs {
			if m.Seq != n+1 {
				return n, fmt.Errorf("messages of %s: seq %d follows %d", key, m.Seq, n)
			}
			line, err := messageLine(m, receipts[m.Seq])
			if err != nil {
				return n, err
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return n, err
			}
			n++
		}
	}
	if sum != nil && sum.CoversSeq <= conv.LastSeq {
		if err := writeJSONLine(w, summaryRecord(*sum)); err != nil {
			return n, err
		}
	}
	for _, f := range facts {
		if err := writeJSONLine(w, factRecord(f)); err != nil {
			return n, err
		}
	}
	return n, nil
}

// factHistory returns every value of every current fact of the
// conversation, ordered by key and, within a key, oldest first. A store
// without facts has none.
func factHistory(ctx context.Context, st chatmem.Store, key chatmem.Key) ([]chatmem.Fact, error) {
	fs, ok := st.(chatmem.FactStore)
	if !ok {
		return nil, nil
	}
	current, err := fs.Facts(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("facts of %s: %w", key, err)
	}
	var all []chatmem.Fact
	for _, f := range current {
		h, err := fs.FactHistory(ctx, key, f.Key)
		if err != nil {
			return nil, fmt.Errorf("history of fact %q of %s: %w", f.Key, key, err)
		}
		all = append(all, h...)
	}
	return all, nil
}

// readUser returns the user's record as the store holds it: every value
// of every current user fact, by key, oldest first. ok is false when the
// user has no facts, or the store keeps no users.
func readUser(ctx context.Context, st chatmem.Store, user chatmem.Key) (rec UserRecord, ok bool, err error) {
	us, isUS := st.(chatmem.UserStore)
	if !isUS {
		return rec, false, nil
	}
	current, err := us.UserFacts(ctx, user)
	if err != nil {
		return rec, false, fmt.Errorf("facts of user %s: %w", user, err)
	}
	rec = UserRecord{Type: TypeUser, ID: user.ID, Facts: []UserFactRecord{}}
	for _, f := range current {
		h, err := us.UserFactHistory(ctx, user, f.Key)
		if err != nil {
			return rec, false, fmt.Errorf("history of fact %q of user %s: %w", f.Key, user, err)
		}
		for _, v := range h {
			rec.Facts = append(rec.Facts, userFactRecord(v))
		}
	}
	return rec, len(rec.Facts) > 0, nil
}

// writeUserBefore writes the record of conv's user, if it has one with
// facts and conv is the first of the user's live conversations by ID: so
// each user's record is written once in a tenant's export, and once
// across the pages of one.
func writeUserBefore(ctx context.Context, st chatmem.Store, conv chatmem.Conversation, w io.Writer) error {
	us, ok := st.(chatmem.UserStore)
	if conv.User == "" || !ok {
		return nil
	}
	user := chatmem.Key{Tenant: conv.Key.Tenant, ID: conv.User}
	first, err := us.UserConversations(ctx, user, chatmem.PageRequest{Limit: 1})
	if err != nil {
		return fmt.Errorf("conversations of user %s: %w", user, err)
	}
	if len(first.Conversations) == 0 || first.Conversations[0].Key.ID != conv.Key.ID {
		return nil
	}
	rec, ok, err := readUser(ctx, st, user)
	if err != nil || !ok {
		return err
	}
	return writeJSONLine(w, rec)
}

// writeUser writes the user's record, if the user has facts.
func writeUser(ctx context.Context, st chatmem.Store, user chatmem.Key, w io.Writer) error {
	rec, ok, err := readUser(ctx, st, user)
	if err != nil || !ok {
		return err
	}
	return writeJSONLine(w, rec)
}

// WriteUsersWithoutConversations writes the record of each of the tenant's
// users that has facts and no live conversation, ordered by user ID: the
// users that writing each user's record with the user's first
// conversation does not reach. Export ends with them, and so does the
// last page of GET /v1/export. A store that does not list its users
// (chatmem.UserLister) has none to add. progress, if set, is called after
// each page of users.
func WriteUsersWithoutConversations(ctx context.Context, st chatmem.Store, tenant string, w io.Writer, progress func()) error {
	if err := chatmem.ValidateID(tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if _, ok := st.(chatmem.UserStore); !ok {
		return nil
	}
	n := 0
	return eachUser(ctx, st, tenant, func(user chatmem.Key) error {
		if n++; progress != nil && n%pageSize == 0 {
			progress()
		}
		return writeLoneUser(ctx, st, user, w)
	})
}

// writeLoneUser writes the user's record if the user has facts and no
// live conversation.
func writeLoneUser(ctx context.Context, st chatmem.Store, user chatmem.Key, w io.Writer) error {
	us, ok := st.(chatmem.UserStore)
	if !ok {
		return nil
	}
	first, err := us.UserConversations(ctx, user, chatmem.PageRequest{Limit: 1})
	if err != nil {
		return fmt.Errorf("conversations of user %s: %w", user, err)
	}
	if len(first.Conversations) > 0 {
		return nil
	}
	return writeUser(ctx, st, user, w)
}

// eachUser calls f for each of the tenant's users, ordered by ID, one page
// at a time, if the store lists its users (chatmem.UserLister).
func eachUser(ctx context.Context, st chatmem.Store, tenant string, f func(chatmem.Key) error) error {
	ul, ok := st.(chatmem.UserLister)
	if !ok {
		return nil
	}
	after := ""
	for {
		page, err := ul.Users(ctx, tenant, chatmem.PageRequest{After: after, Limit: pageSize})
		if err != nil {
			return fmt.Errorf("list users of %s: %w", tenant, err)
		}
		for _, id := range page.Users {
			if err := f(chatmem.Key{Tenant: tenant, ID: id}); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		after = page.Next
	}
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := marshalLine(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Digest returns the SHA-256, in hex, of the conversation's records as
// WriteConversation writes them: two stores hold the same conversation
// exactly when their digests are equal.
func Digest(ctx context.Context, st chatmem.Store, key chatmem.Key) (string, error) {
	h := sha256.New()
	bw := bufio.NewWriter(h)
	if _, err := WriteConversation(ctx, st, key, bw); err != nil {
		return "", err
	}
	if err := bw.Flush(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ExportOptions select what Export writes.
type ExportOptions struct {
	// IDs, if set, are the conversations to export, in this order;
	// otherwise every conversation of the tenant, ordered by ID.
	IDs []string
	// Progress, if set, is called after each conversation with the
	// conversations and messages written so far.
	Progress func(conversations, messages int64)
}

// Export writes the header and the tenant's conversations (or those of
// opts.IDs) to w, each user's record before the first of the user's live
// conversations (by ID; an export that leaves that conversation out leaves
// the user's record out). An export of the whole tenant then writes the
// records of the users with facts and no live conversation
// (WriteUsersWithoutConversations), so it misses no user of a store that
// lists its users (chatmem.UserLister). A conversation that disappears
// while the export runs is left out; one of opts.IDs that does not exist
// is chatmem.ErrNotFound.
func Export(ctx context.Context, st chatmem.Store, tenant string, w io.Writer, opts ExportOptions) error {
	if err := chatmem.ValidateID(tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if err := WriteHeader(w); err != nil {
		return err
	}
	var convs, msgs int64
	one := func(conv chatmem.Conversation, listed bool) error {
		if err := writeUserBefore(ctx, st, conv, w); err != nil {
			return err
		}
		n, err := WriteConversation(ctx, st, conv.Key, w)
		if listed && errors.Is(err, chatmem.ErrNotFound) && n == 0 {
			return nil // deleted since it was listed
		}
		if err != nil {
			return err
		}
		convs++
		msgs += n
		if opts.Progress != nil {
			opts.Progress(convs, msgs)
		}
		return nil
	}
	if opts.IDs != nil {
		for _, id := range opts.IDs {
			conv, err := st.Conversation(ctx, chatmem.Key{Tenant: tenant, ID: id})
			if err != nil {
				return err
			}
			if err := one(conv, false); err != nil {
				return err
			}
		}
		return nil
	}
	if err := eachConversation(ctx, st, tenant, func(c chatmem.Conversation) error { return one(c, true) }); err != nil {
		return err
	}
	return WriteUsersWithoutConversations(ctx, st, tenant, w, nil)
}

// eachConversation calls f for each of the tenant's conversations, ordered
// by ID, one page at a time.
func eachConversation(ctx context.Context, st chatmem.Store, tenant string, f func(chatmem.Conversation) error) error {
	after := ""
	for {
		page, err := st.List(ctx, tenant, chatmem.PageRequest{After: after, Limit: pageSize})
		if err != nil {
			return fmt.Errorf("list conversations of %s: %w", tenant, err)
		}
		for _, c := range page.Conversations {
			if err := f(c); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		after = page.Next
	}
}

// ExportUser writes the header, the user's record (if the user has facts)
// and each of the user's live conversations, ordered by ID: a person's
// data as a chatmem/v1 file, which Import reads like any other (into
// the same tenant, or another). A conversation deleted while the export
// runs is left out; a store that keeps no users has nothing to write
// after the header.
func ExportUser(ctx context.Context, st chatmem.Store, user chatmem.Key, w io.Writer) error {
	if err := chatmem.ValidateID(user.Tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if err := chatmem.ValidateUser(user.ID); err != nil {
		return fmt.Errorf("user: %w", err)
	}
	if err := WriteHeader(w); err != nil {
		return err
	}
	us, ok := st.(chatmem.UserStore)
	if !ok {
		return nil
	}
	if err := writeUser(ctx, st, user, w); err != nil {
		return err
	}
	page := chatmem.PageRequest{Limit: pageSize}
	for {
		p, err := us.UserConversations(ctx, user, page)
		if err != nil {
			return fmt.Errorf("conversations of user %s: %w", user, err)
		}
		for _, c := range p.Conversations {
			n, err := WriteConversation(ctx, st, c.Key, w)
			if errors.Is(err, chatmem.ErrNotFound) && n == 0 {
				continue // deleted since it was listed
			}
			if err != nil {
				return err
			}
		}
		if p.Next == "" {
			return nil
		}
		page.After = p.Next
	}
}

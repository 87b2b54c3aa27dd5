package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// Times are stored as Unix nanoseconds; these bound what fits in an int64.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// clampedNanos returns t in Unix nanoseconds, clamped to what an int64
// holds: right for comparisons with stored times, which all fit.
func clampedNanos(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// checkTime wraps chatmem.ErrInvalid for a time that cannot be stored.
func checkTime(what string, t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return fmt.Errorf("%w: %s %s is outside the years 1678 to 2262", chatmem.ErrInvalid, what, t)
	}
	return nil
}

func scanConversation(sc scanner) (chatmem.Conversation, error) {
	var r conversationRow
	if err := sc.Scan(r.dest()...); err != nil {
		return chatmem.Conversation{}, err
	}
	return r.conversation(), nil
}

// conversationRow holds the scan targets of conversationCols.
type conversationRow struct {
	c                chatmem.Conversation
	created, updated int64
	expires          sql.NullInt64
	user             sql.NullString
}

// dest returns the scan targets of conversationCols, in their order.
func (r *conversationRow) dest() []any {
	return []any{&r.c.Key.Tenant, &r.c.Key.ID, &r.c.Tokenizer, &r.c.LastSeq, &r.c.Tokens, &r.c.SystemTokens, &r.c.Turns,
		&r.created, &r.updated, &r.expires, &r.user, &r.c.Revision}
}

// conversation returns the conversation scanned into r, with its times.
func (r *conversationRow) conversation() chatmem.Conversation {
	c := r.c
	c.CreatedAt, c.UpdatedAt = fromNanos(r.created), fromNanos(r.updated)
	c.User = r.user.String
	if r.expires.Valid {
		c.ExpiresAt = fromNanos(r.expires.Int64)
	}
	return c
}

func notFound(key chatmem.Key) error {
	return fmt.Errorf("conversation %s: %w", key, chatmem.ErrNotFound)
}

// liveConversation reads the conversation row in t. It returns
// chatmem.ErrNotFound for a conversation that does not exist or expired by
// now.
func liveConversation(t tx, key chatmem.Key, now time.Time) (chatmem.Conversation, error) {
	c, err := scanConversation(t.row(selectLiveConversation, key.Tenant, key.ID, clampedNanos(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return chatmem.Conversation{}, notFound(key)
	}
	return c, err
}

// Conversation returns the conversation's metadata. It returns
// chatmem.ErrNotFound for a conversation that does not exist or has
// expired.
func (s *Store) Conversation(ctx context.Context, key chatmem.Key) (chatmem.Conversation, error) {
	if err := key.Validate(); err != nil {
		return chatmem.Conversation{}, err
	}
	c, err := scanConversation(s.r.row(ctx, selectLiveConversation, key.Tenant, key.ID, clampedNanos(s.now())))
	if errors.Is(err, sql.ErrNoRows) {
		return chatmem.Conversation{}, notFound(key)
	}
	return c, translate(ctx, err)
}

// List returns the tenant's live conversations ordered by ID (byte order),
// one page at a time (storekit.PageLimit). An unknown tenant has an empty
// list.
func (s *Store) List(ctx context.Context, tenant string, page chatmem.PageRequest) (chatmem.Page, error) {
	if err := storekit.CheckTenant(tenant); err != nil {
		return chatmem.Page{}, err
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.Page{}, err
	}
	// One row more than the page tells whether another page follows.
	rows, err := s.r.query(ctx, selectPage, tenant, page.After, clampedNanos(s.now()), limit+1)
	if err != nil {
		return chatmem.Page{}, translate(ctx, err)
	}
	defer rows.Close()
	p := chatmem.Page{Conversations: make([]chatmem.Conversation, 0, min(limit+1, 64))}
	for rows.Next() {
		c, err := scanConversation(rows)
		if err != nil {
			return chatmem.Page{}, translate(ctx, err)
		}
		p.Conversations = append(p.Conversations, c)
	}
	if err := rows.Err(); err != nil {
		return chatmem.Page{}, translate(ctx, err)
	}
	if len(p.Conversations) > limit {
		p.Conversations = p.Conversations[:limit]
		p.Next = p.Conversations[limit-1].Key.ID
	}
	return p, nil
}

// Delete removes the conversation with its messages, idempotency keys,
// summary and facts (by ON DELETE CASCADE). It returns chatmem.ErrNotFound
// for a conversation that does not exist or has expired (an expired one is
// left to Sweep).
func (s *Store) Delete(ctx context.Context, key chatmem.Key) error {
	if err := key.Validate(); err != nil {
		return err
	}
	now := s.now()
	return s.write(ctx, func(t tx) error {
		res, err := t.exec(deleteLiveConversation, key.Tenant, key.ID, clampedNanos(now))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return notFound(key)
		}
		return nil
	})
}

// Append stores msgs at the end of the conversation in one IMMEDIATE
// transaction, creating the conversation if it does not exist (or has
// expired: the expired one is deleted first). It checks, in this order, the
// idempotency key (a match returns the original messages with Replayed set
// and writes nothing; one applied with another fingerprint is
// chatmem.ErrIdempotencyKeyReused), then AppendOptions.ExpectedLastSeq,
// ExpectedRevision and ExpectedTokenizer (a mismatch returns chatmem.ErrConflict). Sequence numbers continue densely from the
// conversation's last one. It wraps chatmem.ErrInvalid for a bad key, an
// empty batch, an unknown role, a negative token count, a created_at
// outside chatmem.MinTime..MaxTime or an append time outside 1678..2262.
// Nothing is written when it returns an error.
func (s *Store) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	return s.appendTail(ctx, key, msgs, opts, nil)
}

// AppendTail is Append, followed in its transaction by reads of the
// conversation as the append left it: its system messages (System's
// statement) and Tail(q) (tailMessages, as Tail reads it); see
// chatmem.TailAppender. The reads run in the committer's group, after the
// append's statements, so they see every write committed or grouped
// before it and none after it, and are answered after the COMMIT like the
// append. A replay reads nothing and returns an empty TailRead. A q with
// neither Tokens nor Turns positive wraps chatmem.ErrInvalid, before
// anything is written.
func (s *Store) AppendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead, error) {
	if err := q.CheckSelects(); err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, err
	}
	tail := &tailRead{q: q}
	res, err := s.appendTail(ctx, key, msgs, opts, tail)
	if err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, err
	}
	return res, tail.read, nil
}

// tailRead is what AppendTail asks its append's write to read (q), and
// what it read.
type tailRead struct {
	q    chatmem.TailQuery
	read chatmem.TailRead
}

// appendTail is Append, and AppendTail when tail is set.
func (s *Store) appendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, tail *tailRead) (chatmem.AppendResult, error) {
	if err := storekit.CheckAppend(key, msgs, opts); err != nil {
		return chatmem.AppendResult{}, err
	}
	now := opts.Now
	if now.IsZero() {
		now = s.now()
	}
	if err := checkTime("append time", now); err != nil {
		return chatmem.AppendResult{}, err
	}
	var expires time.Time
	if opts.TTL > 0 {
		expires = now.Add(opts.TTL)
		if err := checkTime("expiry", expires); err != nil {
			return chatmem.AppendResult{}, err
		}
	}
	// Everything that can be refused is refused before the transaction.
	out := make([]chatmem.Message, len(msgs))
	rows := make([]messageRow, len(msgs))
	terms := make([][]string, len(msgs)) // the index's, computed outside the write lock
	for i, m := range msgs {
		m = m.Clone()
		if err := storekit.CheckMessage(m); err != nil {
			return chatmem.AppendResult{}, fmt.Errorf("message %d: %w", i, err)
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		if err := checkTime(fmt.Sprintf("message %d created_at", i), m.CreatedAt); err != nil {
			return chatmem.AppendResult{}, err
		}
		var err error
		if rows[i], err = encode(m); err != nil {
			return chatmem.AppendResult{}, fmt.Errorf("message %d: %w", i, err)
		}
		out[i] = m
		terms[i] = chatmem.IndexTerms(m)
	}

	if opts.Started.IsZero() {
		opts.Started = s.now() // the append's own time: only a running erasure fences it
	}
	var res chatmem.AppendResult
	if err := s.writeAppend(ctx, appendWrite(key, opts, now, expires, out, rows, terms, &res, tail)); err != nil {
		return chatmem.AppendResult{}, err
	}
	return res, nil
}

// appendWrite returns Append's write: out (with rows and terms, their
// columns and index terms) at the end of the conversation, its result in
// *res; with tail set (AppendTail), unless the append is a replay, it then
// reads the conversation's system messages and tail into tail.read. The
// write may run more than once (the committer runs a group again when one
// of its appends failed after writing, see runAppends): each run starts
// from what it reads, and sets *res only on success (tail.read at its
// end, left empty by a replay or a failure).
func appendWrite(key chatmem.Key, opts chatmem.AppendOptions, now, expires time.Time, out []chatmem.Message,
	rows []messageRow, terms [][]string, res *chatmem.AppendResult, tail *tailRead) func(tx) error {
	// The key's strings boxed once for the append's statements, not at
	// each.
	var tenant, id any = key.Tenant, key.ID
	return func(t tx) error {
		if tail != nil {
			tail.read = chatmem.TailRead{} // a replay's, and no run's before
		}
		var conv chatmem.Conversation
		var num int64
		var found, advanced bool
		var err error
		if opts.IdempotencyKey == "" {
			// No key to look up first: the row's read, checks and write in
			// one statement, when it passes them.
			if conv, num, advanced, err = advance(t, key, tenant, id, opts, now, expires, out); err != nil {
				return err
			}
			found = advanced
		}
		if !advanced {
			if conv, num, found, err = currentConversation(t, key, tenant, id, now); err != nil {
				return err
			}
		}
		if found && opts.IdempotencyKey != "" {
			var first, count int64
			var fingerprint string
			err := t.row(selectIdempotencyKey, key.Tenant, key.ID, opts.IdempotencyKey).Scan(&first, &count, &fingerprint)
			switch {
			case err == nil:
				if err := chatmem.CheckFingerprint(key, opts, fingerprint); err != nil {
					return err
				}
				orig, err := queryMessages(t, selectRange, key.Tenant, key.ID, first-1, count)
				if err != nil {
					return err
				}
				*res = chatmem.AppendResult{Messages: orig, Conversation: conv, Replayed: true}
				return nil
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		if e := opts.ExpectedLastSeq; e != nil && *e != conv.LastSeq {
			return fmt.Errorf("%w: conversation %s is at seq %d, not the expected %d", chatmem.ErrConflict, key, conv.LastSeq, *e)
		}
		if e := opts.ExpectedRevision; e != nil {
			var rev int64
			if found {
				rev = conv.Revision
			}
			if rev != *e {
				return storekit.RevisionConflict(key, rev, *e)
			}
		}
		if e := opts.ExpectedTokenizer; found && e != "" && conv.Tokenizer != e {
			return fmt.Errorf("%w: conversation %s is kept under tokenizer %q, not the expected %q", chatmem.ErrConflict, key, conv.Tokenizer, e)
		}
		if u := opts.User; found && u != "" && conv.User != u {
			return userConflict(key, conv.User, u)
		}
		if !found && opts.User != "" {
			if err := fence(t, chatmem.Key{Tenant: key.Tenant, ID: opts.User}, opts.Started.UnixNano()); err != nil {
				return err
			}
		}
		if !found {
			conv = chatmem.Conversation{Key: key, Tokenizer: opts.Tokenizer, User: opts.User, CreatedAt: now}
			if err := t.row(nextConversationNum).Scan(&num); err != nil {
				return fmt.Errorf("number the conversation: %w", err)
			}
			if num > maxConversationNum {
				return fmt.Errorf("sqlite: conversation numbers are exhausted (%d)", num)
			}
		}
		if conv.LastSeq+int64(len(out)) > maxIndexedSeq {
			return fmt.Errorf("%w: conversation %s would pass %d messages", chatmem.ErrInvalid, key, int64(maxIndexedSeq))
		}
		first := conv.LastSeq + 1
		for i := range out {
			conv.LastSeq++
			out[i].Seq = conv.LastSeq
			rows[i].tokensBefore = conv.Tokens
			switch out[i].Role {
			case chatmem.RoleSystem:
				conv.SystemTokens += int64(out[i].Tokens)
			case chatmem.RoleUser:
				conv.Turns++
				conv.Tokens += int64(out[i].Tokens)
			default:
				conv.Tokens += int64(out[i].Tokens)
			}
			rows[i].turn = conv.Turns
		}
		conv.UpdatedAt = now
		if !expires.IsZero() {
			conv.ExpiresAt = expires
		}
		// The conversation row first: the messages reference it.
		if !advanced {
			if err := putConversation(t, conv, tenant, id, num, found); err != nil {
				return err
			}
		}
		for i, m := range out {
			r := rows[i]
			var receipt any // NULL
			if i == len(out)-1 && opts.Receipt != nil {
				receipt = opts.Receipt
			}
			if _, err := t.exec(insertMessage, tenant, id, m.Seq, roleArg(m.Role), m.Content, m.Name,
				nullString(r.toolCalls), m.ToolCallID, m.Tokens, r.tokensBefore, r.turn, m.CreatedAt.UnixNano(),
				nullString(r.metadata), receipt); err != nil {
				return fmt.Errorf("insert message %d: %w", m.Seq, err)
			}
		}
		if err := t.index(num, out, terms); err != nil {
			return err
		}
		if conv.User != "" { // the user's index across conversations: usersearch.go
			if err := indexUserMessages(t, key, conv.User, num, out, terms); err != nil {
				return err
			}
		}
		if opts.IdempotencyKey != "" {
			if _, err := t.exec(insertIdempotencyKey, key.Tenant, key.ID, opts.IdempotencyKey, first, len(out), opts.Fingerprint); err != nil {
				return err
			}
		}
		if tail != nil {
			// The reads see this append's rows (and those of its group's
			// writes before it), uncommitted: the transaction's own.
			var read chatmem.TailRead
			if read.System, err = queryMessages(t, selectSystem, key.Tenant, key.ID); err != nil {
				return fmt.Errorf("read the system messages: %w", err)
			}
			if read.Recent, err = tailMessages(t, conv, tail.q); err != nil {
				return fmt.Errorf("read the tail: %w", err)
			}
			tail.read = read
		}
		*res = chatmem.AppendResult{Messages: out, Conversation: conv}
		return nil
	}
}

// currentConversation reads the conversation row for an append, and its
// number. An expired conversation is deleted (with its messages, keys,
// summary and facts) and reported as not found, so that the append starts
// it afresh.
func currentConversation(t tx, key chatmem.Key, tenant, id any, now time.Time) (chatmem.Conversation, int64, bool, error) {
	var r conversationRow
	var num sql.NullInt64
	err := t.row(selectAppendConversation, tenant, id).Scan(&r.c.Tokenizer, &r.c.LastSeq, &r.c.Tokens,
		&r.c.SystemTokens, &r.c.Turns, &r.created, &r.updated, &r.expires, &r.user, &r.c.Revision, &num)
	r.c.Key = key
	c := r.conversation()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return chatmem.Conversation{}, 0, false, nil
	case err != nil:
		return chatmem.Conversation{}, 0, false, err
	case !c.ExpiresAt.IsZero() && !c.ExpiresAt.After(now):
		if err := t.indexFirst(); err != nil {
			return chatmem.Conversation{}, 0, false, err
		}
		if _, err := t.exec(deleteConversation, key.Tenant, key.ID); err != nil {
			return chatmem.Conversation{}, 0, false, err
		}
		return chatmem.Conversation{}, 0, false, nil
	case !num.Valid:
		return chatmem.Conversation{}, 0, false, fmt.Errorf("sqlite: conversation %s has no number", key)
	}
	return c, num.Int64, true, nil
}

// advance runs advanceConversation for an append of out without an
// idempotency key, and returns the conversation as it was before (what
// currentConversation would have read) and its number; ok is false, and
// nothing written, for a conversation it leaves to currentConversation
// (missing, expired, numberless, out of seqs, or failing one of opts'
// conditions, which that way refuses).
func advance(t tx, key chatmem.Key, tenant, id any, opts chatmem.AppendOptions, now, expires time.Time,
	out []chatmem.Message) (c chatmem.Conversation, num int64, ok bool, err error) {
	var tokens, system, turns int64
	for _, m := range out {
		switch m.Role {
		case chatmem.RoleSystem:
			system += int64(m.Tokens)
		case chatmem.RoleUser:
			turns++
			tokens += int64(m.Tokens)
		default:
			tokens += int64(m.Tokens)
		}
	}
	n := int64(len(out))
	var exp any // NULL: the expiry stays
	if !expires.IsZero() {
		exp = expires.UnixNano()
	}
	var wrote bool
	if t.wrote != nil {
		wrote = *t.wrote
	}
	var lastSeq, revision, tokenizer, user any // NULL: no condition
	if e := opts.ExpectedLastSeq; e != nil {
		lastSeq = *e
	}
	if e := opts.ExpectedRevision; e != nil {
		revision = *e
	}
	if e := opts.ExpectedTokenizer; e != "" {
		tokenizer = e
	}
	if u := opts.User; u != "" {
		user = u
	}
	var r conversationRow
	at := any(now.UnixNano())
	err = t.row(advanceConversation, n, tokens, system, turns, at, exp, tenant, id, at, maxIndexedSeq-n,
		lastSeq, revision, tokenizer, user).Scan(
		&r.c.Tokenizer, &r.c.LastSeq, &r.c.Tokens, &r.c.SystemTokens, &r.c.Turns, &r.created, &r.updated, &r.expires,
		&r.user, &r.c.Revision, &num)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if t.wrote != nil {
			*t.wrote = wrote // it matched no row
		}
		return chatmem.Conversation{}, 0, false, nil
	case err != nil:
		return chatmem.Conversation{}, 0, false, err
	}
	r.c.Key = key
	c = r.conversation()
	c.LastSeq -= n
	c.Tokens -= tokens
	c.SystemTokens -= system
	c.Turns -= turns
	return c, num, true, nil
}

// putConversation stores c: its new totals if it exists (found), else the
// new conversation with number num. tenant and id are c's key, boxed.
func putConversation(t tx, c chatmem.Conversation, tenant, id any, num int64, found bool) error {
	var expires any // NULL
	if !c.ExpiresAt.IsZero() {
		expires = c.ExpiresAt.UnixNano()
	}
	if found {
		_, err := t.exec(updateConversation, c.LastSeq, c.Tokens, c.SystemTokens, c.Turns,
			c.UpdatedAt.UnixNano(), expires, tenant, id)
		return err
	}
	var user sql.NullString
	if c.User != "" {
		user = sql.NullString{String: c.User, Valid: true}
	}
	_, err := t.exec(insertConversation, c.Key.Tenant, c.Key.ID, c.Tokenizer, c.LastSeq, c.Tokens, c.SystemTokens,
		c.Turns, c.CreatedAt.UnixNano(), c.UpdatedAt.UnixNano(), expires, user, num)
	return err
}

// roleArgs are the roles boxed once, as the append's statement argument.
var roleArgs = map[chatmem.Role]any{}

func init() {
	for _, r := range []chatmem.Role{chatmem.RoleSystem, chatmem.RoleUser, chatmem.RoleAssistant, chatmem.RoleTool} {
		roleArgs[r] = string(r)
	}
}

// roleArg returns r as a statement argument, without boxing a known role
// again.
func roleArg(r chatmem.Role) any {
	if a, ok := roleArgs[r]; ok {
		return a
	}
	return string(r)
}

// nullString returns s as a statement argument: nil (NULL) when it is not
// valid, which takes no allocation, else its string.
func nullString(s sql.NullString) any {
	if !s.Valid {
		return nil
	}
	return s.String
}

// messageRow holds the columns of a message row that are not Message
// fields as they are.
type messageRow struct {
	toolCalls, metadata sql.NullString // JSON
	tokensBefore, turn  int64
}

func encode(m chatmem.Message) (messageRow, error) {
	var r messageRow
	if len(m.ToolCalls) > 0 {
		b, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return r, fmt.Errorf("encode tool calls: %w", err)
		}
		r.toolCalls = sql.NullString{String: string(b), Valid: true}
	}
	if len(m.Metadata) > 0 {
		b, err := json.Marshal(m.Metadata)
		if err != nil {
			return r, fmt.Errorf("encode metadata: %w", err)
		}
		r.metadata = sql.NullString{String: string(b), Valid: true}
	}
	return r, nil
}

package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// Append stores msgs at the end of the conversation in one transaction (see
// chatmem.Store). It locks the conversation's row, creating it if missing,
// and then, in this order: starts an expired conversation afresh (its
// messages, postings, keys, summary and facts deleted), replays an
// idempotency key already applied (or refuses it with
// chatmem.ErrIdempotencyKeyReused if its fingerprint differs), checks ExpectedLastSeq,
// ExpectedRevision and ExpectedTokenizer (a mismatch returns an error wrapping
// chatmem.ErrConflict and writes nothing), and writes the batch with one
// statement. It does not index the messages for search: see IndexPending.
// ExpectedTokenizer is checked against the tokenizer the locking statement
// returns, so no other append or Recount can change it before the write; a
// conversation the append creates, or starts afresh after it expired,
// matches.
//
// A retried append therefore replays even if its ExpectedLastSeq or
// ExpectedTokenizer no longer matches (the first attempt moved LastSeq on,
// or the conversation was recounted since): the retry is the same request,
// and it gets the first attempt's answer.
//
// An append without an idempotency key to a conversation that exists (the
// common one, and every turn of Memory.Turn) takes one statement instead,
// appendExisting, with the same checks made under the same lock: one
// round trip and one commit. Only when it finds no live conversation that
// passes them does the transaction above run, to create the conversation
// or to tell which check failed.
func (s *Store) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	res, _, err := s.appendTail(ctx, key, msgs, opts, nil)
	return res, err
}

// AppendTail is Append followed, in its transaction, by System and Tail(q)
// of the conversation as the append left it (see chatmem.TailAppender).
// The common append, appendExisting's statement, and the two reads are
// sent as one batch: one pipeline, so one round trip, and one implicit
// transaction, which holds the conversation's row lock from the append's
// UPDATE to the commit at the end of the batch, so no other append can
// land between the append and the reads. Each read takes its own snapshot
// (READ COMMITTED) after the append, so it sees the append and everything
// committed before it. An append that takes Append's transaction instead
// (to create the conversation, to start an expired one afresh, or with an
// idempotency key) sends the reads as one batch in that transaction, before
// it commits: one more round trip; a replay reads nothing. The reads see
// the conversation at the append's time (AppendOptions.Now, or the
// store's clock), at which the append found it live.
func (s *Store) AppendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead, error) {
	if err := q.CheckSelects(); err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, fmt.Errorf("postgres: append to %s: %w", key, err)
	}
	return s.appendTail(ctx, key, msgs, opts, &q)
}

// appendTail is Append, and with q set AppendTail.
func (s *Store) appendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q *chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead, error) {
	op := "postgres: append to " + key.String()
	if err := storekit.CheckAppend(key, msgs, opts); err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, fmt.Errorf("%s: %w", op, err)
	}
	now := opts.Now
	if now.IsZero() {
		now = s.now()
	}
	now = dbTime(now)
	batch, err := encodeBatch(msgs, now)
	if err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, fmt.Errorf("%s: %w", op, err)
	}

	if e := opts.ExpectedLastSeq; opts.IdempotencyKey == "" && (e == nil || *e > 0) {
		// The common case, an append to a live conversation: one
		// statement. If a check fails, or the conversation does not
		// exist, it writes nothing, and the transaction below finds out
		// why (or creates the conversation).
		res, read, ok, err := s.appendExisting(ctx, key, batch, opts, now, q)
		if err != nil {
			return chatmem.AppendResult{}, chatmem.TailRead{}, wrap(ctx, op, err)
		}
		if ok {
			return res, read, nil
		}
	}

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, wrap(ctx, op, err)
	}
	defer tx.Rollback(ctx) // after Commit, a no-op
	res, write, err := s.append(ctx, tx, key, batch, opts, now)
	if err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, wrap(ctx, op, err)
	}
	if !write {
		return res, chatmem.TailRead{}, nil // a replay: nothing to commit, nothing read
	}
	var read chatmem.TailRead
	if q != nil {
		b := &pgx.Batch{}
		s.queueTailRead(b, key, now, *q)
		br := tx.SendBatch(ctx, b)
		read, err = tailRead(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return chatmem.AppendResult{}, chatmem.TailRead{}, wrap(ctx, op, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, wrap(ctx, op, err)
	}
	return res, read, nil
}

// queueTailRead queues AppendTail's reads on b: the system messages and
// Tail(q) of the conversation as it is at now, with the statements System
// and Tail run.
func (s *Store) queueTailRead(b *pgx.Batch, key chatmem.Key, now time.Time, q chatmem.TailQuery) {
	b.Queue(s.q.system, systemArgs(key, now)...)
	b.Queue(s.q.tail, tailArgs(key, now, q)...)
}

// tailRead reads the results of queueTailRead's statements from br, the
// next ones it has. The conversation exists (an append to it just
// returned), so a read that returns nothing is an empty one, as System and
// Tail return it.
func tailRead(br pgx.BatchResults) (chatmem.TailRead, error) {
	var read chatmem.TailRead
	for _, into := range []*[]chatmem.Message{&read.System, &read.Recent} {
		rows, err := br.Query()
		if err != nil {
			return chatmem.TailRead{}, err
		}
		msgs, err := scanMessages(rows)
		if err != nil {
			return chatmem.TailRead{}, err
		}
		if msgs == nil {
			msgs = []chatmem.Message{}
		}
		*into = msgs
	}
	return read, nil
}

// append does Append's work inside tx. write reports whether tx holds
// changes to commit; a replay holds none (the row lock is all it took).
func (s *Store) append(ctx context.Context, tx pgx.Tx, key chatmem.Key, b *batch, opts chatmem.AppendOptions, now time.Time) (_ chatmem.AppendResult, write bool, _ error) {
	conv := chatmem.Conversation{Key: key}
	var expires *time.Time
	var num int64 // names the conversation in message_terms
	err := tx.QueryRow(ctx, s.q.lockConversation, key.Tenant, key.ID, opts.Tokenizer, now, opts.User).Scan(
		&conv.Tokenizer, &conv.LastSeq, &conv.Tokens, &conv.SystemTokens, &conv.Turns,
		&conv.CreatedAt, &conv.UpdatedAt, &expires, &num, &conv.User, &conv.Revision)
	if err != nil {
		return chatmem.AppendResult{}, false, err
	}
	if expires != nil {
		conv.ExpiresAt = *expires
	}
	if expires != nil && !expires.After(now) {
		// Expired: readers no longer see it. Delete what is left (messages,
		// postings, keys, summary, facts) and start the conversation afresh
		// with this append.
		if _, err := tx.Exec(ctx, s.q.deleteContents, key.Tenant, key.ID, num); err != nil {
			return chatmem.AppendResult{}, false, err
		}
		conv = chatmem.Conversation{Key: key, Tokenizer: opts.Tokenizer, User: opts.User, CreatedAt: now, UpdatedAt: now}
	}

	var keyHash []byte
	if opts.IdempotencyKey != "" {
		h := sha256.Sum256([]byte(opts.IdempotencyKey))
		keyHash = h[:]
		var first, count int64
		var fingerprint string
		err := tx.QueryRow(ctx, s.q.idempotencyKey, key.Tenant, key.ID, keyHash).Scan(&first, &count, &fingerprint)
		switch {
		case err == nil:
			if err := chatmem.CheckFingerprint(key, opts, fingerprint); err != nil {
				return chatmem.AppendResult{}, false, err
			}
			rows, err := tx.Query(ctx, s.q.replayMessages, key.Tenant, key.ID, first, count)
			if err != nil {
				return chatmem.AppendResult{}, false, err
			}
			msgs, err := scanMessages(rows)
			if err != nil {
				return chatmem.AppendResult{}, false, err
			}
			return chatmem.AppendResult{Messages: msgs, Conversation: utcConversation(conv), Replayed: true}, false, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return chatmem.AppendResult{}, false, err
		}
	}

	if opts.ExpectedLastSeq != nil && *opts.ExpectedLastSeq != conv.LastSeq {
		return chatmem.AppendResult{}, false, fmt.Errorf("%w: expected last seq %d, conversation is at %d",
			chatmem.ErrConflict, *opts.ExpectedLastSeq, conv.LastSeq)
	}
	// A row the upsert just created is at revision 0, as is one started
	// afresh above.
	if e := opts.ExpectedRevision; e != nil && conv.Revision != *e {
		return chatmem.AppendResult{}, false, storekit.RevisionConflict(key, conv.Revision, *e)
	}
	// The tokenizer is the one the lock returned, so the check holds until
	// the write. LastSeq is 0 exactly when this append starts the
	// conversation: the upsert just created the row (a committed row has
	// messages, as the transaction that created it wrote some), or the
	// expired one was started afresh above. Such a conversation matches;
	// the upsert stored opts.Tokenizer in it, which need not be
	// ExpectedTokenizer.
	if e := opts.ExpectedTokenizer; e != "" && conv.LastSeq > 0 && conv.Tokenizer != e {
		return chatmem.AppendResult{}, false, fmt.Errorf("%w: conversation is kept under tokenizer %q, not the expected %q",
			chatmem.ErrConflict, conv.Tokenizer, e)
	}

	// A conversation this append creates took opts.User (the upsert, or
	// the restart above); an existing one keeps its own.
	if u := opts.User; u != "" && conv.User != u {
		return chatmem.AppendResult{}, false, userConflict(conv.User, u)
	}
	// LastSeq is 0 exactly when this append creates the conversation
	// (see above): only then is the user's erasure record read.
	if u := opts.User; u != "" && conv.LastSeq == 0 {
		started := opts.Started
		if started.IsZero() {
			started = s.now()
		}
		if err := s.fence(ctx, tx, chatmem.Key{Tenant: key.Tenant, ID: u}, started); err != nil {
			return chatmem.AppendResult{}, false, err
		}
	}

	if conv.Tokenizer == "" {
		conv.Tokenizer = opts.Tokenizer
	}
	first := conv.LastSeq + 1
	stored := b.number(&conv)
	conv.UpdatedAt = now
	if opts.TTL > 0 {
		conv.ExpiresAt = dbTime(now.Add(opts.TTL))
	}
	var expiresAt *time.Time
	if !conv.ExpiresAt.IsZero() {
		expiresAt = &conv.ExpiresAt
	}

	if _, err := tx.Exec(ctx, s.q.insertMessages, key.Tenant, key.ID,
		b.seq, b.role, b.content, b.name, b.toolCalls, b.toolCallID,
		b.tokens, b.cum, b.turn, b.createdAt, b.metadata, opts.Receipt); err != nil {
		return chatmem.AppendResult{}, false, err
	}
	if _, err := tx.Exec(ctx, s.q.updateConversation, key.Tenant, key.ID, conv.Tokenizer,
		conv.LastSeq, conv.Tokens, conv.SystemTokens, conv.Turns,
		conv.CreatedAt, conv.UpdatedAt, expiresAt, conv.User, first-1); err != nil {
		return chatmem.AppendResult{}, false, err
	}
	if keyHash != nil {
		if _, err := tx.Exec(ctx, s.q.insertIdempotency, key.Tenant, key.ID, keyHash, first, len(stored), now, opts.Fingerprint); err != nil {
			return chatmem.AppendResult{}, false, err
		}
	}
	return chatmem.AppendResult{Messages: stored, Conversation: utcConversation(conv)}, true, nil
}

// appendExisting appends to a live conversation with the one statement
// appendExisting (no idempotency key; ExpectedLastSeq, if set, above 0),
// and reports whether the conversation was there and its checks held; if
// not, it wrote nothing. With q set, the statement and AppendTail's reads
// (queueTailRead) are one batch, in one implicit transaction (see
// AppendTail), and read holds what the reads returned.
func (s *Store) appendExisting(ctx context.Context, key chatmem.Key, b *batch, opts chatmem.AppendOptions, now time.Time, q *chatmem.TailQuery) (_ chatmem.AppendResult, read chatmem.TailRead, ok bool, _ error) {
	// Number the batch from 0: the statement adds the row's values.
	var added chatmem.Conversation
	stored := b.number(&added)
	var expires *time.Time
	if opts.TTL > 0 {
		e := dbTime(now.Add(opts.TTL))
		expires = &e
	}
	conv := chatmem.Conversation{Key: key}
	var convExpires *time.Time
	args := []any{key.Tenant, key.ID, opts.ExpectedLastSeq, now, expires,
		opts.ExpectedTokenizer, opts.User, added.Tokens, added.SystemTokens, added.Turns, added.LastSeq,
		b.seq, b.role, b.content, b.name, b.cum, b.turn, b.toolCalls, b.toolCallID, b.tokens, b.createdAt, b.metadata, opts.Receipt, opts.ExpectedRevision}
	dest := []any{&conv.Tokenizer, &conv.LastSeq, &conv.Tokens, &conv.SystemTokens, &conv.Turns,
		&conv.CreatedAt, &conv.UpdatedAt, &convExpires, &conv.User, &conv.Revision}
	var err error
	if q == nil {
		err = s.pool.QueryRow(ctx, s.q.appendExisting, args...).Scan(dest...)
	} else {
		pb := &pgx.Batch{}
		pb.Queue(s.q.appendExisting, args...)
		s.queueTailRead(pb, key, now, *q)
		br := s.pool.SendBatch(ctx, pb)
		if err = br.QueryRow().Scan(dest...); err == nil {
			read, err = tailRead(br)
		}
		// Close reads on to the end of the batch, where the implicit
		// transaction commits: until it returns without an error, the
		// append is not known to have committed.
		if cerr := br.Close(); cerr != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
			err = cerr
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return chatmem.AppendResult{}, chatmem.TailRead{}, false, nil
	}
	if err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, false, err
	}
	if convExpires != nil {
		conv.ExpiresAt = *convExpires
	}
	first := conv.LastSeq - added.LastSeq
	for i := range stored {
		stored[i].Seq = first + int64(i) + 1
	}
	return chatmem.AppendResult{Messages: stored, Conversation: utcConversation(conv)}, read, true, nil
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// maxIndexedSeq is the largest seq the index can hold: a message's rowid in
// message_terms is num<<32 | seq.
const maxIndexedSeq = 1<<32 - 1

// maxConversationNum is the largest conversation number whose rowids fit an
// int64.
const maxConversationNum = 1<<31 - 1

// termPrefix returns the prefix of the conversation's tokens in
// message_terms: num in base 36 and an underscore, which no term contains.
func termPrefix(num int64) string {
	return strconv.FormatInt(num, 36) + "_"
}

// indexText returns what message_terms holds for a message with terms: the
// terms with the conversation's prefix, separated by spaces.
func indexText(num int64, terms []string) string {
	return prefixed(termPrefix(num), terms)
}

// indexable reports whether term can be in the index: chatmem.IndexTerms
// returns terms whose ASCII bytes are lower-case letters, digits and ',
// which the ascii tokenizer keeps as they are (it keeps non-ASCII bytes as
// they are too). A term with any other ASCII byte (upper case, which the
// tokenizer would fold; punctuation or a space, at which it would split; _,
// which ends the conversation's prefix) has no postings, and is not
// searched.
func indexable(term string) bool {
	for i := 0; i < len(term); i++ {
		c := term[i]
		if c < 0x80 && !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '\'') {
			return false
		}
	}
	return true
}

// indexMessages adds the messages with the given terms to the index of
// conversation num, in t. terms[i] are msgs[i]'s; a message with none (a
// system message) gets no row.
func indexMessages(t tx, num int64, msgs []chatmem.Message, terms [][]string) error {
	rows, err := messageIndexRows(num, msgs, terms)
	if err != nil {
		return err
	}
	return insertIndexRows(t, rows)
}

// indexRow is one row of message_terms.
type indexRow struct {
	rowid int64
	terms string
}

// messageIndexRows returns the rows of message_terms for msgs, in conversation
// num; terms[i] are msgs[i]'s, and a message with none gets no row.
func messageIndexRows(num int64, msgs []chatmem.Message, terms [][]string) ([]indexRow, error) {
	rows := make([]indexRow, 0, len(msgs))
	for i, m := range msgs {
		if len(terms[i]) == 0 {
			continue
		}
		if m.Seq < 1 || m.Seq > maxIndexedSeq {
			return nil, fmt.Errorf("index message %d: seq is outside 1..%d", m.Seq, int64(maxIndexedSeq))
		}
		rows = append(rows, indexRow{num<<32 | m.Seq, indexText(num, terms[i])})
	}
	return rows, nil
}

// insertIndexRows writes rows to message_terms, in t.
func insertIndexRows(t tx, rows []indexRow) error {
	for _, r := range rows {
		if _, err := t.exec(insertTerms, r.rowid, r.terms); err != nil {
			return fmt.Errorf("index message %d: %w", r.rowid&maxIndexedSeq, err)
		}
	}
	return nil
}

// Postings returns, for each of terms, the seqs of the conversation's
// messages indexed under it with Seq < before, newest first, at most limit
// (chatmem.Searcher). All terms are read in one snapshot, each with one
// FTS5 query that seeks to the end of the range in the doclist of the
// conversation's own token and reads at most limit rowids, so the cost
// follows len(terms) and limit, not the conversation's length nor the
// other conversations'. It returns chatmem.ErrNotFound for a conversation
// that does not exist or has expired. It is safe for concurrent use.
func (s *Store) Postings(ctx context.Context, key chatmem.Key, terms []string, before int64, limit int) ([][]int64, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if err := storekit.CheckPostings(terms, limit); err != nil {
		return nil, err
	}
	now := s.now()
	out := make([][]int64, len(terms))
	err := s.read(ctx, func(t tx) error {
		var num int64
		if err := t.row(selectLiveConversationNum, key.Tenant, key.ID, clampedNanos(now)).Scan(&num); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return notFound(key)
			}
			return err
		}
		if before <= 1 {
			return nil
		}
		lo, hi := num<<32, (num+1)<<32
		if before <= maxIndexedSeq {
			hi = lo | before
		}
		p := termPrefix(num)
		for i, term := range terms {
			if !indexable(term) {
				continue
			}
			// An FTS5 string: the token as it is, quotes doubled (the
			// terms indexable lets through have none).
			match := `"` + strings.ReplaceAll(p+term, `"`, `""`) + `"`
			rows, err := t.query(selectPostings, match, lo, hi, limit)
			if err != nil {
				return fmt.Errorf("postings of %q: %w", term, err)
			}
			var seqs []int64
			for rows.Next() {
				var rowid int64
				if err := rows.Scan(&rowid); err != nil {
					rows.Close()
					return err
				}
				seqs = append(seqs, rowid&maxIndexedSeq)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
			out[i] = seqs
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MessagesAt returns the conversation's messages with the given seqs,
// oldest first, each once; seqs with no message are skipped
// (chatmem.Searcher). It reads them with one query, a seek per seq. It
// returns chatmem.ErrNotFound for a conversation that does not exist or has
// expired. It is safe for concurrent use.
func (s *Store) MessagesAt(ctx context.Context, key chatmem.Key, seqs []int64) ([]chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	list, err := json.Marshal(seqs)
	if err != nil {
		return nil, err
	}
	if seqs == nil {
		list = []byte("[]")
	}
	return s.readMessages(ctx, key, selectMessagesAt, key.Tenant, key.ID, string(list))
}

// backfillBatch is how many messages one transaction of the backfill
// indexes.
const backfillBatch = 1000

// backfill indexes the messages stored before the index existed (see
// migrations/0003_search.sql), newest first, backfillBatch messages per
// write transaction, so that appenders get the lock in between. Each
// transaction records how far it got, so an interrupted backfill resumes
// where it stopped, and processes opening the file at once share the work
// without indexing a message twice. Messages appended since the migration
// were indexed by their appends.
func (s *Store) backfill(ctx context.Context) error {
	return s.runBackfill(ctx, backfillSteps{
		what: "index the messages stored before the index",
		pick: selectUnindexed, mark: setUnindexed,
		index: func(t tx, key chatmem.Key, _ string, num int64, msgs []chatmem.Message, terms [][]string) error {
			return indexMessages(t, num, msgs, terms)
		},
	})
}

// backfillSteps describes one of the index backfills (backfill,
// backfillUsers): pick selects a conversation with messages left to index
// (tenant, ID, the user if withUser, its number, and the seq below which
// messages are left), index indexes a batch of them, and mark records the
// start of the batch as the conversation's new end.
type backfillSteps struct {
	what       string
	pick, mark string
	withUser   bool
	index      func(t tx, key chatmem.Key, user string, num int64, msgs []chatmem.Message, terms [][]string) error
}

// runBackfill runs b until pick finds nothing left, newest messages first,
// backfillBatch messages per write transaction, each recording how far it
// got.
func (s *Store) runBackfill(ctx context.Context, b backfillSteps) error {
	for {
		done := false
		err := s.write(ctx, func(t tx) error {
			var (
				key      chatmem.Key
				user     string
				num, end int64
			)
			dest := []any{&key.Tenant, &key.ID, &num, &end}
			if b.withUser {
				dest = []any{&key.Tenant, &key.ID, &user, &num, &end}
			}
			err := t.row(b.pick).Scan(dest...)
			if errors.Is(err, sql.ErrNoRows) {
				done = true
				return nil
			}
			if err != nil {
				return err
			}
			start := max(end-backfillBatch, 0)
			msgs, err := queryMessages(t, selectRange, key.Tenant, key.ID, start, end-start)
			if err != nil {
				return err
			}
			terms := make([][]string, len(msgs))
			for i, m := range msgs {
				terms[i] = chatmem.IndexTerms(m)
			}
			if err := b.index(t, key, user, num, msgs, terms); err != nil {
				return fmt.Errorf("conversation %s: %w", key, err)
			}
			_, err = t.exec(b.mark, key.Tenant, key.ID, start)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", b.what, err)
		}
		if done {
			return nil
		}
	}
}

// prefixed returns the terms, each with prefix, separated by spaces.
func prefixed(prefix string, terms []string) string {
	var b strings.Builder
	b.Grow(len(terms) * (len(prefix) + 8))
	for i, t := range terms {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(prefix)
		b.WriteString(t)
	}
	return b.String()
}

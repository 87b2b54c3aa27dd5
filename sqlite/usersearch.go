package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.UserSearcher = (*Store)(nil)

// The user index (migrations/0015_user_postings.sql): user_postings keyed
// (user hash, term, date, conversation number, seq), and user_posted, the
// terms each message was posted under.
const (
	// insertUserPosted records the terms ?5 (a JSON array) that message
	// ?2 of conversation number ?1, dated ?4, is posted under for user
	// hash ?3.
	insertUserPosted = `INSERT INTO user_posted (conv, seq, uh, at, terms) VALUES (?1, ?2, ?3, ?4, ?5)`

	// insertUserPostings posts that message under each of its terms
	// (chatmem.IndexTerms lists each once).
	insertUserPostings = `INSERT INTO user_postings (uh, term, at, conv, seq)
		SELECT ?3, value, ?4, ?1, ?2 FROM json_each(?5)`

	// userPostingsFrom begins the reads of user_postings: the postings of
	// user hash ?1 under term ?2 that the rest of the query selects, as
	// one row of "at,conv,seq" groups separated by commas.
	userPostingsFrom = `SELECT ifnull(group_concat(at || ',' || conv || ',' || seq), '') FROM (
		SELECT at, conv, seq FROM user_postings WHERE uh = ?1 AND term = ?2 `

	// selectUserPostings reads the newest postings, at most ?3, newest
	// first in the key's order: one range of the key, from its end.
	selectUserPostings = userPostingsFrom + `ORDER BY at DESC, conv DESC, seq DESC LIMIT ?3)`

	// selectUserPostingsBelow is selectUserPostings for the postings
	// below (?4, ?5, ?6) = (at, conv, seq) in the key's order.
	selectUserPostingsBelow = userPostingsFrom + `AND (at, conv, seq) < (?4, ?5, ?6)
		ORDER BY at DESC, conv DESC, seq DESC LIMIT ?3)`

	// selectUserPostingsTied reads every posting dated ?3 of a
	// conversation numbered below ?4.
	selectUserPostingsTied = userPostingsFrom + `AND at = ?3 AND conv < ?4)`

	// selectUserPostingsRest reads the postings dated ?3 of conversation
	// number ?4 with a seq below ?5, the newest ?6: those alike in date
	// and conversation ID sort by seq.
	selectUserPostingsRest = userPostingsFrom + `AND at = ?3 AND conv = ?4 AND seq < ?5 ORDER BY seq DESC LIMIT ?6)`

	// selectUserIdents names each conversation with a number in the JSON
	// array ?1 that has a user: its tenant, user and ID, which never
	// change for a number (numbers are never reused), so that the store
	// keeps them (userIdents). A seek in conversations_num per number.
	selectUserIdents = `SELECT c.num, c.tenant, c.user_id, c.id FROM json_each(?1)
		CROSS JOIN conversations c ON c.num = json_each.value WHERE c.user_id IS NOT NULL`

	// selectExpiredNums lists the numbers, tenants and users of
	// conversations expired at ?1 and not swept yet, at most ?2: a range
	// of conversations_expires, which the sweeper keeps short.
	selectExpiredNums = `SELECT num, tenant, ifnull(user_id, '') FROM conversations
		WHERE expires_at IS NOT NULL AND expires_at <= ?1 LIMIT ?2`

	// selectUserConversations returns the number and ID of each
	// conversation with a number in the JSON array ?4 that is live (?3)
	// and bound to user ?2 of tenant ?1: a seek in conversations_num per
	// number. checkUserConversations falls back on it when too many
	// conversations are expired and not swept yet to list them.
	selectUserConversations = `SELECT c.num, c.id FROM json_each(?4)
		CROSS JOIN conversations c ON c.num = json_each.value
		WHERE c.tenant = ?1 AND c.user_id = ?2 AND (c.expires_at IS NULL OR c.expires_at > ?3)`

	// selectUserMessagesAt reads the messages named by the JSON object ?4,
	// {conversation ID: [seq, ...]}, that belong to live (?3) conversations
	// of tenant ?1 bound to user ?2: a seek in the conversations' primary
	// key per conversation, checked once for all its seqs, and one in
	// messages_seq per seq. (CROSS JOIN keeps SQLite's join order: the
	// object first.)
	selectUserMessagesAt = `SELECT c.id, m.seq, m.role, m.content, m.name, m.tool_calls, m.tool_call_id, m.tokens,
		m.created_at, m.metadata FROM json_each(?4) AS hc
		CROSS JOIN conversations c ON c.tenant = ?1 AND c.id = hc.key
		CROSS JOIN json_each(hc.value) AS hs
		CROSS JOIN messages m ON m.tenant = ?1 AND m.conv_id = c.id AND m.seq = hs.value
		WHERE c.user_id = ?2 AND (c.expires_at IS NULL OR c.expires_at > ?3)`

	// selectUserUnindexed finds a conversation with a user whose messages
	// stored before the user index existed are not all in it yet.
	selectUserUnindexed = `SELECT tenant, id, user_id, num, user_unindexed_seq
		FROM conversations INDEXED BY conversations_user_unindexed
		WHERE user_unindexed_seq > 0 ORDER BY num LIMIT 1`

	// setUserUnindexed records that the conversation's messages after ?3
	// are in the user index.
	setUserUnindexed = `UPDATE conversations SET user_unindexed_seq = ?3 WHERE tenant = ?1 AND id = ?2`
)

// userHash returns the user's key in user_postings: a 64-bit hash of
// tenant and user ID. / separates them, which no ID contains.
func userHash(tenant, user string) int64 {
	h := fnv.New64a()
	h.Write([]byte(tenant))
	h.Write([]byte{'/'})
	h.Write([]byte(user))
	return int64(h.Sum64())
}

// indexUserMessages posts the messages with the given terms, just
// appended to conversation key (number num) of its tenant's user, in the
// user index in t. terms[i] are msgs[i]'s; a message with none (a system
// message) is not posted.
func indexUserMessages(t tx, key chatmem.Key, user string, num int64, msgs []chatmem.Message, terms [][]string) error {
	var uh int64
	for i, m := range msgs {
		if len(terms[i]) == 0 {
			continue
		}
		if uh == 0 {
			uh = userHash(key.Tenant, user)
		}
		list, err := json.Marshal(terms[i])
		if err != nil {
			return err
		}
		at := m.CreatedAt.UnixNano()
		for _, q := range []string{insertUserPosted, insertUserPostings} {
			if _, err := t.exec(q, num, m.Seq, uh, at, string(list)); err != nil {
				return fmt.Errorf("index message %d for user %s: %w", m.Seq, user, err)
			}
		}
	}
	return nil
}

// userEntry is one posting of the user index, resolved.
type userEntry struct {
	conv string
	seq  int64
	at   int64
}

// posting is a row of user_postings, as read: its date, conversation
// number and seq.
type posting struct{ at, conv, seq int64 }

// UserPostings returns, for each of terms, the newest messages of the
// user's live conversations posted under it, at most limit
// (chatmem.UserSearcher). All terms are read in one snapshot. For each
// term it reads the newest postings of the user's hash in user_postings,
// one range of the key, checks the conversations not checked yet against
// the identities the store keeps (reading the ones it lacks in one query)
// and the list of conversations expired and not swept yet (past
// maxExpiredNums of those, with a query as before), and reads on below if
// checks dropped some (conversations that expired and were not swept yet,
// or another user's sharing the hash). Where its read stops inside a
// date, it reads that date's postings of lower-numbered conversations too,
// since the key orders a date's postings by conversation number and the
// result by conversation ID. So the cost follows len(terms) and limit, not
// the user's history, but for messages of many conversations dated the
// same nanosecond (an import that sets their dates, say), whose postings
// under a term are read whole where a read stops among them. It is safe
// for concurrent use.
func (s *Store) UserPostings(ctx context.Context, user chatmem.Key, terms []string, limit int) ([][]chatmem.UserHit, error) {
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	if err := storekit.CheckPostings(terms, limit); err != nil {
		return nil, err
	}
	now := clampedNanos(s.now())
	uh := userHash(user.Tenant, user.ID)
	out := make([][]chatmem.UserHit, len(terms))
	err := s.read(ctx, func(t tx) error {
		c := &userCache{convs: make(map[int64]string)} // for all terms
		for i, term := range terms {
			out[i] = []chatmem.UserHit{}
			if !indexable(term) {
				continue
			}
			entries, err := s.userPostings(t, user, uh, now, term, limit, c)
			if err != nil {
				return fmt.Errorf("user postings of %q: %w", term, err)
			}
			for _, e := range entries {
				out[i] = append(out[i], chatmem.UserHit{Conversation: e.conv, Seq: e.seq})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// userPostings returns the newest entries of the user's term, at most
// limit, newest first.
func (s *Store) userPostings(t tx, user chatmem.Key, uh, now int64, term string, limit int, c *userCache) ([]userEntry, error) {
	var found []userEntry
	var last *posting // the last one read
	for len(found) < limit {
		need := limit - len(found)
		var page []posting
		var err error
		if last == nil {
			page, err = readPostings(t, selectUserPostings, uh, term, need)
		} else {
			page, err = readPostings(t, selectUserPostingsBelow, uh, term, need, last.at, last.conv, last.seq)
		}
		if err != nil {
			return nil, err
		}
		entries, err := s.resolvePostings(t, user, now, page, c)
		if err != nil {
			return nil, err
		}
		found = append(found, entries...)
		if len(page) < need {
			return sortEntries(found, limit), nil // all read
		}
		last = &page[len(page)-1]
	}
	// The read stopped at last, inside its date perhaps, and the key
	// orders a date's postings by conversation number, not ID. Those of
	// that date below last in the key may sort above the ones kept: the
	// lower-numbered conversations' (read whole: one seek when there are
	// none), and last's own with lower seqs, when a posting of that date
	// kept is of a conversation whose ID sorts below last's (then the
	// newest limit of them).
	more := func(query string, args ...any) error {
		ps, err := readPostings(t, query, append([]any{uh, term, last.at, last.conv}, args...)...)
		if err != nil {
			return err
		}
		entries, err := s.resolvePostings(t, user, now, ps, c)
		found = append(found, entries...)
		return err
	}
	if err := more(selectUserPostingsTied); err != nil {
		return nil, err
	}
	if id := c.convs[last.conv]; id != "" && slices.ContainsFunc(found, func(e userEntry) bool { return e.at == last.at && e.conv < id }) {
		if err := more(selectUserPostingsRest, last.seq, limit); err != nil {
			return nil, err
		}
	}
	return sortEntries(found, limit), nil
}

// readPostings runs one of the selectUserPostings queries and parses its
// row.
func readPostings(t tx, query string, args ...any) ([]posting, error) {
	var list string
	if err := t.row(query, args...).Scan(&list); err != nil {
		return nil, err
	}
	fields, err := parseInts(list, nil)
	if err != nil {
		return nil, err
	}
	if len(fields)%3 != 0 {
		return nil, fmt.Errorf("sqlite: user postings of %d fields", len(fields))
	}
	out := make([]posting, 0, len(fields)/3)
	for i := 0; i < len(fields); i += 3 {
		out = append(out, posting{at: fields[i], conv: fields[i+1], seq: fields[i+2]})
	}
	// group_concat follows the subquery's order in practice; the order
	// asked for is not left to that.
	slices.SortFunc(out, func(a, b posting) int {
		return cmp.Or(cmp.Compare(b.at, a.at), cmp.Compare(b.conv, a.conv), cmp.Compare(b.seq, a.seq))
	})
	return out, nil
}

// resolvePostings returns the entries of the postings that belong to the
// user's live conversations, checking the conversations not in c yet.
func (s *Store) resolvePostings(t tx, user chatmem.Key, now int64, ps []posting, c *userCache) ([]userEntry, error) {
	c.read += len(ps)
	var unknown []int64
	for _, p := range ps {
		if _, ok := c.convs[p.conv]; !ok && !slices.Contains(unknown, p.conv) {
			unknown = append(unknown, p.conv)
		}
	}
	if len(unknown) > 0 {
		if err := s.checkUserConversations(t, user, now, unknown, c); err != nil {
			return nil, err
		}
	}
	out := make([]userEntry, 0, len(ps))
	for _, p := range ps {
		if conv := c.convs[p.conv]; conv != "" {
			out = append(out, userEntry{conv: conv, seq: p.seq, at: p.at})
		}
	}
	return out, nil
}

// sortEntries orders entries newest first (by date, then conversation ID,
// then seq) and returns at most limit of them.
func sortEntries(entries []userEntry, limit int) []userEntry {
	slices.SortFunc(entries, func(a, b userEntry) int {
		return cmp.Or(cmp.Compare(b.at, a.at), cmp.Compare(b.conv, a.conv), cmp.Compare(b.seq, a.seq))
	})
	return entries[:min(limit, len(entries))]
}

// parseInts appends to dst the decimal integers of list, separated by
// commas ("" holds none).
func parseInts(list string, dst []int64) ([]int64, error) {
	for list != "" {
		field := list
		if i := strings.IndexByte(list, ','); i >= 0 {
			field, list = list[:i], list[i+1:]
		} else {
			list = ""
		}
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sqlite: bad integer %q in a list", field)
		}
		dst = append(dst, n)
	}
	return dst, nil
}

// userCache holds what one UserPostings call has resolved so far, so that
// a conversation with many hits is checked once: conversation IDs by
// number ("" for one that is not the user's or not live), and the
// conversations expired and not swept yet (read once, when first needed;
// see checkUserConversations).
type userCache struct {
	convs   map[int64]string
	expired *expiredNums
	read    int // postings read, for tests
}

// expiredNums is the list of selectExpiredNums: the numbers of the
// conversations expired and not swept yet, or, when there were more than
// maxExpiredNums (the sweeper is behind), none and !listed.
type expiredNums struct {
	nums   map[int64]bool
	listed bool
}

// maxExpiredNums bounds the expired conversations UserPostings lists. Past
// it, each conversation is checked in SQL.
const maxExpiredNums = 1024

// userIdent is what a conversation's number names, for ever.
type userIdent struct{ tenant, user, id string }

// userIdents keeps the conversations' identities that UserPostings has
// read (see selectUserIdents): a user's turns find the same conversations
// again and again, and once known, checking one of them is a map lookup
// plus the one list of expired conversations, not a seek. A number names
// the same conversation as long as it exists; whether it still does needs
// no check, since its postings go with it in the same transaction.
// Safe for concurrent use; it forgets everything when it holds
// maxUserIdents.
type userIdents struct {
	mu sync.Mutex
	m  map[int64]userIdent
}

const maxUserIdents = 1 << 16

func (u *userIdents) get(nums []int64) (known map[int64]userIdent, unknown []int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	known = make(map[int64]userIdent, len(nums))
	for _, n := range nums {
		if id, ok := u.m[n]; ok {
			known[n] = id
		} else {
			unknown = append(unknown, n)
		}
	}
	return known, unknown
}

func (u *userIdents) put(idents map[int64]userIdent) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil || len(u.m)+len(idents) > maxUserIdents {
		u.m = make(map[int64]userIdent, len(idents))
	}
	for n, id := range idents {
		u.m[n] = id
	}
}

// jsonInts returns ints as a JSON array.
func jsonInts(ints []int64) string {
	b := make([]byte, 0, 2+len(ints)*20)
	b = append(b, '[')
	for i, n := range ints {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	return string(append(b, ']'))
}

// checkUserConversations records in c.convs the ID of each conversation of
// nums that is live and the user's, and "" for the others. A conversation
// is the user's if its identity (userIdents, read once for the store) says
// so, and live unless it is among the expired ones: so the cost follows
// the conversations not seen before and those expired and not swept yet,
// not the conversations checked. With more of the latter than
// maxExpiredNums, each conversation is checked in SQL instead.
func (s *Store) checkUserConversations(t tx, user chatmem.Key, now int64, nums []int64, c *userCache) error {
	for _, n := range nums {
		c.convs[n] = ""
	}
	if c.expired == nil {
		e, err := readExpiredNums(t, user, now)
		if err != nil {
			return err
		}
		c.expired = &e
	}
	if !c.expired.listed {
		return checkUserConversationsSQL(t, user, now, nums, c.convs)
	}
	known, unknown := s.userIdents.get(nums)
	if len(unknown) > 0 {
		read, err := readUserIdents(t, unknown)
		if err != nil {
			return err
		}
		s.userIdents.put(read)
		maps.Copy(known, read)
	}
	for n, id := range known {
		if id.tenant == user.Tenant && id.user == user.ID && !c.expired.nums[n] {
			c.convs[n] = id.id
		}
	}
	return nil
}

// readExpiredNums lists the user's conversations expired at now and not
// swept yet (see expiredNums).
func readExpiredNums(t tx, user chatmem.Key, now int64) (expiredNums, error) {
	rows, err := t.query(selectExpiredNums, now, maxExpiredNums+1)
	if err != nil {
		return expiredNums{}, err
	}
	defer rows.Close()
	e := expiredNums{nums: make(map[int64]bool), listed: true}
	count := 0
	for rows.Next() {
		var (
			n              int64
			tenant, userID string
		)
		if err := rows.Scan(&n, &tenant, &userID); err != nil {
			return expiredNums{}, err
		}
		if count++; count > maxExpiredNums {
			return expiredNums{}, rows.Err()
		}
		if tenant == user.Tenant && userID == user.ID {
			e.nums[n] = true
		}
	}
	return e, rows.Err()
}

// readUserIdents reads the identities of the conversations of nums that
// have a user (selectUserIdents).
func readUserIdents(t tx, nums []int64) (map[int64]userIdent, error) {
	rows, err := t.query(selectUserIdents, jsonInts(nums))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]userIdent, len(nums))
	for rows.Next() {
		var (
			n  int64
			id userIdent
		)
		if err := rows.Scan(&n, &id.tenant, &id.user, &id.id); err != nil {
			return nil, err
		}
		out[n] = id
	}
	return out, rows.Err()
}

// checkUserConversationsSQL records in convs the ID of each conversation
// of nums that is live and the user's, checked in SQL.
func checkUserConversationsSQL(t tx, user chatmem.Key, now int64, nums []int64, convs map[int64]string) error {
	rows, err := t.query(selectUserConversations, user.Tenant, user.ID, now, jsonInts(nums))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			n  int64
			id string
		)
		if err := rows.Scan(&n, &id); err != nil {
			return err
		}
		convs[n] = id
	}
	return rows.Err()
}

// UserMessagesAt returns the messages named by hits that belong to the
// user's live conversations, ordered by conversation ID and seq, each once
// (chatmem.UserSearcher): one query, a seek per conversation and one per
// hit. It is safe for concurrent use.
func (s *Store) UserMessagesAt(ctx context.Context, user chatmem.Key, hits []chatmem.UserHit) ([]chatmem.UserMessage, error) {
	if err := storekit.CheckUser(user); err != nil {
		return nil, err
	}
	want := slices.Clone(hits)
	slices.SortFunc(want, func(a, b chatmem.UserHit) int {
		return cmp.Or(cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Seq, b.Seq))
	})
	want = slices.Compact(want)
	seqs := make(map[string][]int64)
	for _, h := range want {
		seqs[h.Conversation] = append(seqs[h.Conversation], h.Seq)
	}
	list, err := json.Marshal(seqs)
	if err != nil {
		return nil, err
	}
	now := clampedNanos(s.now())
	out := []chatmem.UserMessage{}
	err = s.read(ctx, func(t tx) error {
		rows, err := t.query(selectUserMessagesAt, user.Tenant, user.ID, now, string(list))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				um                  chatmem.UserMessage
				role                string
				created             int64
				toolCalls, metadata sql.NullString
			)
			m := &um.Message
			if err := rows.Scan(&um.Conversation, &m.Seq, &role, &m.Content, &m.Name, &toolCalls, &m.ToolCallID, &m.Tokens,
				&created, &metadata); err != nil {
				return err
			}
			if err := decodeMessage(m, role, created, toolCalls, metadata); err != nil {
				return err
			}
			out = append(out, um)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b chatmem.UserMessage) int {
		return cmp.Or(cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}

// backfillUsers adds to the user index the messages of conversations with
// a user stored before the index existed or took its present form (see
// migrations/0009_user_terms.sql and 0015_user_postings.sql), one
// conversation after another, each newest first, backfillBatch messages
// per write transaction, as backfill does for the conversations' own
// index: each transaction records how far it got, so an interrupted
// backfill resumes where it stopped and processes opening the file at once
// share the work.
func (s *Store) backfillUsers(ctx context.Context) error {
	return s.runBackfill(ctx, backfillSteps{
		what: "index for their users the messages stored before the user index",
		pick: selectUserUnindexed, mark: setUserUnindexed, withUser: true,
		index: indexUserMessages,
	})
}

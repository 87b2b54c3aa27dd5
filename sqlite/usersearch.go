package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/chatmem/chatmem"
)

var _ chatmem.UserSearcher = (*Store)(nil)

// The user index (migrations/0009_user_terms.sql): a message's id in
// user_index and rowid in user_terms is its millisecond << userSlotBits |
// a slot.
const (
	userSlotBits = 18
	userSlots    = 1 << userSlotBits

	// selectUserSlot reads the row with the highest id taken in [?1, ?2),
	// the ids of one millisecond: one seek.
	selectUserSlot = `SELECT id, conv, seq, at, ordered FROM user_index WHERE id >= ?1 AND id < ?2 ORDER BY id DESC LIMIT 1`

	// selectConversationID names the conversation of a number.
	selectConversationID = `SELECT id FROM conversations WHERE num = ?1`

	insertUserIndex = `INSERT INTO user_index (id, conv, seq, at, ordered) VALUES (?1, ?2, ?3, ?4, ?5)`

	insertUserTerms = `INSERT INTO user_terms (rowid, terms) VALUES (?1, ?2)`

	// selectUserPostings is selectPostings on user_terms: the newest ids,
	// at most ?4, in [?2, ?3) of the rows holding the token ?1, as one
	// row of decimal ids separated by commas (see userIDs).
	selectUserPostings = `SELECT ifnull(group_concat(rowid), '') FROM (SELECT rowid FROM user_terms
		WHERE user_terms MATCH ?1 AND rowid >= ?2 AND rowid < ?3 ORDER BY rowid DESC LIMIT ?4)`

	// selectUserEntries names the messages with the ids in the JSON array
	// ?1: a seek in user_index per id, as one row of
	// "id,conv,seq,at,ordered" groups separated by commas (see
	// readUserEntries). Their conversations are checked apart
	// (checkUserConversations), once per conversation.
	selectUserEntries = `SELECT ifnull(group_concat(u.id || ',' || u.conv || ',' || u.seq || ',' || u.at || ',' || u.ordered), '')
		FROM json_each(?1) CROSS JOIN user_index u ON u.id = json_each.value`

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

	// optimizeUserTerms merges the user index into one segment, dropping
	// the entries of deleted rows (see optimizeTerms).
	optimizeUserTerms = `INSERT INTO user_terms (user_terms) VALUES ('optimize')`
)

// userPrefix returns the prefix of the user's tokens in user_terms: "u",
// a hash of tenant and user ID in base 36, "_". / separates them, which no
// ID contains.
func userPrefix(tenant, user string) string {
	h := fnv.New64a()
	h.Write([]byte(tenant))
	h.Write([]byte{'/'})
	h.Write([]byte(user))
	return "u" + strconv.FormatUint(h.Sum64(), 36) + "_"
}

// userMilli returns the millisecond of the user index that Unix time
// nanos falls in: milliseconds since the earliest time an int64 of
// nanoseconds holds, so never negative, and below 2^45.
func userMilli(nanos int64) int64 {
	return int64((uint64(nanos) ^ 1<<63) / 1e6)
}

// indexUserMessages adds the messages with the given terms, just appended
// to conversation key (number num) of its tenant's user, to the user index
// in t. terms[i] are msgs[i]'s; a message with none (a system message)
// gets no row. Each message takes the lowest free slot of its millisecond
// after the highest taken; should a millisecond's slots all be taken
// (userSlots messages dated within it), it takes one of an earlier
// millisecond, and UserPostings may then place it a little out of order.
func indexUserMessages(t tx, key chatmem.Key, user string, num int64, msgs []chatmem.Message, terms [][]string) error {
	var prefix string
	for i, m := range msgs {
		if len(terms[i]) == 0 {
			continue
		}
		if prefix == "" {
			prefix = userPrefix(key.Tenant, user)
		}
		row := userRow{conv: num, seq: m.Seq, at: m.CreatedAt.UnixNano()}
		if err := freeUserSlot(t, key.ID, &row); err != nil {
			return fmt.Errorf("index message %d for user %s: %w", m.Seq, user, err)
		}
		if _, err := t.exec(insertUserIndex, row.id, row.conv, row.seq, row.at, row.ordered); err != nil {
			return fmt.Errorf("index message %d for user %s: %w", m.Seq, user, err)
		}
		if _, err := t.exec(insertUserTerms, row.id, prefixed(prefix, terms[i])); err != nil {
			return fmt.Errorf("index message %d for user %s: %w", m.Seq, user, err)
		}
	}
	return nil
}

// userRow is a row of user_index.
type userRow struct {
	id, conv, seq, at int64
	ordered           bool
}

// freeUserSlot sets row's id to a free one of its millisecond (or, if that
// is full, of the nearest earlier one that is not), and row's ordered to
// whether it sorts after every row of that millisecond: it does if it
// sorts after the highest one (by date, conversation ID, seq) and that one
// is ordered. conv is the ID of row's conversation; the highest row's is
// read only when both are of one instant and not of one conversation.
func freeUserSlot(t tx, conv string, row *userRow) error {
	for ms := userMilli(row.at); ms >= 0; ms-- {
		lo := ms << userSlotBits
		var top userRow
		switch err := t.row(selectUserSlot, lo, lo+userSlots).Scan(&top.id, &top.conv, &top.seq, &top.at, &top.ordered); {
		case err == nil:
			if top.id+1 < lo+userSlots {
				row.id = top.id + 1
				if !top.ordered {
					row.ordered = false
					return nil
				}
				var err error
				row.ordered, err = sortsAfter(t, conv, *row, top)
				return err
			}
		case errors.Is(err, sql.ErrNoRows):
			row.id, row.ordered = lo, true
			return nil
		default:
			return err
		}
	}
	return fmt.Errorf("sqlite: no free slot in the user index")
}

// sortsAfter reports whether row (of conversation ID conv) sorts after
// other in UserPostings's order: a later date, or the same date and a
// greater conversation ID, or the same conversation ID (one conversation,
// or conversations of two tenants) and a greater seq. Migration 0014 says
// the same in SQL.
func sortsAfter(t tx, conv string, row, other userRow) (bool, error) {
	switch {
	case row.at != other.at:
		return row.at > other.at, nil
	case row.conv == other.conv:
		return row.seq > other.seq, nil
	}
	var id string
	if err := t.row(selectConversationID, other.conv).Scan(&id); err != nil {
		return false, fmt.Errorf("name conversation %d: %w", other.conv, err)
	}
	if conv != id {
		return conv > id, nil
	}
	return row.seq > other.seq, nil
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

// userEntry is one message of the user index, resolved, and whether its
// row is ordered (see migrations/0014_user_index_ordered.sql).
type userEntry struct {
	conv    string
	seq     int64
	at      int64
	ordered bool
}

// UserPostings returns, for each of terms, the newest messages of the
// user's live conversations indexed under it, at most limit
// (chatmem.UserSearcher). All terms are read in one snapshot. For each
// term it reads the newest ids of the user's token in user_terms (and,
// where that read stops inside a millisecond, the rest of it, since the
// ids order a millisecond's messages by their slot, not by date,
// conversation and seq, unless the rows kept of it are ordered: see
// migrations/0014_user_index_ordered.sql), then names those not named yet
// for an earlier term through user_index, checks the conversations not
// checked yet against the identities the store keeps (reading the ones it
// lacks in one query) and the list of conversations expired and not swept
// yet (past maxExpiredNums of those, with a query as before), and reads on
// below if checks dropped some (conversations that expired and were not
// swept yet, or another user's sharing the hash). So the cost follows
// len(terms) and limit, not the user's history. It wraps chatmem.ErrInvalid
// for a bad user, a limit below 1 or an empty term. It is safe for
// concurrent use.
func (s *Store) UserPostings(ctx context.Context, user chatmem.Key, terms []string, limit int) ([][]chatmem.UserHit, error) {
	if err := validateUser(user); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: postings limit %d is below 1", chatmem.ErrInvalid, limit)
	}
	for i, term := range terms {
		if term == "" {
			return nil, fmt.Errorf("%w: term %d is empty", chatmem.ErrInvalid, i)
		}
	}
	now := clampedNanos(s.now())
	prefix := userPrefix(user.Tenant, user.ID)
	out := make([][]chatmem.UserHit, len(terms))
	err := s.read(ctx, func(t tx) error {
		c := &userCache{entries: make(map[int64]userEntry), convs: make(map[int64]string)} // for all terms
		for i, term := range terms {
			out[i] = []chatmem.UserHit{}
			if !indexable(term) {
				continue
			}
			match := `"` + strings.ReplaceAll(prefix+term, `"`, `""`) + `"`
			entries, err := s.userPostings(t, user, now, match, limit, c)
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

// userPostings returns the newest entries of the user's token match, at
// most limit, newest first.
func (s *Store) userPostings(t tx, user chatmem.Key, now int64, match string, limit int, c *userCache) ([]userEntry, error) {
	var found []userEntry
	hi := int64(math.MaxInt64) // ids below hi are still to read
	for len(found) < limit {
		need := limit - len(found)
		// One id past need tells whether the last one's millisecond
		// goes on below it.
		ids, err := userIDs(t, match, 0, hi, need+1)
		if err != nil || len(ids) == 0 {
			return sortEntries(found, limit), err
		}
		more := len(ids) > need
		var past int64
		if more {
			ids, past = ids[:need], ids[need]
		}
		entries, err := s.userEntries(t, user, now, ids, c)
		if err != nil {
			return nil, err
		}
		found = append(found, entries...)
		if !more {
			break
		}
		// All of the ids below hi were read but the rest of the need-th
		// one's millisecond [lo, last), if the one past it is of that
		// millisecond. Those sort below the ones read if every one kept
		// of the millisecond is ordered: then the next read goes on below
		// last. Otherwise they are read and sorted with them, and the next
		// read goes on below the millisecond.
		last := ids[len(ids)-1]
		lo := last &^ (userSlots - 1)
		hi = lo
		if past >= lo {
			if c.ordered(ids, lo) {
				hi = last
				continue
			}
			rest, err := userIDs(t, match, lo, last, -1)
			if err != nil {
				return nil, err
			}
			entries, err := s.userEntries(t, user, now, rest, c)
			if err != nil {
				return nil, err
			}
			found = append(found, entries...)
		}
	}
	return sortEntries(found, limit), nil
}

// sortEntries orders entries newest first (by date, then conversation ID,
// then seq) and returns at most limit of them.
func sortEntries(entries []userEntry, limit int) []userEntry {
	slices.SortFunc(entries, func(a, b userEntry) int {
		return cmp.Or(cmp.Compare(b.at, a.at), cmp.Compare(b.conv, a.conv), cmp.Compare(b.seq, a.seq))
	})
	return entries[:min(limit, len(entries))]
}

// userIDs reads the ids in [lo, hi) of the rows holding match, newest
// first, at most limit (-1: all). They come as one row, a list the store
// parses: a row per id cost the driver more than reading the doclist.
func userIDs(t tx, match string, lo, hi int64, limit int) ([]int64, error) {
	var list string
	if err := t.row(selectUserPostings, match, lo, hi, limit).Scan(&list); err != nil {
		return nil, err
	}
	ids, err := parseInts(list, nil)
	if err != nil {
		return nil, err
	}
	// group_concat follows the subquery's order in practice; the order
	// asked for is not left to that.
	slices.SortFunc(ids, func(a, b int64) int { return cmp.Compare(b, a) })
	return ids, nil
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
// an id in the lists of several terms is named once and a conversation
// with many hits is checked once: entries by id (conv "" for a message
// not in the user's live conversations), conversation IDs by number (""
// for one that is not the user's or not live), and the conversations
// expired and not swept yet (read once, when first needed; see
// checkUserConversations).
type userCache struct {
	entries map[int64]userEntry
	convs   map[int64]string
	expired *expiredNums
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
// no check, since its user_index rows go with it in the same transaction.
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

// ordered reports whether every entry of ids in the millisecond starting
// at id lo that c holds for a message of the user's live conversations is
// ordered (those of later milliseconds do not matter).
func (c *userCache) ordered(ids []int64, lo int64) bool {
	for _, id := range ids {
		if e := c.entries[id]; id&^(userSlots-1) == lo && e.conv != "" && !e.ordered {
			return false
		}
	}
	return true
}

// userEntries names the messages of ids that belong to the user's live
// conversations, reading only the ids not in c yet.
func (s *Store) userEntries(t tx, user chatmem.Key, now int64, ids []int64, c *userCache) ([]userEntry, error) {
	var unread []int64
	for _, id := range ids {
		if _, ok := c.entries[id]; !ok {
			unread = append(unread, id)
		}
	}
	if len(unread) > 0 {
		if err := s.readUserEntries(t, user, now, unread, c); err != nil {
			return nil, err
		}
	}
	out := make([]userEntry, 0, len(ids))
	for _, id := range ids {
		if e := c.entries[id]; e.conv != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

// readUserEntries names the messages of ids through user_index and checks
// the conversations not in c yet, recording both in c.
func (s *Store) readUserEntries(t tx, user chatmem.Key, now int64, ids []int64, c *userCache) error {
	var list string
	if err := t.row(selectUserEntries, jsonInts(ids)).Scan(&list); err != nil {
		return err
	}
	const width = 5 // id, conv, seq, at, ordered
	fields, err := parseInts(list, make([]int64, 0, width*len(ids)))
	if err != nil {
		return err
	}
	if len(fields)%width != 0 {
		return fmt.Errorf("sqlite: user index entries of %d fields", len(fields))
	}
	var unknown []int64
	for i := 0; i < len(fields); i += width {
		if conv := fields[i+1]; !slices.Contains(unknown, conv) {
			if _, ok := c.convs[conv]; !ok {
				unknown = append(unknown, conv)
			}
		}
	}
	if len(unknown) > 0 {
		if err := s.checkUserConversations(t, user, now, unknown, c); err != nil {
			return err
		}
	}
	for _, id := range ids {
		c.entries[id] = userEntry{} // not found unless below
	}
	for i := 0; i < len(fields); i += width {
		c.entries[fields[i]] = userEntry{conv: c.convs[fields[i+1]], seq: fields[i+2], at: fields[i+3], ordered: fields[i+4] != 0}
	}
	return nil
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
// hit. It wraps
// chatmem.ErrInvalid for a bad user. It is safe for concurrent use.
func (s *Store) UserMessagesAt(ctx context.Context, user chatmem.Key, hits []chatmem.UserHit) ([]chatmem.UserMessage, error) {
	if err := validateUser(user); err != nil {
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
// a user stored before the index existed (see
// migrations/0009_user_terms.sql), newest first, backfillBatch messages per
// write transaction, as backfill does for the conversations' own index:
// each transaction records how far it got, so an interrupted backfill
// resumes where it stopped and processes opening the file at once share
// the work.
func (s *Store) backfillUsers(ctx context.Context) error {
	return s.runBackfill(ctx, backfillSteps{
		what: "index for their users the messages stored before the user index",
		pick: selectUserUnindexed, mark: setUserUnindexed, withUser: true,
		index: func(t tx, key chatmem.Key, user string, num int64, msgs []chatmem.Message, terms [][]string) error {
			return indexUserMessages(t, key, user, num, msgs, terms)
		},
	})
}

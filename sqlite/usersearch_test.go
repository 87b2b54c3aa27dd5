package sqlite

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TestUserPostingsOneMillisecond checks the order within one millisecond of
// the user index, where ids follow the order of the appends, not of the
// dates: appends in reverse date order, across conversations, some dates
// equal, read with limits that cut the millisecond anywhere.
func TestUserPostingsOneMillisecond(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ms.db"))
	ctx := t.Context()
	user := chatmem.Key{Tenant: "t", ID: "u"}
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var want []chatmem.UserHit // newest first
	seqs := map[string]int64{}
	// 40 messages within one millisecond, then 10 a millisecond earlier;
	// the newest appended first.
	for i := 49; i >= 0; i-- {
		conv := fmt.Sprintf("c%d", i%3)
		at := base.Add(time.Duration(i/2) * time.Microsecond * 20) // pairs share a date
		if i < 10 {
			at = base.Add(-time.Millisecond + time.Duration(i)*time.Nanosecond)
		}
		res, err := s.Append(ctx, chatmem.Key{Tenant: "t", ID: conv},
			[]chatmem.Message{{Role: chatmem.RoleUser, Content: "pear", Tokens: 1, CreatedAt: at}}, chatmem.AppendOptions{User: user.ID})
		if err != nil {
			t.Fatal(err)
		}
		seqs[conv] = res.Messages[0].Seq
		want = append(want, chatmem.UserHit{Conversation: conv, Seq: seqs[conv]})
	}
	// want is in append order; the order asked for is by date, then
	// conversation ID, then seq, all descending.
	dates := map[chatmem.UserHit]time.Time{}
	for i, h := range want {
		n := 49 - i
		dates[h] = base.Add(time.Duration(n/2) * time.Microsecond * 20)
		if n < 10 {
			dates[h] = base.Add(-time.Millisecond + time.Duration(n)*time.Nanosecond)
		}
	}
	slices.SortFunc(want, func(a, b chatmem.UserHit) int {
		if c := dates[b].Compare(dates[a]); c != 0 {
			return c
		}
		if a.Conversation != b.Conversation {
			if a.Conversation > b.Conversation {
				return -1
			}
			return 1
		}
		return int(b.Seq - a.Seq)
	})
	for _, limit := range []int{1, 2, 7, 39, 40, 41, 45, 50, 60} {
		got, err := s.UserPostings(ctx, user, []string{"pear"}, limit)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[:min(limit, len(want))]; !slices.Equal(got[0], w) {
			t.Errorf("UserPostings(limit %d) = %v, want %v", limit, got[0], w)
		}
	}
}

// TestUserIndexEndsWithConversation checks that a conversation's rows in
// the user index go with it, and only its own.
func TestUserIndexEndsWithConversation(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "uend.db"))
	ctx := t.Context()
	words := []chatmem.Message{{Role: chatmem.RoleUser, Content: "alpha beta", Tokens: 2}, {Role: chatmem.RoleSystem, Content: "alpha", Tokens: 1}}
	for _, id := range []string{"keep", "gone"} {
		if _, err := s.Append(ctx, chatmem.Key{Tenant: "t", ID: id}, words, chatmem.AppendOptions{User: "u"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, chatmem.Key{Tenant: "t", ID: "free"}, words, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	rows := func() (index, terms int) {
		t.Helper()
		if err := s.r.db.QueryRowContext(ctx, `SELECT count(*) FROM user_index`).Scan(&index); err != nil {
			t.Fatal(err)
		}
		if err := s.r.db.QueryRowContext(ctx, `SELECT count(*) FROM user_terms`).Scan(&terms); err != nil {
			t.Fatal(err)
		}
		return index, terms
	}
	if i, n := rows(); i != 2 || n != 2 {
		t.Fatalf("user index rows = %d and %d, want 2 and 2 (one per user message of a conversation with a user)", i, n)
	}
	if err := s.Delete(ctx, chatmem.Key{Tenant: "t", ID: "gone"}); err != nil {
		t.Fatal(err)
	}
	if i, n := rows(); i != 1 || n != 1 {
		t.Errorf("user index rows after Delete = %d and %d, want 1 and 1", i, n)
	}
	got, err := s.UserPostings(ctx, chatmem.Key{Tenant: "t", ID: "u"}, []string{"alpha"}, 10)
	if err != nil || !slices.Equal(got[0], []chatmem.UserHit{{Conversation: "keep", Seq: 1}}) {
		t.Errorf("UserPostings(alpha) = %v, %v; want keep's message 1", got, err)
	}
}

// TestUserIndexBackfill takes a database back to before the user index
// held a conversation's messages (as migration 0009 finds one written
// before it) and opens it again: Open indexes them, in batches, and they
// are searched like new ones.
func TestUserIndexBackfill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ubackfill.db")
	s := open(t, path)
	ctx := t.Context()
	key := chatmem.Key{Tenant: "t", ID: "old"}
	msgs := make([]chatmem.Message, 2500)
	for i := range msgs {
		msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("delta n%d", i+1), Tokens: 1}
	}
	for i := 0; i < len(msgs); i += 1000 {
		if _, err := s.Append(ctx, key, msgs[i:min(i+1000, len(msgs))], chatmem.AppendOptions{User: "u"}); err != nil {
			t.Fatal(err)
		}
	}
	execAll(t, s, "DELETE FROM user_terms", "DELETE FROM user_index", "UPDATE conversations SET user_unindexed_seq = last_seq")
	user := chatmem.Key{Tenant: "t", ID: "u"}
	if got, err := s.UserPostings(ctx, user, []string{"delta"}, 10); err != nil || len(got[0]) != 0 {
		t.Fatalf("UserPostings before the backfill = %v, %v; want none", got, err)
	}
	s2 := open(t, path)
	got, err := s2.UserPostings(ctx, user, []string{"delta", "n1", "n2500"}, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got[0]) != 2500 || !slices.Equal(got[1], []chatmem.UserHit{{Conversation: "old", Seq: 1}}) ||
		!slices.Equal(got[2], []chatmem.UserHit{{Conversation: "old", Seq: 2500}}) {
		t.Errorf("UserPostings after the backfill = %d, %v, %v; want 2500 messages, [old 1], [old 2500]", len(got[0]), got[1], got[2])
	}
	var left int
	if err := s2.r.db.QueryRowContext(ctx, `SELECT count(*) FROM conversations WHERE user_unindexed_seq > 0`).Scan(&left); err != nil || left != 0 {
		t.Errorf("conversations left to backfill = %d, %v; want 0", left, err)
	}
}

// TestUserIndexOrderedMigration checks the pass of migration 0014 that
// marks the rows indexed before it: on rows indexed in and out of date
// order, within and across conversations and milliseconds, it marks the
// rows that indexing them marked, and those alone.
func TestUserIndexOrderedMigration(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "ordered.db"))
	ctx := t.Context()
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	us := time.Microsecond
	ms := time.Millisecond
	for _, a := range []struct {
		tenant, conv string
		at           time.Duration
		n            int
	}{
		// In order: dates rising across conversations, then one date
		// across conversations of rising IDs, then a later append to one.
		{"t", "b", 0, 2}, {"t", "a", us, 1}, {"t", "b", 2 * us, 3}, {"t", "c", 2 * us, 1}, {"t", "c", 2 * us, 2},
		// The same date, a lower conversation ID: out of order, and so
		// is the rest of the millisecond.
		{"t", "b", ms, 2}, {"t", "c", ms, 1}, {"t", "a", ms, 1}, {"t", "d", ms + us, 2},
		// An earlier date.
		{"t", "a", 2*ms + 5*us, 2}, {"t", "b", 2*ms + us, 1}, {"t", "c", 2*ms + 9*us, 1},
		// The same date and conversation ID in another tenant, a lower
		// seq.
		{"t", "e", 3 * ms, 3}, {"t2", "e", 3 * ms, 1},
		// One append alone in its millisecond.
		{"t", "f", 4 * ms, 5},
	} {
		msgs := make([]chatmem.Message, a.n)
		for j := range msgs {
			msgs[j] = chatmem.Message{Role: chatmem.RoleUser, Content: "plum", Tokens: 1, CreatedAt: base.Add(a.at)}
		}
		if _, err := s.Append(ctx, chatmem.Key{Tenant: a.tenant, ID: a.conv}, msgs, chatmem.AppendOptions{User: "u"}); err != nil {
			t.Fatal(err)
		}
	}
	flags := func() (all []int64, ordered int) {
		rows, err := s.r.db.QueryContext(ctx, `SELECT id, ordered FROM user_index ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, o int64
			if err := rows.Scan(&id, &o); err != nil {
				t.Fatal(err)
			}
			all = append(all, id, o)
			ordered += int(o)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return all, ordered
	}
	indexed, ordered := flags()
	if rows := len(indexed) / 2; ordered == 0 || ordered == rows {
		t.Fatalf("%d of %d rows ordered: the test needs both kinds", ordered, rows)
	}
	sql, err := migrationFS.ReadFile("migrations/0014_user_index_ordered.sql")
	if err != nil {
		t.Fatal(err)
	}
	_, pass, ok := strings.Cut(string(sql), ";\n\nUPDATE user_index")
	if !ok {
		t.Fatal("migration 0014 has no UPDATE user_index pass")
	}
	pass = "UPDATE user_index" + pass
	execAll(t, s, "UPDATE user_index SET ordered = 0", pass)
	if migrated, _ := flags(); !slices.Equal(migrated, indexed) {
		t.Errorf("(id, ordered) after the migration's pass = %v, want what indexing said, %v", migrated, indexed)
	}
}

// TestUserPostingsOrderedSkip checks that a term's read that stops inside
// a millisecond names only the rows it keeps when they are ordered (one
// Append of 1,000 messages dated alike), and the whole millisecond when
// they are not (then a lower conversation ID appended at the same date).
func TestUserPostingsOrderedSkip(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "skip.db"))
	ctx := t.Context()
	user := chatmem.Key{Tenant: "t", ID: "u"}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	msgs := make([]chatmem.Message, 1000)
	for i := range msgs {
		msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: "quince", Tokens: 1, CreatedAt: at}
	}
	if _, err := s.Append(ctx, chatmem.Key{Tenant: "t", ID: "b"}, msgs, chatmem.AppendOptions{User: user.ID}); err != nil {
		t.Fatal(err)
	}
	read := func(what string, want []chatmem.UserHit, named int) {
		t.Helper()
		c := &userCache{entries: make(map[int64]userEntry), convs: make(map[int64]string)}
		var got []userEntry
		err := s.read(ctx, func(t tx) error {
			var err error
			got, err = s.userPostings(t, user, clampedNanos(time.Now()), `"`+userPrefix(user.Tenant, user.ID)+`quinc"`, len(want), c)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		hits := make([]chatmem.UserHit, len(got))
		for i, e := range got {
			hits[i] = chatmem.UserHit{Conversation: e.conv, Seq: e.seq}
		}
		if !slices.Equal(hits, want) || len(c.entries) != named {
			t.Errorf("%s: postings %v naming %d rows, want %v naming %d", what, hits, len(c.entries), want, named)
		}
	}
	newest := []chatmem.UserHit{{Conversation: "b", Seq: 1000}, {Conversation: "b", Seq: 999}, {Conversation: "b", Seq: 998}}
	read("ordered", newest, 3)
	if _, err := s.Append(ctx, chatmem.Key{Tenant: "t", ID: "a"}, msgs[:1], chatmem.AppendOptions{User: user.ID}); err != nil {
		t.Fatal(err)
	}
	read("a lower conversation ID last", newest, 1001)
}

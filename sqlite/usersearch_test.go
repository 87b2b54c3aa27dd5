package sqlite

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TestUserPostingsOneMillisecond checks the order of postings within one
// millisecond: appends in reverse date order, across conversations, some
// dates equal, read with limits that cut the millisecond anywhere.
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
		if err := s.r.db.QueryRowContext(ctx, `SELECT count(*) FROM user_posted`).Scan(&index); err != nil {
			t.Fatal(err)
		}
		if err := s.r.db.QueryRowContext(ctx, `SELECT count(*) FROM user_postings`).Scan(&terms); err != nil {
			t.Fatal(err)
		}
		return index, terms
	}
	if i, n := rows(); i != 2 || n != 4 {
		t.Fatalf("user index rows = %d and %d, want 2 and 4 (one per user message of a conversation with a user, and per term of it)", i, n)
	}
	if err := s.Delete(ctx, chatmem.Key{Tenant: "t", ID: "gone"}); err != nil {
		t.Fatal(err)
	}
	if i, n := rows(); i != 1 || n != 2 {
		t.Errorf("user index rows after Delete = %d and %d, want 1 and 2", i, n)
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
	execAll(t, s, "DELETE FROM user_postings", "DELETE FROM user_posted", "UPDATE conversations SET user_unindexed_seq = last_seq")
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

// TestUserPostingsTiedDate checks that a term's read that stops inside a
// date reads no more of it when the postings kept of that date are of one
// conversation (one Append of 1,000 messages dated alike), and the newest
// limit of the rest of that conversation's when a conversation whose ID
// sorts below has a posting of that date (then the key, by conversation
// number, puts it first).
func TestUserPostingsTiedDate(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "tied.db"))
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
	read := func(what string, want []chatmem.UserHit, postings int) {
		t.Helper()
		c := &userCache{convs: make(map[int64]string)}
		var got []userEntry
		err := s.read(ctx, func(t tx) error {
			var err error
			got, err = s.userPostings(t, user, userHash(user.Tenant, user.ID), clampedNanos(time.Now()), chatmem.Terms("quince")[0], len(want), c)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		hits := make([]chatmem.UserHit, len(got))
		for i, e := range got {
			hits[i] = chatmem.UserHit{Conversation: e.conv, Seq: e.seq}
		}
		if !slices.Equal(hits, want) || c.read != postings {
			t.Errorf("%s: postings %v reading %d, want %v reading %d", what, hits, c.read, want, postings)
		}
	}
	newest := []chatmem.UserHit{{Conversation: "b", Seq: 1000}, {Conversation: "b", Seq: 999}, {Conversation: "b", Seq: 998}}
	read("one conversation", newest, 3)
	if _, err := s.Append(ctx, chatmem.Key{Tenant: "t", ID: "a"}, msgs[:1], chatmem.AppendOptions{User: user.ID}); err != nil {
		t.Fatal(err)
	}
	read("a lower conversation ID numbered after", newest, 6)
	if _, err := s.Append(ctx, chatmem.Key{Tenant: "t", ID: "c"}, msgs[:1], chatmem.AppendOptions{User: user.ID}); err != nil {
		t.Fatal(err)
	}
	read("a higher one numbered after that", []chatmem.UserHit{{Conversation: "c", Seq: 1}, {Conversation: "b", Seq: 1000}, {Conversation: "b", Seq: 999}}, 6)
}

package sqlite

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chatmem/chatmem"
)

// undoSearch takes a database back to schema version 2, before
// migrations/0003_search.sql and the ones after it, whose tables refer to
// conversations.num (the statements leave user_version alone).
var undoSearch = []string{
	"ALTER TABLE conversations DROP COLUMN revision", // 0019_revision.sql
	"DROP TABLE usage",                         // 0018_usage.sql (its index with it)
	"ALTER TABLE messages DROP COLUMN receipt", // 0017_receipts.sql
	"DROP TABLE user_erasures",                 // 0016_user_erasures.sql
	"DROP INDEX messages_seq",                  // 0012_messages_seq.sql
	"CREATE UNIQUE INDEX messages_seq ON messages (tenant, conv_id, seq)",
	"CREATE INDEX messages_budget ON messages (tenant, conv_id, tokens_before, seq)",
	"CREATE INDEX messages_turn ON messages (tenant, conv_id, turn, seq) WHERE role = 'user'",
	"DROP TRIGGER conversations_user_unpost", // 0015_user_postings.sql
	"DROP TABLE user_postings",
	"DROP TABLE user_posted",
	"DROP TRIGGER conversations_drop_leases",  // 0011_lease_cleanup.sql
	"DROP INDEX conversations_user_unindexed", // 0009_user_terms.sql
	"ALTER TABLE conversations DROP COLUMN user_unindexed_seq",
	"DROP TABLE leases",                                    // 0008_leases.sql
	"ALTER TABLE idempotency_keys DROP COLUMN fingerprint", // 0007_idempotency_fingerprint.sql
	"ALTER TABLE conversations DROP COLUMN fact_seq",       // 0006_fact_mark.sql
	"DROP TABLE user_facts",                                // 0005_users.sql
	"DROP INDEX conversations_user",
	"ALTER TABLE conversations DROP COLUMN user_id",
	"DROP TABLE message_vectors", // 0004_vectors.sql
	"DROP TRIGGER conversations_unindex",
	"DROP TABLE message_terms",
	"DROP TABLE counters",
	"DROP INDEX conversations_unindexed",
	"DROP INDEX conversations_num",
	"ALTER TABLE conversations DROP COLUMN unindexed_seq",
	"ALTER TABLE conversations DROP COLUMN num",
}

// execAll runs statements on the store's write pool, failing the test on an
// error.
func execAll(t *testing.T, s *Store, queries ...string) {
	t.Helper()
	for _, q := range queries {
		if _, err := s.w.db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// indexRows returns how many rows message_terms has for the conversation.
func indexRows(t *testing.T, s *Store, key chatmem.Key) int {
	t.Helper()
	var n int
	err := s.r.db.QueryRowContext(t.Context(), `SELECT count(*) FROM message_terms WHERE rowid >= ?1 AND rowid < ?2`,
		convNum(t, s, key)<<32, (convNum(t, s, key)+1)<<32).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func convNum(t *testing.T, s *Store, key chatmem.Key) int64 {
	t.Helper()
	var num int64
	if err := s.r.db.QueryRowContext(t.Context(), `SELECT num FROM conversations WHERE tenant = ? AND id = ?`, key.Tenant, key.ID).Scan(&num); err != nil {
		t.Fatalf("number of %s: %v", key, err)
	}
	return num
}

func postings(t *testing.T, s *Store, key chatmem.Key, term string, before int64, limit int) []int64 {
	t.Helper()
	out, err := s.Postings(t.Context(), key, []string{term}, before, limit)
	if err != nil {
		t.Fatalf("Postings(%s, %q) error = %v", key, term, err)
	}
	return out[0]
}

// seqsDown returns the seqs from hi down to lo that keep(seq) holds for.
func seqsDown(hi, lo int64, keep func(int64) bool) []int64 {
	var out []int64
	for seq := hi; seq >= lo; seq-- {
		if keep(seq) {
			out = append(out, seq)
		}
	}
	return out
}

// TestTermsExact checks that the index keeps every kind of term exactly as
// chatmem.IndexTerms makes it (numbers, CJK, apostrophes, non-ASCII
// letters), matches only whole terms, and that a string no term can be (an
// upper-case letter, punctuation, a space, a quote) has no postings and is
// no error.
func TestTermsExact(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "terms.db"))
	key := chatmem.Key{Tenant: "t", ID: "terms"}
	text := `Order SE-10423 to 東京 for the LGBTQ group; O'Brien's café, naïve Ελλάδα, ١٢٣ "quoted"`
	if _, err := s.Append(t.Context(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text, Tokens: 5}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	terms := chatmem.Terms(text)
	for _, want := range []string{"10423", "東京", "lgbtq", "o'brien", "café", "ελλάδα", "١٢٣", "quot"} {
		if !slices.Contains(terms, want) {
			t.Fatalf("test bug: Terms(%q) = %q, no %q", text, terms, want)
		}
	}
	for _, term := range terms {
		if got := postings(t, s, key, term, 10, 10); !slices.Equal(got, []int64{1}) {
			t.Errorf("postings of %q = %v, want [1]", term, got)
		}
	}
	for _, term := range []string{"cafe", "caf", "1042", "東", "brien", "o", "LGBTQ", "Order", "se-10423", "lgbtq group",
		`"`, `" OR "order`, "order*", "o''brien", "NEAR", "*", "_", "1_order", "0_order", "\x00"} {
		if got := postings(t, s, key, term, 10, 10); len(got) != 0 {
			t.Errorf("postings of %q = %v, want none", term, got)
		}
	}
}

// TestIndexEndsWithConversation checks that the index rows go with the
// conversation, however it ends, and that a conversation restarted after
// its expiry has a new number and none of the old rows.
func TestIndexEndsWithConversation(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "end.db"))
	ctx := t.Context()
	words := []chatmem.Message{{Role: chatmem.RoleUser, Content: "alpha beta", Tokens: 2}, {Role: chatmem.RoleSystem, Content: "alpha", Tokens: 1}, {Role: chatmem.RoleAssistant, Content: "gamma", Tokens: 1}}
	keep := chatmem.Key{Tenant: "t", ID: "keep"}
	if _, err := s.Append(ctx, keep, words, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := chatmem.Key{Tenant: "t", ID: "gone"}
	if _, err := s.Append(ctx, gone, words, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := indexRows(t, s, gone); n != 2 {
		t.Fatalf("index rows of %s = %d, want 2 (the system message has none)", gone, n)
	}
	num := convNum(t, s, gone)
	if err := s.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.r.db.QueryRowContext(ctx, `SELECT count(*) FROM message_terms WHERE rowid >= ?1 AND rowid < ?2`, num<<32, (num+1)<<32).Scan(&n); err != nil || n != 0 {
		t.Errorf("index rows after Delete = %d, %v; want 0", n, err)
	}
	if n := indexRows(t, s, keep); n != 2 {
		t.Errorf("index rows of the other conversation after Delete = %d, want 2", n)
	}
	if got := postings(t, s, keep, "alpha", 10, 10); !slices.Equal(got, []int64{1}) {
		t.Errorf("postings of alpha in the other conversation = %v, want [1]", got)
	}
	// A new conversation under the deleted one's key gets a new number.
	if _, err := s.Append(ctx, gone, words[2:], chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := convNum(t, s, gone); got <= num {
		t.Errorf("number of the conversation started again = %d, want more than the old %d", got, num)
	}
	if got := postings(t, s, gone, "alpha", 10, 10); len(got) != 0 {
		t.Errorf("postings of alpha after Delete and a new append = %v, want none", got)
	}
}

// TestUpgradeFromVersion2 opens a database written before the index
// existed: Open indexes its messages (in batches, several per
// conversation), they are searched like new ones, appends go on from there,
// and an interrupted backfill resumes where it stopped.
func TestUpgradeFromVersion2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	ctx := t.Context()
	long := chatmem.Key{Tenant: "t", ID: "long"}
	short := chatmem.Key{Tenant: "u", ID: "short"}
	const n = 2*backfillBatch + 500
	old := open(t, path)
	msgs := make([]chatmem.Message, n)
	for i := range msgs {
		seq := i + 1
		msgs[i] = chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("message %d", seq), Tokens: 2}
		switch {
		case seq%100 == 0:
			msgs[i] = chatmem.Message{Role: chatmem.RoleSystem, Content: "hundred message", Tokens: 2}
		case seq%7 == 0:
			msgs[i].Content += " seventh"
		}
	}
	if _, err := old.Append(ctx, long, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Append(ctx, short, []chatmem.Message{{Role: chatmem.RoleUser, Content: "seventh heaven", Tokens: 2}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	execAll(t, old, append(undoSearch, "PRAGMA user_version = 2")...)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := open(t, path)
	all := seqsDown(n, 1, func(seq int64) bool { return seq%100 != 0 })
	sevenths := seqsDown(n, 1, func(seq int64) bool { return seq%7 == 0 && seq%100 != 0 })
	check := func(what string, s *Store) {
		t.Helper()
		if got := postings(t, s, long, "messag", n+1, n); !slices.Equal(got, all) {
			t.Errorf("%s: postings of messag = %d seqs, want %d: %v", what, len(got), len(all), got)
		}
		if got := postings(t, s, long, "seventh", n+1, n); !slices.Equal(got, sevenths) {
			t.Errorf("%s: postings of seventh = %v, want %v", what, got, sevenths)
		}
		if got := postings(t, s, long, "hundr", n+1, n); len(got) != 0 {
			t.Errorf("%s: postings of hundr (system messages only) = %v, want none", what, got)
		}
		if got := postings(t, s, short, "seventh", 10, 10); !slices.Equal(got, []int64{1}) {
			t.Errorf("%s: postings of seventh in %s = %v, want [1]", what, short, got)
		}
		var left int
		if err := s.r.db.QueryRowContext(ctx, "SELECT count(*) FROM conversations WHERE unindexed_seq > 0").Scan(&left); err != nil || left != 0 {
			t.Errorf("%s: %d conversations still to index, %v; want 0", what, left, err)
		}
	}
	check("after the upgrade", s)
	if got, want := indexRows(t, s, long), len(all); got != want {
		t.Errorf("index rows of %s = %d, want %d", long, got, want)
	}

	// An append after the upgrade: indexed, numbered after the old ones.
	if _, err := s.Append(ctx, long, []chatmem.Message{{Role: chatmem.RoleUser, Content: "seventh again", Tokens: 2}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := postings(t, s, long, "seventh", n+2, 3); !slices.Equal(got, append([]int64{n + 1}, sevenths[:2]...)) {
		t.Errorf("postings of seventh after an append = %v, want %v", got, append([]int64{n + 1}, sevenths[:2]...))
	}
	fresh := chatmem.Key{Tenant: "t", ID: "fresh"}
	if _, err := s.Append(ctx, fresh, msgs[:1], chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := convNum(t, s, fresh); got != 3 {
		t.Errorf("number of a conversation begun after the upgrade = %d, want 3", got)
	}

	// Interrupted after its first batch of long: the messages up to n -
	// backfillBatch not indexed yet.
	cut := int64(n - backfillBatch)
	num := convNum(t, s, long)
	execAll(t, s, fmt.Sprintf("DELETE FROM message_terms WHERE rowid >= %d AND rowid <= %d", num<<32, num<<32|cut),
		fmt.Sprintf("UPDATE conversations SET unindexed_seq = %d WHERE num = %d", cut, num))
	if got := postings(t, s, long, "seventh", cut+1, 10); len(got) != 0 {
		t.Fatalf("test bug: postings below the cut = %v, want none", got)
	}
	check("after resuming", open(t, path))
}

package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
)

// convKeyCount counts the keys of a conversation, term keys included.
func convKeyCount(t *testing.T, s *Store, key chatmem.Key) int {
	t.Helper()
	keys, err := s.client.Keys(t.Context(), s.prefix+":{"+key.Tenant+"/"+key.ID+"}:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

func mustPostings(t *testing.T, s *Store, key chatmem.Key, terms []string) [][]int64 {
	t.Helper()
	out, err := s.Postings(t.Context(), key, terms, 1<<40, 10000)
	if err != nil {
		t.Fatalf("Postings(%s, %q) = %v", key, terms, err)
	}
	return out
}

// appendIndexed appends and has the index catch up, as Memory's worker
// (or the next Postings) does.
func appendIndexed(ctx context.Context, s *Store, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	res, err := s.Append(ctx, key, msgs, opts)
	if err == nil {
		err = s.IndexPending(ctx, key)
	}
	return res, err
}

// TestSearchKeysRemoved checks that Delete and PurgeInactive remove every
// term key, and that Recount leaves the postings as they were.
func TestSearchKeysRemoved(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	old := time.Now().Add(-48 * time.Hour)
	msgs := []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "alpha beta gamma", Tokens: 3},
		{Role: chatmem.RoleAssistant, Content: "delta alpha", Tokens: 2},
	}
	a := chatmem.Key{Tenant: "acme", ID: "deleted"}
	b := chatmem.Key{Tenant: "acme", ID: "purged"}
	for _, key := range []chatmem.Key{a, b} {
		if _, err := appendIndexed(ctx, s, key, msgs, chatmem.AppendOptions{Now: old}); err != nil {
			t.Fatal(err)
		}
		// meta, msgs, cum, users, terms, and alpha beta gamma delta.
		if n := convKeyCount(t, s, key); n != 9 {
			t.Errorf("%s has %d keys, want 9 (5 + 4 term keys)", key, n)
		}
	}
	if err := s.Recount(ctx, a, "double", 2, []int{6, 4}); err != nil {
		t.Fatal(err)
	}
	if got := mustPostings(t, s, a, []string{"alpha", "delta"}); !slices.Equal(got[0], []int64{2, 1}) || !slices.Equal(got[1], []int64{2}) {
		t.Errorf("postings after Recount = %v, want [[2 1] [2]]", got)
	}
	if err := s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n := convKeyCount(t, s, a); n != 0 {
		t.Errorf("%d keys left after Delete", n)
	}
	if n, err := s.PurgeInactive(ctx, "acme", time.Now().Add(-24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("PurgeInactive = %d, %v; want 1", n, err)
	}
	if n := convKeyCount(t, s, b); n != 0 {
		t.Errorf("%d keys left after PurgeInactive", n)
	}
}

// TestSearchExpiry checks the time to live of the term keys: twice the
// conversation's when they get one, the set's remaining time for term keys
// created later, and all of them once a conversation without expiry gets
// one.
func TestSearchExpiry(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	pttl := func(k string) time.Duration {
		t.Helper()
		d, err := s.client.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	user := func(text string) []chatmem.Message {
		return []chatmem.Message{{Role: chatmem.RoleUser, Content: text, Tokens: 1}}
	}
	within := func(d, lo, hi time.Duration) bool { return d > lo && d <= hi }

	key := chatmem.Key{Tenant: "acme", ID: "ttl"}
	if _, err := appendIndexed(ctx, s, key, user("apple"), chatmem.AppendOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	set := s.convKeys(key)[kTerms]
	for _, k := range []string{set, s.termKey(key, "appl")} {
		if d := pttl(k); !within(d, 119*time.Minute, 2*time.Hour) {
			t.Errorf("PTTL(%s) = %v, want about 2h", k, d)
		}
	}
	// An append within the set's time to live adds a term key with the
	// set's remaining time, and leaves the others alone.
	s.client.PExpire(ctx, set, 90*time.Minute)
	if _, err := appendIndexed(ctx, s, key, user("banana"), chatmem.AppendOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if d := pttl(s.termKey(key, "banana")); !within(d, 89*time.Minute, 90*time.Minute) {
		t.Errorf("PTTL of a new term key = %v, want the set's 90m", d)
	}
	if d := pttl(s.termKey(key, "appl")); !within(d, 119*time.Minute, 2*time.Hour) {
		t.Errorf("PTTL of an older term key = %v, want it unchanged (about 2h)", d)
	}
	// An append that pushes the expiry past the set's raises all of them.
	if _, err := appendIndexed(ctx, s, key, user("cherry"), chatmem.AppendOptions{TTL: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, term := range []string{"appl", "banana", "cherri"} {
		if d := pttl(s.termKey(key, term)); !within(d, 239*time.Minute, 4*time.Hour) {
			t.Errorf("PTTL of term %q = %v, want about 4h", term, d)
		}
	}

	// A conversation without expiry: no term key has one, until an append
	// gives the conversation one.
	key = chatmem.Key{Tenant: "acme", ID: "forever"}
	if _, err := appendIndexed(ctx, s, key, user("apple"), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := pttl(s.termKey(key, "appl")); d != -1 {
		t.Errorf("PTTL of a term key without expiry = %v, want -1 (none)", d)
	}
	if _, err := appendIndexed(ctx, s, key, user("banana"), chatmem.AppendOptions{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{s.convKeys(key)[kTerms], s.termKey(key, "appl"), s.termKey(key, "banana")} {
		if d := pttl(k); !within(d, 119*time.Second, 2*time.Minute) {
			t.Errorf("PTTL(%s) = %v, want about 2m", k, d)
		}
	}
	// A later append without a TTL keeps the expiry, and so do new terms.
	if _, err := appendIndexed(ctx, s, key, user("cherry"), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := pttl(s.termKey(key, "cherri")); !within(d, 110*time.Second, 2*time.Minute) {
		t.Errorf("PTTL of a term key added without a TTL = %v, want the set's (about 2m)", d)
	}
}

// unindex makes key look like a conversation stored before the index
// existed: no term keys, no terms set, no "indexed" or "ixseq" field in
// meta.
func unindex(t *testing.T, s *Store, key chatmem.Key) {
	t.Helper()
	ctx := t.Context()
	set := s.convKeys(key)[kTerms]
	terms, err := s.client.SMembers(ctx, set).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, term := range terms {
			p.Del(ctx, s.termKey(key, term))
		}
		p.Del(ctx, set)
		p.HDel(ctx, s.metaKey(key), "indexed", "ixseq")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestBackfill checks that a conversation stored before the index existed
// is indexed by the first Postings, in batches, together with messages
// appended after the upgrade, and that the indexing resumes where an
// earlier version's backfill stopped.
func TestBackfill(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	const n = 2*indexBatch + 500
	key := chatmem.Key{Tenant: "acme", ID: "legacy"}
	var msgs []chatmem.Message
	for i := 1; i <= n; i++ {
		text := fmt.Sprintf("common item%d", i)
		if i%100 == 0 {
			text += " hundred"
		}
		msgs = append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: text, Tokens: 2})
	}
	if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	unindex(t, s, key)
	if n := convKeyCount(t, s, key); n != 4 {
		t.Fatalf("legacy conversation has %d keys, want 4 (meta, msgs, cum, users)", n)
	}
	// An append by the new code starts the watermark where the legacy
	// conversation's index stands: at 0.
	if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "common hundred late", Tokens: 3}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := s.client.HGet(ctx, s.metaKey(key), "ixseq").Val(); got != "0" {
		t.Fatalf("ixseq after an append to a legacy conversation = %q, want 0", got)
	}

	got := mustPostings(t, s, key, []string{"hundr", "item1234", "late"})
	var hundreds []int64
	for i := n + 1; i >= 1; i-- {
		if i%100 == 0 || i == n+1 {
			hundreds = append(hundreds, int64(i))
		}
	}
	if !slices.Equal(got[0], hundreds) || !slices.Equal(got[1], []int64{1234}) || !slices.Equal(got[2], []int64{n + 1}) {
		t.Errorf("postings after backfill = %v, want %v, [1234], [%d]", got, hundreds, n+1)
	}
	if got := s.client.HGet(ctx, s.metaKey(key), "ixseq").Val(); got != fmt.Sprint(n+1) || s.client.HExists(ctx, s.metaKey(key), "backfilled").Val() {
		t.Errorf("meta after backfill: ixseq %q, want %d, and no backfilled", got, n+1)
	}
	// The append above gave the terms set twice the conversation's time to
	// live, and the backfilled keys take the set's.
	if d := s.client.PTTL(ctx, s.termKey(key, "item7")).Val(); d <= time.Hour || d > 2*time.Hour {
		t.Errorf("PTTL of a backfilled term key = %v, want the set's (about 2h)", d)
	}
	if got := mustPostings(t, s, key, []string{"common"}); len(got[0]) != n+1 {
		t.Errorf("postings of a term every message has = %d, want %d", len(got[0]), n+1)
	}

	// The indexing resumes after an earlier version's "backfilled": here
	// it indexes only the last batch.
	unindex(t, s, key)
	s.client.HSet(ctx, s.metaKey(key), "backfilled", 2*indexBatch)
	got = mustPostings(t, s, key, []string{"item5", "item2001", "common"})
	if len(got[0]) != 0 || !slices.Equal(got[1], []int64{2001}) || len(got[2]) != 501 {
		t.Errorf("resumed backfill: postings = %d, %v, %d of common; want 0, [2001], 501", len(got[0]), got[1], len(got[2]))
	}

	// The script refuses a batch for another generation of the
	// conversation.
	unindex(t, s, key)
	indexKeys := []string{s.metaKey(key), s.convKeys(key)[kTerms]}
	reply, err := s.run(ctx, indexScript, indexKeys, "not-the-gen", "", 1, 1, 1, 1, "x")
	if err != nil || reply != int64(-1) {
		t.Errorf("index script with another gen = %v, %v; want -1", reply, err)
	}
	if n := s.client.Exists(ctx, s.termKey(key, "x")).Val(); n != 0 {
		t.Error("index script with another gen indexed its batch")
	}
	// A batch short of the last seq on the master (read from a lagging
	// replica, say) moves the watermark to its end only: the script names
	// the last seq to go on to.
	gen := s.client.HGet(ctx, s.metaKey(key), "gen").Val()
	reply, err = s.run(ctx, indexScript, indexKeys, gen, "", 1, 1, 1, 1, "x")
	if err != nil || reply != int64(n+1) {
		t.Errorf("index script for seq 1 of %d = %v, %v; want %d", n+1, reply, err, n+1)
	}
	if got := s.client.HGet(ctx, s.metaKey(key), "ixseq").Val(); got != "1" {
		t.Errorf("ixseq after a partial batch = %q, want 1", got)
	}
	// A batch that starts past the watermark leaves a gap: refused.
	reply, err = s.run(ctx, indexScript, indexKeys, gen, "", 3, 3, 3, 1, "y")
	if err != nil || reply != int64(n+1) || s.client.Exists(ctx, s.termKey(key, "y")).Val() != 0 {
		t.Errorf("index script for a batch past the watermark = %v, %v, indexed %d; want %d, nothing indexed", reply, err, s.client.Exists(ctx, s.termKey(key, "y")).Val(), n+1)
	}
}

// TestIndexOffAppend checks that an append writes nothing of the search
// index and that the messages are found from the next Postings on: the
// index catches up from its watermark.
func TestIndexOffAppend(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := t.Context()
	key := chatmem.Key{Tenant: "acme", ID: "lazy"}
	for i := 1; i <= 3; i++ {
		if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: fmt.Sprintf("parcel %d", i), Tokens: 2}}, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.client.Exists(ctx, s.termKey(key, "parcel"), s.convKeys(key)[kTerms]).Val(); n != 0 {
		t.Fatalf("%d index keys after three appends, want none (the append does not index)", n)
	}
	if got := mustPostings(t, s, key, []string{"parcel", "2"}); !slices.Equal(got[0], []int64{3, 2, 1}) || !slices.Equal(got[1], []int64{2}) {
		t.Errorf("postings = %v, want [3 2 1] [2]", got)
	}
	if got := s.client.HGet(ctx, s.metaKey(key), "ixseq").Val(); got != "3" {
		t.Errorf("ixseq after Postings = %q, want 3", got)
	}
	// The worker's catch-up: a fourth message, indexed by IndexPending.
	if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "parcel 4", Tokens: 2}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.IndexPending(ctx, key); err != nil {
		t.Fatal(err)
	}
	if got := s.client.ZCard(ctx, s.termKey(key, "parcel")).Val(); got != 4 {
		t.Errorf("postings of parcel after IndexPending = %d, want 4", got)
	}
	if err := s.IndexPending(ctx, chatmem.Key{Tenant: "acme", ID: "missing"}); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("IndexPending(missing) = %v, want ErrNotFound", err)
	}
}

// TestMessagesAtRuns checks MessagesAt over several runs of consecutive
// seqs, unsorted, with a seq past the end.
func TestMessagesAtRuns(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "acme", ID: "runs"}
	var msgs []chatmem.Message
	for i := 1; i <= 30; i++ {
		msgs = append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("m%d", i), Tokens: 1})
	}
	if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	seqs := []int64{30, 31, 3, 4, 5, 29, 10, 12, 11, 1}
	got, err := s.MessagesAt(ctx, key, seqs)
	if err != nil {
		t.Fatal(err)
	}
	var gotSeqs []int64
	for _, m := range got {
		gotSeqs = append(gotSeqs, m.Seq)
		if m.Content != fmt.Sprintf("m%d", m.Seq) {
			t.Errorf("message %d has content %q", m.Seq, m.Content)
		}
	}
	if want := []int64{1, 3, 4, 5, 10, 11, 12, 29, 30}; !slices.Equal(gotSeqs, want) {
		t.Errorf("MessagesAt(%v) seqs = %v, want %v", seqs, gotSeqs, want)
	}
}

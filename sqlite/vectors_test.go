package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storetest"
)

// TestVectorsPlan checks that both vector statements search the primary
// key's index: the search reads one range of it, the span.
func TestVectorsPlan(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "plan.db"))
	for q, want := range map[string]string{
		selectVectors: "SEARCH message_vectors USING INDEX sqlite_autoindex_message_vectors_1 (conv=? AND model=? AND seq>? AND seq<?)",
		upsertVector:  "",
	} {
		plan := explain(t, s.r.db, q)
		t.Logf("%s\n%s", oneLine(q), plan)
		if strings.Contains(plan, "SCAN") || strings.Contains(plan, "TEMP B-TREE") || !strings.Contains(plan, want) {
			t.Errorf("query %s: plan is not %q:\n%s", oneLine(q), want, plan)
		}
	}
}

// The conformance suite sees that a conversation's vectors are gone once
// it ends; here, that no row is left behind either.
func TestVectorsRowsDeleted(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vectors.db"))
	ctx := t.Context()
	count := func() int {
		t.Helper()
		var n int
		if err := s.r.db.QueryRowContext(ctx, "SELECT count(*) FROM message_vectors").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	r := rand.New(rand.NewPCG(1, 2))
	two := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello", Tokens: 1}, {Role: chatmem.RoleAssistant, Content: "hi", Tokens: 1}}
	now := time.Now()
	var expires time.Time
	for id, opts := range map[string]chatmem.AppendOptions{
		"deleted":   {},
		"swept":     {TTL: 300 * time.Millisecond},
		"purged":    {Now: now.Add(-48 * time.Hour)},
		"restarted": {TTL: 300 * time.Millisecond},
	} {
		key := chatmem.Key{Tenant: "t", ID: id}
		res, err := s.Append(ctx, key, two, opts)
		if err != nil {
			t.Fatal(err)
		}
		if opts.TTL > 0 && res.Conversation.ExpiresAt.After(expires) {
			expires = res.Conversation.ExpiresAt
		}
		storetest.PutRandomVectors(t, s, key, "m1", 2, 4, r)
		storetest.PutRandomVectors(t, s, key, "m2", 2, 3, r)
	}
	if n := count(); n != 16 {
		t.Fatalf("%d vector rows, want 16", n)
	}
	if err := s.Delete(ctx, chatmem.Key{Tenant: "t", ID: "deleted"}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 12 {
		t.Errorf("after Delete: %d vector rows, want 12", n)
	}
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	// The append to an expired conversation starts it afresh.
	if _, err := s.Append(ctx, chatmem.Key{Tenant: "t", ID: "restarted"}, two, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 8 {
		t.Errorf("after restarting an expired conversation: %d vector rows, want 8", n)
	}
	if n, err := s.Sweep(ctx, time.Now()); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1, nil", n, err)
	}
	if n := count(); n != 4 {
		t.Errorf("after Sweep: %d vector rows, want 4", n)
	}
	if n, err := s.PurgeInactive(ctx, "t", now.Add(-24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("PurgeInactive = %d, %v; want 1, nil", n, err)
	}
	if n := count(); n != 0 {
		t.Errorf("after PurgeInactive: %d vector rows, want 0", n)
	}
}

// BenchmarkNearestVectors searches a span of 4096 messages with 256-dimension
// vectors, limit 32, at the end of conversations of 4096 and 100,000
// messages: the time should follow the span, not the history.
func BenchmarkNearestVectors(b *testing.B) {
	const span, dims, limit = 4096, 256, 32
	sizes := []int{4096, 100000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	r := rand.New(rand.NewPCG(5, 6))
	query := storetest.RandomVectors(r, 1, dims)[0]
	vocab := benchVocabulary(1000)
	for _, n := range sizes {
		key := chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("vectors-%d", n)}
		start := time.Now()
		fillText(b, s, key, n, vocab, 7)
		storetest.PutRandomVectors(b, s, key, "bench:256", n, dims, r)
		b.Logf("fill: %d messages and vectors in %v", n, time.Since(start).Round(time.Millisecond))
		b.Run(fmt.Sprintf("span=%d/dims=%d/messages=%d", span, dims, n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				hits, err := s.NearestVectors(context.Background(), key, "bench:256", query, int64(n+1), span, limit)
				if err != nil {
					b.Fatal(err)
				}
				if len(hits) != limit {
					b.Fatalf("%d hits, want %d", len(hits), limit)
				}
			}
		})
	}
}

package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/storetest"
)

// The conformance suite sees that a conversation's vectors are gone once
// it ends; here, that no row is left behind either, under a number no
// conversation has any more.
func TestVectorsRowsDeleted(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema)
	ctx := t.Context()
	admin := testenv.PostgresAdmin(t)
	count := func() int {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "message_vectors"}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	r := rand.New(rand.NewPCG(1, 2))
	two := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello", Tokens: 1}, {Role: chatmem.RoleAssistant, Content: "hi", Tokens: 1}}
	now := time.Now()
	keys := map[string]chatmem.AppendOptions{
		"deleted": {},
		"swept":   {TTL: 300 * time.Millisecond},
		"purged":  {Now: now.Add(-48 * time.Hour)},
	}
	var expires time.Time
	for id, opts := range keys {
		key := chatmem.Key{Tenant: "t", ID: id}
		res, err := s.Append(ctx, key, two, opts)
		if err != nil {
			t.Fatal(err)
		}
		if opts.TTL > 0 {
			expires = res.Conversation.ExpiresAt
		}
		storetest.PutRandomVectors(t, s, key, "m1", 2, 4, r)
		storetest.PutRandomVectors(t, s, key, "m2", 2, 3, r)
	}
	if n := count(); n != 12 {
		t.Fatalf("%d vector rows, want 12", n)
	}
	if err := s.Delete(ctx, chatmem.Key{Tenant: "t", ID: "deleted"}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 8 {
		t.Errorf("after Delete: %d vector rows, want 8", n)
	}
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
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

// TestNearestVectorsPlan checks that NearestVectors reads the span with the
// primary key of message_vectors, with custom and generic plans alike: no
// sequential scan of the table, whatever the length of the history.
func TestNearestVectorsPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 20,000 messages")
	}
	schema := newSchema(t)
	s := open(t, schema)
	big := chatmem.Key{Tenant: "plan", ID: "big"}
	small := chatmem.Key{Tenant: "plan", ID: "small"}
	bulkFill(t, s, big, 20000, newZipfText(1))
	bulkFill(t, s, small, 100, newZipfText(2))
	r := rand.New(rand.NewPCG(3, 4))
	storetest.PutRandomVectors(t, s, big, "m", 20000, 8, r)
	storetest.PutRandomVectors(t, s, small, "m", 100, 8, r)
	storetest.PutRandomVectors(t, s, big, "other", 2000, 8, r)
	pool := testenv.PostgresAdmin(t)
	if _, err := pool.Exec(t.Context(), "ANALYZE "+schema+".message_vectors, "+schema+".conversations"); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := explain(t, pool, postgres.NearestVectorsSQL(schema), "'plan', 'big', now(), 'm', 15000, 15512, 32", mode)
		if testing.Verbose() {
			t.Logf("NearestVectors, %s:\n%s", mode, plan)
		}
		if !strings.Contains(plan, "message_vectors_pkey") || strings.Contains(plan, "Seq Scan on message_vectors") {
			t.Errorf("NearestVectors plan with %s is not a range of the primary key:\n%s", mode, plan)
		}
		if !strings.Contains(plan, "rows=512 ") {
			t.Errorf("NearestVectors plan with %s does not read the 512 rows of the span:\n%s", mode, plan)
		}
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
	s := open(b, newSchema(b))
	r := rand.New(rand.NewPCG(5, 6))
	query := storetest.RandomVectors(r, 1, dims)[0]
	for _, n := range sizes {
		key := chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("vectors-%d", n)}
		start := time.Now()
		bulkFill(b, s, key, n, newZipfText(7))
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

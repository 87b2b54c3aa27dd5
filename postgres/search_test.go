package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
)

// TestPostingsPlan checks that Postings reads each term with a backward
// scan of message_terms' primary key under a Limit, and MessagesAt with
// probes of messages' primary key, on a large conversation and with custom
// and generic plans alike: no sequential scan of either table, no bitmap of
// all matches, and for Postings no sort. (MessagesAt sorts the rows it
// found; the conversations table, two rows here, may be read whole.)
func TestPostingsPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 20,000 messages")
	}
	schema := newSchema(t)
	s := open(t, schema)
	z := newZipfText(1)
	key := chatmem.Key{Tenant: "plan", ID: "big"}
	fillText(t, s, key, 20000, z)
	fillText(t, s, chatmem.Key{Tenant: "plan", ID: "small"}, 100, z)
	pool, terms := analyzeForPlans(t, schema, z)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := explain(t, pool, postgres.PostingsSQL(schema), fmt.Sprintf("'plan', 'big', now(), %s, 15000, 256", terms), mode)
		if testing.Verbose() {
			t.Logf("Postings, %s:\n%s", mode, plan)
		}
		if !strings.Contains(plan, "Scan Backward using message_terms_pkey") ||
			strings.Contains(plan, "Seq Scan on message_terms") || strings.Contains(plan, "Bitmap") || strings.Contains(plan, "Sort") {
			t.Errorf("Postings plan with %s is not a backward index scan per term:\n%s", mode, plan)
		}
		plan = explain(t, pool, postgres.MessagesAtSQL(schema), "'plan', 'big', now(), ARRAY[5, 900, 17000]::bigint[]", mode)
		if testing.Verbose() {
			t.Logf("MessagesAt, %s:\n%s", mode, plan)
		}
		if !strings.Contains(plan, "Index Scan using messages_pkey") || strings.Contains(plan, "Seq Scan on messages") {
			t.Errorf("MessagesAt plan with %s is not primary key probes:\n%s", mode, plan)
		}
	}
}

// explain returns EXPLAIN ANALYZE of sql run with the arguments args (SQL
// literals), prepared on one connection under plan_cache_mode mode.
func explain(t *testing.T, pool *pgxpool.Pool, sql, args, mode string) string {
	t.Helper()
	ctx := t.Context()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "RESET plan_cache_mode; DEALLOCATE explained")
	if _, err := conn.Exec(ctx, "PREPARE explained AS "+sql); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE explained("+args+")")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestBackfill turns a schema back into one from before migration 0003
// (no message_terms, the migration not applied) and opens it: the
// migration lists the conversations and Open indexes their messages, the
// same postings the appends wrote. Then it interrupts a backfill halfway
// and opens the schema from several processes at once: they finish it
// together.
func TestBackfill(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema)
	ctx := t.Context()
	admin := testenv.PostgresAdmin(t)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := admin.Exec(ctx, strings.ReplaceAll(sql, "{s}", schema), args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	z := newZipfText(2)
	big := chatmem.Key{Tenant: "bf", ID: "big"}
	fillText(t, s, big, 2500, z) // three backfill batches
	small := chatmem.Key{Tenant: "bf", ID: "small"}
	if _, err := s.Append(ctx, small, []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "You track parcels.", Tokens: 4},
		{Role: chatmem.RoleUser, Content: "Where is parcel SE-10423?", Tokens: 6},
		{Role: chatmem.RoleAssistant, Tokens: 9, ToolCalls: []chatmem.ToolCall{{ID: "c1", Type: "function",
			Function: chatmem.FunctionCall{Name: "track_parcel", Arguments: `{"id":"SE-10423"}`}}}},
		{Role: chatmem.RoleTool, ToolCallID: "c1", Content: `{"city":"東京"}`, Tokens: 5},
	}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	other := chatmem.Key{Tenant: "bf2", ID: "big"}
	fillText(t, s, other, 30, z)
	// Appends do not index (see IndexPending): the worker would have.
	for _, key := range []chatmem.Key{big, small, other} {
		if err := s.IndexPending(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	indexed := postingRows(t, admin, schema)
	if len(indexed) < 2500 {
		t.Fatalf("message_terms has %d rows after the appends, want more", len(indexed))
	}

	exec(`DROP TABLE {s}.message_terms, {s}.terms_backfill; ALTER TABLE {s}.conversations DROP COLUMN num;
		DELETE FROM {s}.schema_migrations WHERE version = 3`)
	s2 := open(t, schema)
	if got := postingRows(t, admin, schema); !slices.Equal(got, indexed) {
		t.Fatalf("after the backfill message_terms has %d rows, want the appends' %d", len(got), len(indexed))
	}
	checkPostings(t, s2, big, z)

	// An interrupted backfill: big's first 1000 messages indexed; a
	// conversation deleted since it was listed; one whose postings exist.
	exec(`DELETE FROM {s}.message_terms WHERE seq > 1000
		AND conv = (SELECT num FROM {s}.conversations WHERE tenant = 'bf' AND id = 'big')`)
	exec(`INSERT INTO {s}.terms_backfill VALUES ('bf', 'big', 1000, 2500), ('bf', 'deleted', 0, 50), ('bf', 'small', 0, 4)`)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			st, err := postgres.Open(ctx, testenv.PostgresURL(), postgres.Options{Schema: schema})
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
				return
			}
			st.Close()
		})
	}
	wg.Wait()
	if got := postingRows(t, admin, schema); !slices.Equal(got, indexed) {
		t.Errorf("after the resumed backfill message_terms has %d rows, want the appends' %d", len(got), len(indexed))
	}
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".terms_backfill").Scan(&left); err != nil || left != 0 {
		t.Errorf("terms_backfill has %d rows (%v), want none", left, err)
	}
}

// postingRows returns every row of message_terms as "tenant/id term seq",
// in order.
func postingRows(t *testing.T, pool *pgxpool.Pool, schema string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), strings.ReplaceAll(`
		SELECT c.tenant || '/' || c.id || ' ' || x.term || ' ' || x.seq
		FROM {s}.message_terms x LEFT JOIN {s}.conversations c ON c.num = x.conv
		ORDER BY 1`, "{s}", schema))
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPostings compares Postings of common and rare terms with the
// postings found by running chatmem.IndexTerms over the whole history.
func checkPostings(t testing.TB, s *postgres.Store, key chatmem.Key, z *zipfText) {
	t.Helper()
	msgs, err := s.Range(t.Context(), key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	terms := []string{z.term(0), z.term(10), z.term(200), z.term(3000), "absent"}
	for _, before := range []int64{int64(len(msgs)) + 1, 1234, 2} {
		for _, limit := range []int{1, 7, 256} {
			got, err := s.Postings(t.Context(), key, terms, before, limit)
			if err != nil {
				t.Fatal(err)
			}
			for i, term := range terms {
				var want []int64
				for j := len(msgs) - 1; j >= 0 && len(want) < limit; j-- {
					if m := msgs[j]; m.Seq < before && slices.Contains(chatmem.IndexTerms(m), term) {
						want = append(want, m.Seq)
					}
				}
				if !slices.Equal(got[i], want) {
					t.Errorf("Postings(%q, before %d, limit %d) = %v, want %v", term, before, limit, got[i], want)
				}
			}
		}
	}
}

// TestPostingsRemoved checks that the rows of message_terms go with their
// conversation, whichever way it ends, and that terms text cannot hold are
// answered, with nothing.
func TestPostingsRemoved(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema)
	ctx := t.Context()
	admin := testenv.PostgresAdmin(t)
	nums := make(map[chatmem.Key]int64) // conversations.num, which names them in message_terms
	count := func(key chatmem.Key) int {
		t.Helper()
		if _, ok := nums[key]; !ok {
			var num int64
			if err := admin.QueryRow(ctx, "SELECT num FROM "+schema+".conversations WHERE tenant = $1 AND id = $2",
				key.Tenant, key.ID).Scan(&num); err != nil {
				t.Fatal(err)
			}
			nums[key] = num
		}
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schema+".message_terms WHERE conv = $1", nums[key]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	long := time.Now().Add(-48 * time.Hour)
	// then sees the store as it was at long, so that the conversations
	// expired since can be indexed as they would have been then.
	then, err := postgres.Open(ctx, testenv.PostgresURL(), postgres.Options{Schema: schema, Now: func() time.Time { return long }})
	if err != nil {
		t.Fatal(err)
	}
	defer then.Close()
	add := func(key chatmem.Key, text string, opts chatmem.AppendOptions) {
		t.Helper()
		if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text, Tokens: 3}}, opts); err != nil {
			t.Fatal(err)
		}
		// Appends do not index (see IndexPending): the worker would have.
		indexer := s
		if !opts.Now.IsZero() {
			indexer = then
		}
		if err := indexer.IndexPending(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	deleted := chatmem.Key{Tenant: "rm", ID: "deleted"}
	swept := chatmem.Key{Tenant: "rm", ID: "swept"}
	purged := chatmem.Key{Tenant: "rm2", ID: "purged"}
	restarted := chatmem.Key{Tenant: "rm", ID: "restarted"}
	kept := chatmem.Key{Tenant: "rm", ID: "kept"}
	add(deleted, "zebra crossing ahead", chatmem.AppendOptions{})
	add(swept, "zebra crossing ahead", chatmem.AppendOptions{Now: long, TTL: time.Hour})
	add(purged, "zebra crossing ahead", chatmem.AppendOptions{Now: long})
	add(restarted, "zebra crossing ahead", chatmem.AppendOptions{Now: long, TTL: time.Hour})
	add(kept, "zebra crossing ahead", chatmem.AppendOptions{})
	for _, key := range []chatmem.Key{deleted, swept, purged, restarted, kept} {
		if n := count(key); n != 3 {
			t.Fatalf("message_terms has %d rows for %s, %q; want 3", n, key, "zebra crossing ahead")
		}
	}

	if err := s.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	add(restarted, "fresh start", chatmem.AppendOptions{}) // expired: starts afresh, without a TTL
	if _, err := s.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PurgeInactive(ctx, "rm2", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[chatmem.Key]int{deleted: 0, swept: 0, purged: 0, restarted: 2, kept: 3} {
		if got := count(key); got != want {
			t.Errorf("message_terms has %d rows for %s, want %d", got, key, want)
		}
	}

	got, err := s.Postings(ctx, kept, []string{"zebra", "ze\x00bra", "\xff", "cross"}, 10, 5)
	if err != nil || len(got) != 4 || len(got[1]) != 0 || len(got[2]) != 0 || !slices.Equal(got[3], []int64{1}) {
		t.Errorf("Postings(terms with NUL and invalid UTF-8) = %v, %v; want [[1] [] [] [1]], nil", got, err)
	}
}

// analyzeForPlans gives the schema's tables their statistics (as
// autovacuum would) and returns the admin pool and the plan tests' query:
// an SQL array of z's terms of ranks 1, 6, 51, 501 and 4001.
func analyzeForPlans(t *testing.T, schema string, z *zipfText) (*pgxpool.Pool, string) {
	pool := testenv.PostgresAdmin(t)
	if _, err := pool.Exec(t.Context(), "ANALYZE "+schema+".messages, "+schema+".message_terms, "+schema+".conversations"); err != nil {
		t.Fatal(err)
	}
	var quoted []string
	for _, r := range []int{0, 5, 50, 500, 4000} {
		quoted = append(quoted, "'"+z.term(r)+"'")
	}
	return pool, "ARRAY[" + strings.Join(quoted, ", ") + "]"
}

package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/storetest"
)

// newSchema returns a fresh schema name and drops the schema when tb ends.
func newSchema(tb testing.TB) string {
	tb.Helper()
	return testenv.PostgresSchema(tb, "chatmem_test_")
}

// open opens a store over schema and closes it when tb ends (before the
// schema is dropped, as cleanups run last-registered first).
func open(tb testing.TB, schema string) *postgres.Store {
	tb.Helper()
	s, err := postgres.Open(context.Background(), testenv.PostgresURL(), postgres.Options{Schema: schema})
	if err != nil {
		tb.Fatalf("Open(schema %s): %v", schema, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) chatmem.Store { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, s chatmem.Store) chatmem.Store {
			return open(t, s.(*postgres.Store).Schema())
		},
		Dump:       dumpSchema,
		EraseSteps: func(s chatmem.Store, step func()) { postgres.SetEraseStep(s.(*postgres.Store), step) },
	})
}

// dumpSchema returns every row of every table of the store's schema, each
// value as it is (bytea raw, everything else printed).
func dumpSchema(t *testing.T, s chatmem.Store) []byte {
	t.Helper()
	ctx := t.Context()
	schema := s.(*postgres.Store).Schema()
	conn, err := pgx.Connect(ctx, testenv.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, table := range tables {
		rows, err := conn.Query(ctx, "SELECT * FROM "+pgx.Identifier{schema, table}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, table...)
			for _, v := range vals {
				out = append(out, ' ')
				if b, ok := v.([]byte); ok {
					out = append(out, b...)
				} else {
					out = fmt.Append(out, v)
				}
			}
			out = append(out, '\n')
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestConcurrentOpen opens one new schema from several pools at once, as
// several processes starting together would: the migration lock makes them
// all succeed, and the migrations are applied once.
func TestConcurrentOpen(t *testing.T) {
	schema := newSchema(t)
	const n = 6
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = postgres.Open(t.Context(), testenv.PostgresURL(), postgres.Options{Schema: schema})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	var applied int
	if err := testenv.PostgresAdmin(t).QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if want := postgres.MigrationCount(); applied != want {
		t.Errorf("schema_migrations has %d rows, want %d (each migration applied once)", applied, want)
	}
	// Every store works over the shared schema.
	key := chatmem.Key{Tenant: "t", ID: "c"}
	for i, s := range stores {
		res, err := s.Append(t.Context(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}, chatmem.AppendOptions{})
		if err != nil {
			t.Fatalf("store %d: Append: %v", i, err)
		}
		if got := res.Messages[0].Seq; got != int64(i+1) {
			t.Errorf("store %d: Append seq = %d, want %d", i, got, i+1)
		}
	}
}

// TestGenerationMicroseconds checks PutSummaryOf and SetFactsOf against
// timestamptz's microseconds: the CreatedAt Append returns (truncated to
// the microsecond) matches, through a second store too, while the
// nanosecond time the append was made at, which PostgreSQL would truncate
// to the same microsecond, matches nothing.
func TestGenerationMicroseconds(t *testing.T) {
	ctx := t.Context()
	s := open(t, newSchema(t))
	s2 := open(t, s.Schema())
	key := chatmem.Key{Tenant: "t", ID: "c"}
	at := time.Date(2025, 6, 7, 8, 9, 10, 123456789, time.UTC)
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}, {Role: chatmem.RoleAssistant, Content: "hello", Tokens: 1}}
	res, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{Now: at})
	if err != nil {
		t.Fatal(err)
	}
	created := res.Conversation.CreatedAt
	if want := at.Truncate(time.Microsecond); !created.Equal(want) {
		t.Fatalf("Append(Now %v).Conversation.CreatedAt = %v, want %v", at, created, want)
	}
	sum := chatmem.Summary{Text: "greetings", CoversSeq: 1, Summarizer: "offline", CreatedAt: at}
	for _, other := range []time.Time{at, created.Add(time.Nanosecond), created.Add(-time.Nanosecond)} {
		if err := s.PutSummaryOf(ctx, key, other, sum, 0); !errors.Is(err, chatmem.ErrNotFound) {
			t.Errorf("PutSummaryOf(created %v) with CreatedAt %v error = %v, want ErrNotFound", other, created, err)
		}
		if err := s.SetFactsOf(ctx, key, other, []chatmem.Fact{{Key: "name", Value: "Ada", SetBy: "app", Confidence: 1}}); !errors.Is(err, chatmem.ErrNotFound) {
			t.Errorf("SetFactsOf(created %v) with CreatedAt %v error = %v, want ErrNotFound", other, created, err)
		}
	}
	if _, err := s.Summary(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Summary after refused writes error = %v, want ErrNotFound", err)
	}
	conv, err := s2.Conversation(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.PutSummaryOf(ctx, key, conv.CreatedAt, sum, 0); err != nil {
		t.Errorf("PutSummaryOf(CreatedAt %v from Conversation) through a second store error = %v, want nil", conv.CreatedAt, err)
	}
	if err := s.SetFactsOf(ctx, key, created, []chatmem.Fact{{Key: "name", Value: "Ada", SetBy: "app", Confidence: 1}}); err != nil {
		t.Errorf("SetFactsOf(CreatedAt %v from Append) error = %v, want nil", created, err)
	}
	if facts, err := s2.Facts(ctx, key); err != nil || len(facts) != 1 {
		t.Errorf("Facts = %v, %v; want the one fact", facts, err)
	}
}

// TestOpenErrors checks the errors of Open: a bad schema name is invalid, an
// unreachable server unavailable, and a cancelled context cancelled.
func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	for _, schema := range []string{"Upper", "1abc", "a-b", `a"b`, strings.Repeat("a", 64)} {
		_, err := postgres.Open(ctx, testenv.PostgresURL(), postgres.Options{Schema: schema})
		if !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Open(schema %q) error = %v, want ErrInvalid", schema, err)
		}
	}
	_, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2", postgres.Options{})
	if !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Open(closed port) error = %v, want ErrUnavailable", err)
	}
	_, err = postgres.Open(ctx, "not a url ://", postgres.Options{})
	if !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Open(bad URL) error = %v, want ErrInvalid", err)
	}

	s := open(t, newSchema(t))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	key := chatmem.Key{Tenant: "t", ID: "c"}
	if _, err := s.Tail(cancelled, key, chatmem.TailQuery{Tokens: 10}); !errors.Is(err, context.Canceled) {
		t.Errorf("Tail(cancelled) error = %v, want context.Canceled", err)
	}
	if err := s.Ping(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping(cancelled) error = %v, want context.Canceled", err)
	}
	s.Close()
	if _, err := s.Conversation(ctx, key); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Conversation after Close error = %v, want ErrUnavailable", err)
	}
}

// TestNew checks that a store over a caller's pool leaves the pool open.
func TestNew(t *testing.T) {
	schema := newSchema(t)
	pool, err := pgxpool.New(t.Context(), testenv.PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := postgres.New(t.Context(), pool, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.Close()
	if err := pool.Ping(t.Context()); err != nil {
		t.Errorf("pool after Store.Close: Ping = %v, want nil (the caller owns it)", err)
	}
}

// TestTailPlan checks that the tail read is index scans only on a large
// conversation, with custom and generic plans alike (pgx prepares the
// statement, and PostgreSQL switches to a generic plan after five runs).
func TestTailPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 50,000 messages")
	}
	schema := newSchema(t)
	s := open(t, schema)
	key := chatmem.Key{Tenant: "plan", ID: "big"}
	fill(t, s, key, 50000)
	// A second conversation, so the table is not all one key.
	fill(t, s, chatmem.Key{Tenant: "plan", ID: "small"}, 100)
	pool := testenv.PostgresAdmin(t)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, "ANALYZE "+pgx.Identifier{schema, "messages"}.Sanitize()); err != nil {
		t.Fatal(err)
	}

	for _, q := range []chatmem.TailQuery{{Tokens: 4000}, {Turns: 3}, {Tokens: 4000, Turns: 50}} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan := explainTail(t, pool, schema, key, q, mode)
			if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") || !strings.Contains(plan, "messages_pkey") {
				t.Errorf("Tail(%+v) plan with %s is not index range reads:\n%s", q, mode, plan)
			}
			if testing.Verbose() {
				t.Logf("Tail(%+v), %s:\n%s", q, mode, plan)
			}
		}
	}
}

// TestConversationSincePlan checks that ConversationSince's one statement
// is a probe of conversations' primary key and one range of messages'
// primary key under a Limit, on a large conversation and with custom and
// generic plans alike: no sequential scan, no sort.
func TestConversationSincePlan(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 20,000 messages")
	}
	schema := newSchema(t)
	s := open(t, schema)
	fill(t, s, chatmem.Key{Tenant: "plan", ID: "big"}, 20000)
	fill(t, s, chatmem.Key{Tenant: "plan", ID: "small"}, 100)
	pool := testenv.PostgresAdmin(t)
	// More conversations, without messages, so that reading the table
	// whole is not the cheapest way to find one.
	if _, err := pool.Exec(t.Context(), "INSERT INTO "+schema+".conversations (tenant, id, created_at, updated_at) "+
		"SELECT 'other', 'c' || g, now(), now() FROM generate_series(1, 5000) AS g"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), "ANALYZE "+schema+".messages, "+schema+".conversations"); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{"'plan', 'big', now(), 19990, 256", "'plan', 'big', now(), 100, 256", "'plan', 'big', now(), 20000, 256"} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan := explain(t, pool, postgres.ConversationSinceSQL(schema), args, mode)
			if testing.Verbose() {
				t.Logf("ConversationSince(%s), %s:\n%s", args, mode, plan)
			}
			if !strings.Contains(plan, "using conversations_pkey") || !strings.Contains(plan, "Index Scan using messages_pkey") ||
				!strings.Contains(plan, "Limit") || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
				t.Errorf("ConversationSince(%s) plan with %s is not a primary-key probe and one primary-key range:\n%s", args, mode, plan)
			}
		}
	}
}

// explainTail returns EXPLAIN ANALYZE of the store's tail statement for q,
// prepared on one connection under plan_cache_mode mode.
func explainTail(t *testing.T, pool *pgxpool.Pool, schema string, key chatmem.Key, q chatmem.TailQuery, mode string) string {
	t.Helper()
	ctx := t.Context()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	sql := postgres.TailSQL(schema)
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "RESET plan_cache_mode; DEALLOCATE tail_plan")
	if _, err := conn.Exec(ctx, "PREPARE tail_plan AS "+sql); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE tail_plan('%s', '%s', now(), %d, %d)",
		key.Tenant, key.ID, q.Tokens, q.Turns))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// fill appends n alternating user and assistant messages of 20 tokens each,
// in batches of 1000, as storetest's fill does.
func fill(tb testing.TB, s chatmem.Store, key chatmem.Key, n int) {
	tb.Helper()
	for done := 0; done < n; {
		msgs := make([]chatmem.Message, min(1000, n-done))
		for i := range msgs {
			role := chatmem.RoleUser
			if (done+i)%2 == 1 {
				role = chatmem.RoleAssistant
			}
			msgs[i] = chatmem.Message{Role: role, Content: fmt.Sprintf("message %d", done+i+1), Tokens: 20}
		}
		if _, err := s.Append(context.Background(), key, msgs, chatmem.AppendOptions{}); err != nil {
			tb.Fatalf("fill %s at %d: %v", key, done, err)
		}
		done += len(msgs)
	}
}

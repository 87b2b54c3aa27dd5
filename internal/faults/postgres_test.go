package faults

import (
	"context"
	"crypto/rand"
	mrand "math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/tokenizer"
)

const (
	pgTerminations = 15
	pgClients      = 4
)

// TestPostgresTerminate kills the store's connections with
// pg_terminate_backend, pgTerminations times, while pgClients clients
// append to two conversations, retrying failed appends under the same
// IdempotencyKey. Every failure must wrap chatmem.ErrUnavailable, every
// client must append again after each round of kills, and at the end
// every acknowledged append must be stored once, densely numbered, no
// sequence number repeated. The store's connections carry an
// application_name of their own, so no other connection is killed.
func TestPostgresTerminate(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	admin := testenv.PostgresAdmin(t)
	schema := testenv.PostgresSchema(t, "chatmem_faults_")
	seed := seedFromClock(t)
	rng := mrand.New(mrand.NewPCG(seed, 0))
	app := "chatmem_faults_" + strings.ToLower(rand.Text()[:10])
	store, err := postgres.Open(ctx, withApplicationName(testenv.PostgresURL(), app), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // before the schema is dropped
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	keys := keysOf(2)
	cl := startClients(t, ctx, mem, keys, pgClients, seed)

	faults, killed := 0, 0
	for i := range pgTerminations {
		sleep(ctx, 50*time.Millisecond+time.Duration(rng.Int64N(int64(250*time.Millisecond))))
		failed := cl.failed.Load()
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1`, app).Scan(&n)
		if err != nil {
			t.Fatalf("terminate %d: %v", i+1, err)
		}
		if n > 0 {
			faults++
			killed += n
		}
		before := cl.ackedEach()
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		recovered := cl.waitProgress(wctx, before)
		cancel()
		if !recovered {
			t.Fatalf("terminate %d: not every client appended again within 15s (acknowledged %v, then %v)", i+1, before, cl.ackedEach())
		}
		t.Logf("terminate %d: %d connections killed; %d failed attempts, all ErrUnavailable; every client appended again", i+1, n, cl.failed.Load()-failed)
	}
	cl.close()
	if ctx.Err() != nil {
		t.Fatal(ctx.Err())
	}
	found := verify(t, ctx, store, keys, &cl.led, verifyOptions{sent: cl.sentTexts()})
	t.Logf("the first error a client saw: %v", cl.sample.Load())
	t.Logf("%d connections killed in all; %d failed attempts; %d retries replayed an append whose reply was lost", killed, cl.failed.Load(), cl.replay.Load())
	report(t, "postgres-terminate", faults, cl.led.len(), found, len(keys))
	if faults < pgTerminations/2 {
		t.Errorf("only %d of %d rounds found a connection of the store to kill", faults, pgTerminations)
	}
	if cl.failed.Load() == 0 {
		t.Errorf("no client saw an error: the kills did not reach the store")
	}
}

// withApplicationName returns the connection string raw (a URL or
// key=value pairs) with application_name set to app.
func withApplicationName(raw, app string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return raw + " application_name=" + app
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

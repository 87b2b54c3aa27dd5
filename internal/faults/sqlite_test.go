package faults

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver of checkFile's own connection

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

const (
	sqliteKills         = 20
	sqliteConversations = 3
	sqliteWriters       = 2 // goroutines appending in the writer process
)

// TestSQLiteKill kills a process appending to a SQLite file with SIGKILL at
// random points, sqliteKills times, and checks the file after each kill:
// intact, and holding every append the process acknowledged, in order,
// numbered densely. Every fourth kill lands anywhere from the start of the
// process, so it may interrupt sqlite.Open (recovery, migrations) too.
func TestSQLiteKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	seed := seedFromClock(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(t.TempDir(), "chatmem.db")
	keys := keysOf(sqliteConversations)
	var led ledger
	handle := lineHandler(t, &led, nil)
	acked := func(line string) bool { return strings.HasPrefix(line, "ack ") }

	for round := range sqliteKills {
		h := startHelper(t, ctx, "sqlite-writer", dbEnv+"="+path,
			streamEnv+"="+fmt.Sprintf("r%02d", round), seedEnv+"="+strconv.FormatUint(seed+uint64(round), 10))
		before := led.len()
		if round%4 == 3 {
			h.consumeFor(ctx, time.Duration(rng.Int64N(int64(300*time.Millisecond))), handle)
		} else {
			// Kill while appends flow: the delay starts at the first ack,
			// so a slow start (-race, a busy machine) does not eat it.
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			ok := h.consume(wctx, handle, acked)
			cancel()
			if !ok {
				h.killAndDrain(handle)
				t.Fatalf("run %d: no append acknowledged within 15s: %s", round+1, h.stderr.String())
			}
			h.consumeFor(ctx, time.Duration(rng.Int64N(int64(300*time.Millisecond))), handle)
		}
		if err := h.killAndDrain(handle); err != nil {
			t.Fatalf("kill %d: %v", round+1, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("kill %d: %v", round+1, ctx.Err())
		}
		checkFile(t, ctx, path)
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatalf("after kill %d: Open: %v", round+1, err)
		}
		found := verify(t, ctx, s, keys, &led, verifyOptions{})
		var stored int64 // stored messages: with the acknowledged ones, those whose ack the kill cut off
		for _, key := range keys {
			if c, err := s.Conversation(ctx, key); err == nil {
				stored += c.LastSeq
			}
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		t.Logf("kill %d: %d appends acknowledged in this run; %d of %d found; %d messages stored, %d acknowledged",
			round+1, led.len()-before, found, led.len(), stored, led.messages())
		if t.Failed() {
			report(t, "sqlite-kill", round+1, led.len(), found, len(keys))
			t.FailNow()
		}
		if round == sqliteKills-1 {
			report(t, "sqlite-kill", sqliteKills, led.len(), found, len(keys))
		}
	}
}

// checkFile runs SQLite's own checks on the file at path, through a
// connection of its own: the first to open it after a crash, so it also
// recovers the WAL.
func checkFile(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	u := url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=busy_timeout(5000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []string
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	if len(got) != 1 || got[0] != "ok" {
		t.Errorf("PRAGMA integrity_check = %q, want [ok]", got)
	}
	rows, err = db.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		t.Fatalf("foreign_key_check: %v", err)
	}
	defer rows.Close()
	if rows.Next() {
		t.Errorf("PRAGMA foreign_key_check found rows that reference nothing")
	}
}

// sqliteWriter is the helper TestSQLiteKill kills: it opens the store at
// $CHATMEM_FAULTS_DB, prints "ready" and appends batches of one to three
// messages from sqliteWriters goroutines to random conversations until it
// is killed, printing an ack line after each Append returned nil.
func sqliteWriter() error {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, os.Getenv(dbEnv), sqlite.Options{})
	if err != nil {
		return err
	}
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		return err
	}
	seed, err := strconv.ParseUint(os.Getenv(seedEnv), 10, 64)
	if err != nil {
		return err
	}
	var out stdoutLines
	out.print("ready\n")
	keys := keysOf(sqliteConversations)
	errc := make(chan error, sqliteWriters)
	for w := range sqliteWriters {
		go func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			stream := fmt.Sprintf("%s-w%d", os.Getenv(streamEnv), w)
			for n := 0; ; n++ {
				key := keys[rng.IntN(len(keys))]
				res, err := mem.Append(ctx, key, batch(fmt.Sprintf("%s-%05d", stream, n), 1+rng.IntN(3)), chatmem.AppendOptions{})
				if err != nil {
					errc <- err
					return
				}
				out.print(ackLine(stream, key.ID, res.Messages))
			}
		}()
	}
	return <-errc
}

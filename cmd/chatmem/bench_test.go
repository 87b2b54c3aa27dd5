package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem/internal/loadtest"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/storetest"
)

// TestBenchTurnFloor runs chatmem bench --policy token_budget --json on
// each store for a small size and checks the turn's fields: Memory.Turn's
// p50, the store's raw floor's and a new process's first turn's, present
// and positive, the ratios their quotients, the existing fields kept; and
// the floor's list, table or file gone afterwards. The in-process store
// has the Go loop for its floor and no first turn (no other process can
// open it).
func TestBenchTurnFloor(t *testing.T) {
	dir := t.TempDir()
	pg, schema := postgresSchemaURL(t, "chatmem_bench_")
	o := testenv.RedisOptions(t)
	prefix := "cmbench-" + rand.Text()[:10]
	redisKeys := func() []string {
		c := goredis.NewClient(o)
		defer c.Close()
		keys, err := c.Keys(context.Background(), prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	t.Cleanup(func() {
		c := goredis.NewClient(o)
		defer c.Close()
		for _, k := range redisKeys() {
			c.Del(context.Background(), k)
		}
	})
	stores := []struct {
		url       string
		firstTurn bool
		leftOver  func() []string // what is left of the floor
	}{
		{"memory:", false, nil},
		{"sqlite:" + filepath.Join(dir, "bench.db"), true, func() []string {
			m, err := filepath.Glob(filepath.Join(dir, "*turn-floor*"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}},
		{testenv.RedisURL() + "?prefix=" + prefix, true, func() []string {
			var floors []string
			for _, k := range redisKeys() {
				if strings.Contains(k, "turn-floor") {
					floors = append(floors, k)
				}
			}
			return floors
		}},
		{pg, true, func() []string {
			rows, err := testenv.PostgresAdmin(t).Query(context.Background(),
				`SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_name LIKE 'turn_floor%'`, schema)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var tables []string
			for rows.Next() {
				var name string
				if err := rows.Scan(&name); err != nil {
					t.Fatal(err)
				}
				tables = append(tables, name)
			}
			return tables
		}},
	}
	for _, st := range stores {
		// 40 messages: the floors read back fewer than their 64 at first,
		// and 64 once the turns have added more.
		out, errOut, code := runSub(t, runBench, "--store", st.url, "--policy", "token_budget", "--budget", "4000",
			"--messages", "40", "--iterations", "30", "--json")
		if code != 0 {
			t.Fatalf("bench --store %s: exit %d: %s", st.url, code, errOut)
		}
		var r loadtest.BenchResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench --store %s: %v in %q", st.url, err, out)
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(out), &fields); err != nil {
			t.Fatal(err)
		}
		want := []string{"p50_us", "p99_us", "floor_p50_us", "floor_ratio", "turn_p50_us", "store_floor_p50_us", "turn_floor_ratio"}
		if st.firstTurn {
			want = append(want, "first_turn_p50_us", "first_turn_ratio")
		} else if _, ok := fields["first_turn_p50_us"]; ok {
			t.Errorf("bench --store %s: first_turn_p50_us in %s, want none for the in-process store", st.url, out)
		}
		for _, f := range want {
			if v, ok := fields[f].(float64); !ok || v <= 0 {
				t.Errorf("bench --store %s: %s = %v, want a positive number", st.url, f, fields[f])
			}
		}
		if r.Messages != 40 || r.Policy != "token_budget" || r.WindowMessages < 1 || r.P99us < r.P50us || r.FloorRatio != r.P50us/r.FloorP50us {
			t.Errorf("bench --store %s: %+v, want the existing fields as before", st.url, r)
		}
		if got, want := r.TurnFloorRatio, r.TurnP50us/r.StoreFloorP50us; got != want {
			t.Errorf("bench --store %s: turn_floor_ratio %v, want turn_p50_us / store_floor_p50_us = %v", st.url, got, want)
		}
		if got, want := r.FirstTurnRatio, r.FirstTurnP50us/r.TurnP50us; st.firstTurn && got != want {
			t.Errorf("bench --store %s: first_turn_ratio %v, want first_turn_p50_us / turn_p50_us = %v", st.url, got, want)
		}
		if st.leftOver != nil {
			if left := st.leftOver(); len(left) > 0 {
				t.Errorf("bench --store %s left its floor behind: %q", st.url, left)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bench.db")); err != nil {
		t.Errorf("the SQLite store's file: %v", err)
	}

	// The table has a column per field.
	out, errOut, code := runSub(t, runBench, "--store", "sqlite:"+filepath.Join(dir, "table.db"), "--messages", "100", "--iterations", "30")
	if code != 0 {
		t.Fatalf("bench (table): exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, col := range []string{"Memory.Turn p50 µs", "store floor p50 µs", "turn/floor", "first turn p50 µs", "first/turn"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("table header %q lacks %q", lines[0], col)
		}
	}
	if len(lines) != 2 || strings.Contains(lines[1], " - ") {
		t.Errorf("table = %q, want one row with every column measured", out)
	}
}

// TestBenchReplies runs chatmem bench --replies --json on each store for
// a small size and checks its structure: every way's count of turns, a
// window, every ratio finite and positive, the server's time where the
// store reports it (Redis always; PostgreSQL with pg_stat_statements)
// and never for the stores in the process. --replies takes token_budget
// only.
func TestBenchReplies(t *testing.T) {
	dir := t.TempDir()
	pg, _ := postgresSchemaURL(t, "chatmem_bench_")
	o := testenv.RedisOptions(t)
	prefix := "cmbench-" + rand.Text()[:10]
	t.Cleanup(func() {
		c := goredis.NewClient(o)
		defer c.Close()
		keys, _ := c.Keys(context.Background(), prefix+"*").Result()
		for _, k := range keys {
			c.Del(context.Background(), k)
		}
	})
	for _, st := range []struct {
		url    string
		server bool
	}{
		{"memory:", false},
		{"sqlite:" + filepath.Join(dir, "bench.db"), false},
		{testenv.RedisURL() + "?prefix=" + prefix, true},
		{pg, false}, // unless the server keeps pg_stat_statements: see below
	} {
		out, errOut, code := runSub(t, runBench, "--store", st.url, "--replies", "--messages", "60", "--iterations", "30", "--json")
		if code != 0 {
			t.Fatalf("bench --replies --store %s: exit %d: %s", st.url, code, errOut)
		}
		var r loadtest.ChatResult
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("bench --replies --store %s: %v in %q", st.url, err, out)
		}
		server := st.server || st.url == pg && !strings.Contains(errOut, "no server time")
		storetest.CheckChatResult(t, r, 60, 30, server)
		if r.Budget != 4000 || r.Store == "" {
			t.Errorf("bench --replies --store %s: %+v, want budget 4000 and the store's name", st.url, r)
		}
	}
	if _, errOut, code := runSub(t, runBench, "--store", "memory:", "--replies", "--policy", "last_turns", "--turns", "3"); code != 2 || !strings.Contains(errOut, "token_budget") {
		t.Errorf("bench --replies --policy last_turns: exit %d, %q; want 2 and a word on token_budget", code, errOut)
	}
}

// postgresSchemaURL returns the test server's URL with a fresh schema of
// prefix (dropped when t ends), and the schema.
func postgresSchemaURL(t *testing.T, prefix string) (url, schema string) {
	url, sep := testenv.PostgresURL(), "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	schema = testenv.PostgresSchema(t, prefix)
	return url + sep + "schema=" + schema, schema
}

package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkTurn is issue 18's turn on SQLite against its floor, and a new
// process's first turn against a steady one:
//
//	floor/n=N    the floor alone
//	vs-floor/n=N storetest.BenchmarkTurnFloor: Memory.Turn, Append +
//	             Context and the floor alternating in one loop, and every
//	             25th iteration a first turn through a store opened again
//	             on the file (Open: another process's connections,
//	             schema check and statements)
//
// The floor is the job done raw with the same driver and durability (WAL,
// synchronous=FULL) on a table of its own in another file: one
// transaction that INSERTs the message and SELECTs the newest 64 by
// primary key, committed. (storetest.BenchmarkTurn on SQLite, with and
// without the tail cache, is the root package's BenchmarkTurn.)
func BenchmarkTurn(b *testing.B) {
	sizes := []int{1000, 100000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	storetest.BenchmarkTurnVsFloor(b, sizes, opts, func(b *testing.B) *Store { return open(b, filepath.Join(b.TempDir(), "chatmem.db")) },
		func(b *testing.B, _ *Store, n int) storetest.TurnFloor {
			return sqlFloor(b, filepath.Join(b.TempDir(), "floor.db"), n)
		},
		func(b *testing.B, s *Store) chatmem.Store {
			s2, err := Open(b.Context(), s.path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s2
		})
}

// sqlFloor makes a table of messages in a database of its own at path,
// fills one conversation with n messages of the benchmark's size, and
// returns the floor of a turn on it.
func sqlFloor(b *testing.B, path string, n int) storetest.TurnFloor {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(ctx, `CREATE TABLE floor (conv INTEGER NOT NULL, seq INTEGER NOT NULL, role TEXT NOT NULL,
		content BLOB NOT NULL, tokens INTEGER NOT NULL, created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
		PRIMARY KEY (conv, seq)) WITHOUT ROWID`); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?)
		INSERT INTO floor (conv, seq, role, content, tokens)
		SELECT 1, n, CASE WHEN n % 2 = 1 THEN 'user' ELSE 'assistant' END, CAST(? AS BLOB), 52 FROM i`, n, strings.Repeat("x", 200)); err != nil {
		b.Fatal(err)
	}
	seq := n
	return func(ctx context.Context, i int, content string) error {
		seq++
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO floor (conv, seq, role, content, tokens) VALUES (1, ?, 'user', ?, ?)`,
			seq, []byte(content), len(content)/4); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT seq, role, content, tokens, created_at FROM floor WHERE conv = 1 ORDER BY seq DESC LIMIT 64`)
		if err != nil {
			return err
		}
		got := 0
		for rows.Next() {
			var (
				s, t    int64
				r, at   string
				content []byte
			)
			if err := rows.Scan(&s, &r, &content, &t, &at); err != nil {
				rows.Close()
				return err
			}
			got++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if got != 64 {
			return fmt.Errorf("floor read %d rows, want 64", got)
		}
		return tx.Commit()
	}
}

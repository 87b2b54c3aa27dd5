package httpapi

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver the sqlite store uses
)

// BenchmarkProxyFsyncFloor is the durability floor of a proxied turn on
// SQLite: the two commits the turn makes (its user message before the
// upstream call, its reply after), each one small INSERT in a transaction
// on a WAL file with synchronous=FULL, as the sqlite store opens it, and
// nothing else. Its p50 is the part of BenchmarkProxyHistory's and
// BenchmarkProxyOverhead's overhead that is the disk's.
func BenchmarkProxyFsyncFloor(b *testing.B) {
	path := filepath.Join(b.TempDir(), "floor.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)&_pragma=synchronous(full)&_pragma=wal_autocheckpoint(0)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE m (seq INTEGER PRIMARY KEY, content TEXT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	ins, err := db.Prepare(`INSERT INTO m (content) VALUES (?)`)
	if err != nil {
		b.Fatal(err)
	}
	defer ins.Close()
	commit := func(content string) {
		t, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := t.Stmt(ins).Exec(content); err != nil {
			b.Fatal(err)
		}
		if err := t.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	var times []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		commit(fmt.Sprintf("%s (%d)", benchUser, i))
		commit(fmt.Sprintf("%s (%d)", benchReply, i))
		times = append(times, time.Since(start))
		i++
		if i%1000 == 0 {
			if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
		}
	}
	slices.Sort(times)
	b.ReportMetric(µs(percentile(times, 50)), "two-commits-p50-µs")
	b.ReportMetric(µs(percentile(times, 90)), "two-commits-p90-µs")
}

package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"

	sqlitedriver "modernc.org/sqlite"
)

// Checkpoints. In WAL mode a commit appends the pages it changed to the
// -wal file; a checkpoint copies them back into the database file and
// fsyncs it, and once every page is copied the next write transaction
// starts the WAL over from its beginning. SQLite's automatic checkpoint
// runs in the connection that committed, right after its COMMIT, once the
// WAL holds 1,000 pages: here that connection is the committer's, whose
// writers (and the ones queued behind them) would wait for the copy and a
// second fsync. So the write connection runs with wal_autocheckpoint(0),
// and a goroutine of the store (the checkpointer) checkpoints on a
// connection of its own, on another core, while the committer goes on.
// The committer counts the pages its commits wrote to the WAL and wakes
// the checkpointer each walCheckpointPages of them; the checkpointer runs
// a PASSIVE checkpoint, which copies every page no reader still needs and
// waits for nobody. (Pages written on the write connection outside the
// committer, by the migrations at Open, are counted with the next
// commit's.) One checkpoint runs at a time in a process (checkpointer.mu):
// SQLite does not wait for the checkpoint lock, so a checkpoint started
// while another runs would return at once, having copied nothing, and the
// committer's (below) and DeleteUser's TRUNCATE (users.go) must not.
//
// That alone would not bound the WAL under a steady load: SQLite starts
// the WAL over only when a write transaction begins with every page
// already copied, and while the checkpointer copies, the committer commits
// more. So when a checkpoint finds the WAL longer than walRestartPages
// (or fails), it asks the committer to run a PASSIVE checkpoint itself,
// between two groups: it copies only what was committed since the
// checkpointer's, and the next group starts the WAL over. The WAL is then
// bounded as it is with SQLite's automatic checkpoint, by what readers
// still use, and not by the checkpointer's pace: were it too slow, the
// committer's own checkpoints would copy the rest, the writers waiting
// for them as they do for SQLite's.
//
// Durability is unchanged: a writer is answered after the fsync of the
// WAL that holds its commit (synchronous FULL), and a checkpoint fsyncs
// the WAL before it copies and the database file after. Closing the last
// connection checkpoints whatever is left, as before.

const (
	// walCheckpointPages is how many pages the committer writes to the
	// WAL between two checkpoints: SQLite's default wal_autocheckpoint.
	walCheckpointPages = 1000
	// walRestartPages is how long the WAL may grow before the committer
	// checkpoints too, so that it starts over.
	walRestartPages = 4 * walCheckpointPages
)

// checkpointer runs the store's checkpoints. It is started by Open and
// stopped by Close, which waits for it.
type checkpointer struct {
	db *sql.DB // one connection, for checkpoints only
	// every and restartAt are walCheckpointPages and walRestartPages
	// (tests make them smaller).
	every, restartAt int
	kick             chan struct{} // buffered: the committer never waits for it
	cancel           context.CancelFunc
	// restart asks the committer to checkpoint between two groups.
	restart atomic.Bool
	// mu is held by every checkpoint of the store, which then waits for
	// the one running instead of failing busy.
	mu sync.Mutex
	// pages counts the pages written to the WAL since the last kick; the
	// committer's alone.
	pages   int
	written atomic.Int64 // pages the committer wrote to the WAL, for benchmarks
	passes  atomic.Int64 // checkpoints run, for tests
	stopped chan struct{}
}

func (s *Store) startCheckpointer(db *sql.DB) {
	ctx, cancel := context.WithCancel(context.Background())
	s.ckpt = &checkpointer{db: db, every: walCheckpointPages, restartAt: walRestartPages, kick: make(chan struct{}, 1), cancel: cancel, stopped: make(chan struct{})}
	go s.ckpt.loop(ctx)
}

// stopCheckpointer interrupts the checkpoint running, if any (the pages
// it has not copied stay in the WAL, for the next checkpoint), waits for
// the checkpointer to end and closes its connection.
func (s *Store) stopCheckpointer() error {
	s.ckpt.cancel()
	<-s.ckpt.stopped
	return s.ckpt.db.Close()
}

func (k *checkpointer) loop(ctx context.Context) {
	defer close(k.stopped)
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
		}
		if k.restart.Load() {
			continue // the committer's checkpoint is due: it copies these too
		}
		k.mu.Lock()
		_, log, err := checkpoint(ctx, k.db, "PASSIVE")
		k.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		k.passes.Add(1)
		if err != nil || log >= k.restartAt {
			k.restart.Store(true)
		}
	}
}

// checkpoint runs PRAGMA wal_checkpoint(mode) on db and returns whether it
// was kept from finishing (busy) and the WAL's length in frames.
func checkpoint(ctx context.Context, db *sql.DB, mode string) (busy bool, log int, err error) {
	var b, copied int
	err = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&b, &log, &copied)
	return b != 0, log, err
}

// wrote counts the pages the commit that just ended on c wrote to the
// WAL, and wakes the checkpointer each walCheckpointPages.
func (k *checkpointer) wrote(c *sql.Conn) {
	n := k.every // a driver that cannot tell: every commit
	c.Raw(func(dc any) error {
		if st, ok := dc.(sqlitedriver.DBStatus); ok {
			// The connection's count of pages written since the last
			// call, which includes what anything else wrote on it
			// (migrations, a cache spilled in the middle of a large
			// transaction): the WAL holds those too.
			n, _, _ = st.Status(sqlitedriver.DBStatusCacheWrite, true)
		}
		return nil
	})
	k.written.Add(int64(n))
	if k.pages += n; k.pages >= k.every {
		k.pages = 0
		select {
		case k.kick <- struct{}{}:
		default: // a checkpoint is already due: it will copy these too
		}
	}
}

// restartWAL runs the committer's own checkpoint if the checkpointer asked
// for it. It runs between two groups, on the write connection, after the
// checkpoint running, if any. Its errors are not the writers': the WAL
// stays as it is, and the next group asks again.
func (s *Store) restartWAL() {
	k := s.ckpt
	if !k.restart.Load() {
		return
	}
	k.mu.Lock()
	busy, _, err := checkpoint(context.Background(), s.w.db, "PASSIVE")
	k.mu.Unlock()
	k.restart.Store(busy || err != nil) // readers kept it from the end: again
}

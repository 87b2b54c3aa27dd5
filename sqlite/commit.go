package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/chatmem/chatmem"
)

// Group commit. Every write of the store (an append, facts, a summary, a
// delete) is a function run inside a transaction on the one write
// connection. Run one transaction each, concurrent writers would each wait
// for the fsync of their own COMMIT behind the others: with synchronous
// FULL, the disk's flush time bounds the writes per second whatever the
// number of clients. Instead, one goroutine (the committer) takes every
// write that is waiting, runs them in one transaction, each inside a
// SAVEPOINT of its own, and commits them together: one fsync makes the whole
// group durable. A write that fails rolls back to its savepoint, undoing
// its own statements and nothing of the others'; each writer is answered
// only after the COMMIT that made its write durable returned.
//
// A group made only of appends, the common case under load, runs without
// the savepoints (runAppends): an append refuses what it refuses before it
// writes anything, and one that fails after writing (a full disk, a broken
// file) has its group rolled back and run again with them, so the promise
// above holds either way.
//
// While the committer flushes a group, the next writers queue, so the group
// grows with the load and a lone writer waits for nobody.
//
// The rows of the FTS5 index (message_terms) are the exception to "each
// write in its savepoint": FTS5 keeps the rows of a transaction in memory
// and writes them out as a new segment at every SAVEPOINT and RELEASE, so
// indexed one savepoint at a time a group of n appends wrote n segments
// (and merged them), which cost more than the rest of the appends. An
// append therefore leaves its index rows to the end of its group (tx.index):
// they are written, for the whole group, after the last savepoint and
// before the COMMIT, in rowid order (FTS5 also writes its rows out when a
// rowid is lower than the one before), as one segment. Only appends that succeeded leave
// them; a failure writing them fails the group (nothing is committed). A
// write that may delete index rows (any write but an append, or an append
// that restarts an expired conversation) first has the rows left so far
// written, so that none is written after the delete of its conversation.

// maxGroup bounds the writes of one transaction, so that one group's
// latency stays bounded under a flood.
const maxGroup = 256

// writeReq is one write waiting for the committer.
type writeReq struct {
	ctx  context.Context
	fn   func(tx) error
	done chan error // buffered: the committer never blocks on it
	// appends marks an append's write: it deletes no index rows (or says
	// so with errIndexFirst), and may leave its own to the group's end.
	appends bool
}

// errIndexFirst is what an append's write returns, before writing
// anything, when it must delete (an expired conversation it restarts):
// the committer undoes it, writes the index rows left so far, and runs it
// again with its index rows written at once.
var errIndexFirst = errors.New("sqlite: index rows left for the end of the group must be written first")

// index writes the index rows of an append's messages, at the end of the
// group when the write is grouped, and at once otherwise.
func (t tx) index(num int64, msgs []chatmem.Message, terms [][]string) error {
	if t.later == nil {
		return indexMessages(t, num, msgs, terms)
	}
	rows, err := messageIndexRows(num, msgs, terms)
	*t.later = append(*t.later, rows...)
	return err
}

// indexFirst reports whether a write about to delete must first have the
// group's index rows written: errIndexFirst if they are left for later.
func (t tx) indexFirst() error {
	if t.later != nil {
		return errIndexFirst
	}
	return nil
}

// committer is the goroutine that runs the store's writes in groups. It is
// started by Open and stopped by Close, which waits for it.
type committer struct {
	groups atomic.Int64 // transactions committed, for tests
	// stmts is the map of the running group's statements (groupTx.stmts),
	// emptied for each transaction and kept for the next: only the
	// committer's goroutine uses it.
	stmts   map[string]*sql.Stmt
	reqs    chan *writeReq
	quit    chan struct{}
	stopped chan struct{}
}

func (s *Store) startCommitter() {
	s.commit = &committer{stmts: make(map[string]*sql.Stmt), reqs: make(chan *writeReq), quit: make(chan struct{}), stopped: make(chan struct{})}
	go s.commitLoop()
}

// stopCommitter ends the committer after the group it is running, if any,
// and waits for it. Writes queued after that fail with errClosed.
func (s *Store) stopCommitter() {
	if s.commit == nil {
		return
	}
	close(s.commit.quit)
	<-s.commit.stopped
}

var errClosed = errors.New("sqlite: store is closed")

// write runs fn in a transaction on the write connection, grouped with the
// other writes waiting at the same time, and returns once that transaction
// committed (fn's writes are then durable), or fn's error, or the group's
// (a failed BEGIN or COMMIT fails every write of the group). fn must not
// call write itself. ctx ending before fn starts gives ctx's error and
// runs nothing; once fn has started, the write is waited for, so that an
// error never hides a committed write.
func (s *Store) write(ctx context.Context, fn func(tx) error) error {
	return s.submit(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// writeAppend is write for an append, whose fn leaves its index rows to
// the end of the group (tx.index) and returns errIndexFirst (from
// tx.indexFirst) before it deletes anything.
func (s *Store) writeAppend(ctx context.Context, fn func(tx) error) error {
	return s.submit(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1), appends: true})
}

func (s *Store) submit(ctx context.Context, req *writeReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.commit.reqs <- req:
	case <-s.commit.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-req.done
}

func (s *Store) commitLoop() {
	defer close(s.commit.stopped)
	group := make([]*writeReq, 0, maxGroup)
	for {
		select {
		case <-s.commit.quit:
			return
		case req := <-s.commit.reqs:
			group = append(group[:0], req)
		}
	gather:
		for len(group) < maxGroup {
			select {
			case req := <-s.commit.reqs:
				group = append(group, req)
			default:
				break gather
			}
		}
		s.runGroup(group)
		clear(group)
		s.restartWAL()
	}
}

// waitCtx returns a context that ends when every writer of group has
// given up: waiting for the write lock (another process holding it) ends
// then, as one writer's own wait would. release frees it.
func waitCtx(group []*writeReq) (ctx context.Context, release func()) {
	if len(group) == 1 { // a lone writer's wait is its own
		return group[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := len(group)
	var mu sync.Mutex
	stops := make([]func() bool, len(group))
	for i, req := range group {
		stops[i] = context.AfterFunc(req.ctx, func() {
			mu.Lock()
			defer mu.Unlock()
			if left--; left == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// runGroup runs the writes of group in one transaction and answers each.
// A group of appends runs first without a savepoint each (runAppends);
// if one of them fails after it wrote, that transaction is rolled back
// and the group runs again in a new one, each write in its savepoint.
func (s *Store) runGroup(group []*writeReq) {
	// The transaction outlives any one writer's context: a writer that
	// goes away must not roll back the others' writes.
	ctx := context.Background()
	var one [1]error // a lone writer's, without an allocation
	results := one[:]
	if len(group) > 1 {
		results = make([]error, len(group))
	}
	redo, err := s.runTx(ctx, group, results, allAppends(group))
	if redo {
		clear(results)
		_, err = s.runTx(ctx, group, results, false)
	}
	err = translate(ctx, err)
	for i, req := range group {
		if results[i] != nil {
			req.done <- results[i]
		} else {
			req.done <- err
		}
	}
}

// runTx runs the writes of group in one transaction, the appends of a
// group of appends without savepoints (fast: see runAppends), else each
// write in a savepoint of its own, and commits it. It sets results[i] to
// the error of write i (which did not disturb the others) and returns the
// group's error (nothing of the group committed), or redo when fast was
// set and an append failed after writing: the transaction is rolled back
// and nothing is answered.
func (s *Store) runTx(ctx context.Context, group []*writeReq, results []error, fast bool) (redo bool, err error) {
	// The transaction's context is the group's own (database/sql rolls a
	// transaction back when its context ends); waiting for the lock ends
	// when every writer gave up.
	c, err := s.w.db.Conn(ctx)
	var t *sql.Tx
	if err == nil {
		wait, release := waitCtx(group)
		err = s.retryBusy(wait, func() (err error) {
			t, err = c.BeginTx(ctx, nil)
			return err
		})
		release()
		if err != nil {
			c.Close()
		}
	}
	if err != nil {
		for i, req := range group {
			results[i] = req.ctx.Err() // a writer that gave up waiting for the lock
		}
		return false, err
	}
	defer c.Close() // after the transaction ends: hands the connection on
	defer t.Rollback()
	clear(s.commit.stmts) // those of the transaction before, closed with it
	g := &groupTx{ctx: ctx, t: t, p: s.w, stmts: s.commit.stmts}
	var ran int
	if fast {
		ran, redo, err = g.runAppends(group, results)
	} else {
		ran, err = g.runEach(group, results)
	}
	switch {
	case redo || err != nil:
		return redo, err
	case ran == 0:
		return false, nil // nothing to commit; Rollback ends the transaction
	}
	if err := g.indexNow(); err != nil {
		return false, err
	}
	if err := t.Commit(); err != nil {
		return false, err
	}
	s.ckpt.wrote(c)
	s.commit.groups.Add(1)
	return false, nil
}

func allAppends(group []*writeReq) bool {
	for _, req := range group {
		if !req.appends {
			return false
		}
	}
	return true
}

// groupTx is the transaction of one group.
type groupTx struct {
	ctx context.Context
	t   *sql.Tx
	p   *pool
	// stmts holds the pool's statements bound to t, each bound once for
	// the group rather than once per statement run.
	stmts map[string]*sql.Stmt
	later []indexRow // index rows the group's appends left
}

// writer returns the transaction as req's write sees it. The writer's
// values (deadline aside) reach its statements; its cancellation does not:
// SQLite interrupts a cancelled statement, and an interrupted write rolls
// back the whole transaction.
func (g *groupTx) writer(req *writeReq) tx {
	return tx{ctx: context.WithoutCancel(req.ctx), tx: g.t, p: g.p, stmts: g.stmts}
}

// exec runs one of savepointStatements.
func (g *groupTx) exec(query string) error {
	_, err := tx{ctx: g.ctx, tx: g.t, p: g.p, stmts: g.stmts}.exec(query)
	return err
}

// indexNow writes the index rows left so far, outside any savepoint of a
// write.
func (g *groupTx) indexNow() error {
	if len(g.later) == 0 {
		return nil
	}
	slices.SortFunc(g.later, func(a, b indexRow) int { return cmp.Compare(a.rowid, b.rowid) })
	if err := insertIndexRows(tx{ctx: g.ctx, tx: g.t, p: g.p, stmts: g.stmts}, g.later); err != nil {
		return fmt.Errorf("index the group's appends: %w", err)
	}
	g.later = g.later[:0]
	return nil
}

// runEach runs the writes of group one after the other, each in a
// savepoint of its own, and returns how many succeeded. A write's failure
// is its result; an error returned fails the group.
func (g *groupTx) runEach(group []*writeReq, results []error) (ran int, err error) {
	for i, req := range group {
		if err := req.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if !req.appends {
			if err := g.indexNow(); err != nil {
				return 0, err
			}
		}
		w := g.writer(req)
		var left []indexRow
		if req.appends {
			w.later = &left
		}
		err := g.savepoint(func() error { return req.fn(w) })
		if errors.Is(err, errIndexFirst) {
			left, w.later = nil, nil
			if err = g.indexNow(); err == nil {
				err = g.savepoint(func() error { return req.fn(w) })
			}
		}
		var failed *writeFailed
		switch {
		case errors.As(err, &failed):
			results[i] = translate(g.ctx, failed.err)
		case err != nil:
			return 0, err
		default:
			ran++
			g.later = append(g.later, left...)
		}
	}
	return ran, nil
}

// runAppends runs a group of appends without a savepoint each: an
// append's SAVEPOINT and RELEASE, and the copies of the pages it changes
// that a savepoint keeps, cost the committer, which runs the appends one
// after the other, about a tenth of an append's time. (One savepoint for
// the whole group would not do: it keeps a copy of every page the group
// changes, more than its journal holds in memory.) It relies on what an
// append refuses (If-Match, idempotency, tenant rules) being refused
// before it writes anything, which tx.wrote tells: such a refusal is that
// append's result, and the group goes on. An append that fails after it
// wrote (which takes a broken database or a full disk) would leave its
// first statements behind: runAppends returns redo, and the group is
// rolled back and run again, each append in a savepoint of its own, so
// that one failing append still fails alone.
func (g *groupTx) runAppends(group []*writeReq, results []error) (ran int, redo bool, err error) {
	for i, req := range group {
		if err := req.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		var wrote bool
		var left []indexRow
		w := g.writer(req)
		w.later, w.wrote = &left, &wrote
		err := req.fn(w)
		if errors.Is(err, errIndexFirst) && !wrote {
			left, w.later = nil, nil
			if err = g.indexNow(); err != nil {
				return 0, false, err
			}
			err = req.fn(w)
		}
		switch {
		case err == nil:
			ran++
			g.later = append(g.later, left...)
		case !wrote && refused(err):
			results[i] = translate(g.ctx, err)
		default:
			// It wrote, or failed some other way before it did (an I/O
			// error in a read may have rolled the whole transaction back,
			// and the next appends would then run on their own): run the
			// group again, each append in a savepoint, which tells.
			return 0, true, nil
		}
	}
	return ran, false, nil
}

// refused reports whether err is an append's refusal of its own input or
// conditions (If-Match, idempotency, tenant and user rules, sizes), which
// it makes before it writes, rather than a failure of the database.
func refused(err error) bool {
	for _, e := range []error{chatmem.ErrInvalid, chatmem.ErrTooLarge, chatmem.ErrNotFound, chatmem.ErrConflict,
		chatmem.ErrIdempotencyKeyReused, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// The statements of a write's savepoint, prepared on the write pool.
const (
	savepointWrite = "SAVEPOINT w"
	rollbackWrite  = "ROLLBACK TO w"
	releaseWrite   = "RELEASE w"
)

var savepointStatements = []string{savepointWrite, rollbackWrite, releaseWrite}

// writeFailed is a write's own failure, undone by its savepoint: the
// group goes on without it.
type writeFailed struct{ err error }

func (e *writeFailed) Error() string { return e.err.Error() }

// savepoint runs fn, a write of the group, inside a savepoint of its own.
// fn's failure rolls back to the savepoint and comes back as a
// *writeFailed (errIndexFirst as itself); any other error means SQLite
// ended the transaction (a full disk, an I/O error) and nothing of the
// group is written.
func (g *groupTx) savepoint(fn func() error) error {
	if err := g.exec(savepointWrite); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	ferr := fn()
	if ferr != nil {
		if err := g.exec(rollbackWrite); err != nil {
			return fmt.Errorf("roll back a failed write: %w (after: %v)", err, ferr)
		}
	}
	if err := g.exec(releaseWrite); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	switch {
	case ferr == nil:
		return nil
	case errors.Is(ferr, errIndexFirst):
		return errIndexFirst
	}
	return &writeFailed{ferr}
}

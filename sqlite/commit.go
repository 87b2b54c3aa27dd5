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
	groups  atomic.Int64 // transactions committed, for tests
	reqs    chan *writeReq
	quit    chan struct{}
	stopped chan struct{}
}

func (s *Store) startCommitter() {
	s.commit = &committer{reqs: make(chan *writeReq), quit: make(chan struct{}), stopped: make(chan struct{})}
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
	}
}

// waitCtx returns a context that ends when every writer of group has
// given up: waiting for the write lock (another process holding it) ends
// then, as one writer's own wait would. release frees it.
func waitCtx(group []*writeReq) (ctx context.Context, release func()) {
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
func (s *Store) runGroup(group []*writeReq) {
	// The transaction outlives any one writer's context: a writer that
	// goes away must not roll back the others' writes.
	ctx := context.Background()
	results := make([]error, len(group))
	answer := func(groupErr error) {
		for i, req := range group {
			err := results[i]
			if err == nil {
				err = groupErr
			}
			req.done <- err
		}
	}
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
		answer(translate(ctx, err))
		return
	}
	defer c.Close() // after the transaction ends: hands the connection on
	defer t.Rollback()
	ran := 0
	var later []indexRow // index rows the group's appends left
	// indexNow writes them, outside any savepoint.
	indexNow := func() error {
		slices.SortFunc(later, func(a, b indexRow) int { return cmp.Compare(a.rowid, b.rowid) })
		if err := insertIndexRows(tx{ctx: ctx, tx: t, p: s.w}, later); err != nil {
			return fmt.Errorf("index the group's appends: %w", err)
		}
		later = later[:0]
		return nil
	}
	for i, req := range group {
		if err := req.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if !req.appends && len(later) > 0 {
			if err := indexNow(); err != nil {
				answer(translate(ctx, err))
				return
			}
		}
		// The writer's values (deadline aside) reach its statements; its
		// cancellation does not: SQLite interrupts a cancelled statement,
		// and an interrupted write rolls back the whole transaction.
		w := tx{ctx: context.WithoutCancel(req.ctx), tx: t, p: s.w}
		var left []indexRow
		if req.appends {
			w.later = &left
		}
		err := savepoint(ctx, t, func() error { return req.fn(w) })
		if errors.Is(err, errIndexFirst) {
			left, w.later = nil, nil
			if err = indexNow(); err == nil {
				err = savepoint(ctx, t, func() error { return req.fn(w) })
			}
		}
		var failed *writeFailed
		switch {
		case errors.As(err, &failed):
			results[i] = translate(ctx, failed.err)
		case err != nil:
			answer(translate(ctx, err))
			return
		default:
			ran++
			later = append(later, left...)
		}
	}
	if ran == 0 {
		answer(nil) // nothing to commit; Rollback ends the transaction
		return
	}
	if err := indexNow(); err != nil {
		answer(translate(ctx, err))
		return
	}
	err = t.Commit()
	if err == nil {
		s.commit.groups.Add(1)
	}
	answer(translate(ctx, err))
}

// writeFailed is a write's own failure, undone by its savepoint: the
// group goes on without it.
type writeFailed struct{ err error }

func (e *writeFailed) Error() string { return e.err.Error() }

// savepoint runs fn, a write of the group, inside a savepoint of its own on
// t. fn's failure rolls back to the savepoint and comes back as a
// *writeFailed (errIndexFirst as itself); any other error means SQLite
// ended the transaction (a full disk, an I/O error) and nothing of the
// group is written.
func savepoint(ctx context.Context, t *sql.Tx, fn func() error) error {
	if _, err := t.ExecContext(ctx, "SAVEPOINT w"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	ferr := fn()
	if ferr != nil {
		if _, err := t.ExecContext(ctx, "ROLLBACK TO w"); err != nil {
			return fmt.Errorf("roll back a failed write: %w (after: %v)", err, ferr)
		}
	}
	if _, err := t.ExecContext(ctx, "RELEASE w"); err != nil {
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

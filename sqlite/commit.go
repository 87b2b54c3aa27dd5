package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// maxGroup bounds the writes of one transaction, so that one group's
// latency stays bounded under a flood.
const maxGroup = 256

// writeReq is one write waiting for the committer.
type writeReq struct {
	ctx  context.Context
	fn   func(tx) error
	done chan error // buffered: the committer never blocks on it
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
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
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
	for i, req := range group {
		if err := req.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if _, err := t.ExecContext(ctx, "SAVEPOINT w"); err != nil {
			answer(translate(ctx, fmt.Errorf("savepoint: %w", err)))
			return
		}
		// The writer's values (deadline aside) reach its statements; its
		// cancellation does not: SQLite interrupts a cancelled statement,
		// and an interrupted write rolls back the whole transaction.
		if err := req.fn(tx{ctx: context.WithoutCancel(req.ctx), tx: t, p: s.w}); err != nil {
			results[i] = translate(ctx, err)
			if _, rerr := t.ExecContext(ctx, "ROLLBACK TO w"); rerr != nil {
				// SQLite ended the transaction itself (a full disk, an
				// I/O error): nothing of the group is written.
				answer(translate(ctx, fmt.Errorf("roll back a failed write: %w (after: %v)", rerr, err)))
				return
			}
		} else {
			ran++
		}
		if _, err := t.ExecContext(ctx, "RELEASE w"); err != nil {
			answer(translate(ctx, fmt.Errorf("release savepoint: %w", err)))
			return
		}
	}
	if ran == 0 {
		answer(nil) // nothing to commit; Rollback ends the transaction
		return
	}
	err = t.Commit()
	if err == nil {
		s.commit.groups.Add(1)
	}
	answer(translate(ctx, err))
}

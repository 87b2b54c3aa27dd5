package chatmem

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Leaser is implemented by stores that grant short-lived leases on a
// conversation's derived work, so that of several processes (replicas of a
// server over one store) only one calls the summarizer, or the
// extractors, for a conversation at a time. A lease only saves model calls:
// what the work stores is still written by compare-and-set (PutSummary's
// prev, SetFactsThrough's prev), so a lease that expires while its holder
// works costs a duplicate call, never a duplicate summary or fact. Memory
// finds it by a type assertion; every store in this module implements it.
// Its methods are safe for concurrent use. A lease does not need the
// conversation to exist, and deleting the conversation does not end it.
type Leaser interface {
	// Lease grants holder the lease named kind on the conversation at key
	// for ttl, and reports true, if no other holder has it unexpired; a
	// holder that has it extends it to ttl from now. Otherwise it reports
	// false, changes nothing of the lease but records that it was wanted
	// (see Release). It wraps ErrInvalid for a bad key, a kind that is not
	// 1 to 32 characters from [a-z_], a holder that is not 1 to 64 bytes,
	// or a ttl outside 1ms..24h.
	Lease(ctx context.Context, key Key, kind, holder string, ttl time.Duration) (bool, error)

	// Release ends holder's lease named kind on the conversation at key
	// and reports whether another holder asked for it (and was refused)
	// since holder was granted it: that holder skipped its work, which the
	// releasing holder must then look at again. It does nothing and reports
	// false if holder does not hold the lease (it expired, and perhaps
	// another holder has it). Errors are as for Lease.
	Release(ctx context.Context, key Key, kind, holder string) (wanted bool, err error)
}

// The kinds of lease Memory takes: one for summarizing, one for fact
// extraction, so that the two run side by side.
const (
	LeaseSummary = "summary"
	LeaseFacts   = "facts"
)

// MaxLeaseTTL is the longest lease a Leaser grants.
const MaxLeaseTTL = 24 * time.Hour

// ValidateLease checks the arguments of Leaser.Lease and Release other
// than the ttl; it wraps ErrInvalid.
func ValidateLease(key Key, kind, holder string) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if kind == "" || len(kind) > 32 {
		return fmt.Errorf("%w: lease kind must be 1 to 32 characters, got %d", ErrInvalid, len(kind))
	}
	for i := 0; i < len(kind); i++ {
		if c := kind[i]; (c < 'a' || c > 'z') && c != '_' {
			return fmt.Errorf("%w: lease kind %q has character %q; allowed are a-z and _", ErrInvalid, kind, c)
		}
	}
	if holder == "" || len(holder) > 64 {
		return fmt.Errorf("%w: lease holder must be 1 to 64 bytes, got %d", ErrInvalid, len(holder))
	}
	return nil
}

// ValidateLeaseTTL checks the ttl of Leaser.Lease; it wraps ErrInvalid.
func ValidateLeaseTTL(ttl time.Duration) error {
	if ttl < time.Millisecond || ttl > MaxLeaseTTL {
		return fmt.Errorf("%w: lease ttl %v is outside 1ms..%v", ErrInvalid, ttl, MaxLeaseTTL)
	}
	return nil
}

// Local is implemented by Summarizers and Extractors that run in the
// process with no model to pay (the offline summarizer, the rules
// extractor). Memory takes no lease before work that calls only those:
// calling them twice costs less than a lease's two writes, and what they
// find is stored once all the same.
type Local interface {
	// Local reports whether calls run in the process, at no cost per call.
	Local() bool
}

// local reports whether x is Local.
func local(x any) bool {
	l, ok := x.(Local)
	return ok && l.Local()
}

// holdFunc takes the work's lease before its first model call (and extends
// it before the others); false means another holder has it, and the work
// stops there: that holder does it.
type holdFunc func(ctx context.Context) (bool, error)

// leaseTTL is how long a lease lasts unless renewed: its holder renews it
// every leaseTTL/3 while it works (a model call may take longer), so a
// holder that dies blocks the work on its conversations for leaseTTL at
// most.
const leaseTTL = 5 * time.Second

// renew extends holder's lease every leaseTTL/3 until stop is called
// (which waits for it). A renewal that fails or finds the lease taken
// (this process stalled past leaseTTL) changes nothing here: the
// compare-and-set of what the work stores keeps it from being stored
// twice.
func renew(l Leaser, key Key, kind, holder string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(leaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), leaseTTL/3)
				_, _ = l.Lease(ctx, key, kind, holder, leaseTTL)
				cancel()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// leased runs do, which calls hold before each model call, under the
// store's lease of kind on key (without a Leaser, or when models is
// false: the work calls only Local ones, hold always grants). A
// process refused the lease skips the work: the holder, on release, learns
// it was wanted and runs do again, so work that arrived while it held the
// lease (and that others skipped) is done once it reads again. The lease
// is renewed while do runs; a holder that dies leaves the work to whoever
// appends to the conversation (or reads a lagging summary) once its lease
// expired, at most leaseTTL later, or to the fact catch-up scan of a Start.
func (m *Memory) leased(ctx context.Context, key Key, kind string, models bool, do func(hold holdFunc) error) error {
	l := m.caps.leaser
	if l == nil || !models {
		return do(func(context.Context) (bool, error) { return true, nil })
	}
	for {
		holder, held := rand.Text(), false
		stop := func() {}
		err := do(func(ctx context.Context) (bool, error) {
			ok, err := l.Lease(ctx, key, kind, holder, leaseTTL)
			if ok && !held {
				held, stop = true, renew(l, key, kind, holder)
			}
			return ok, err
		})
		stop()
		if !held {
			return err
		}
		// Released even when ctx has ended, so others need not wait for
		// it to expire.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		wanted, rerr := l.Release(rctx, key, kind, holder)
		cancel()
		if err != nil || rerr != nil {
			return errors.Join(err, rerr)
		}
		if !wanted {
			return nil
		}
	}
}

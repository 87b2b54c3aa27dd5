package httpapi

import (
	"context"
	"sync"

	"github.com/chatmem/chatmem"
)

// turnWrites tracks, per conversation, the proxied turns whose messages
// are being written after their response went out, so that the
// conversation's next proxied turn can wait for them and read a history
// that holds them. It is safe for concurrent use; its zero value is ready.
type turnWrites struct {
	mu sync.Mutex
	m  map[chatmem.Key]*turnWrite
}

// turnWrite is the writes in flight for one conversation: done is closed
// when the last of them ends.
type turnWrite struct {
	n    int
	done chan struct{}
}

// begin records a write for key; the caller must call the returned end
// when the write is over, whether or not it succeeded.
func (w *turnWrites) begin(key chatmem.Key) (end func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[chatmem.Key]*turnWrite)
	}
	tw := w.m[key]
	if tw == nil {
		tw = &turnWrite{done: make(chan struct{})}
		w.m[key] = tw
	}
	tw.n++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if tw.n--; tw.n == 0 {
			close(tw.done)
			delete(w.m, key)
		}
	}
}

// wait returns once no write for key that began before the call is in
// flight, or with ctx's error when ctx ends first.
func (w *turnWrites) wait(ctx context.Context, key chatmem.Key) error {
	w.mu.Lock()
	tw := w.m[key]
	w.mu.Unlock()
	if tw == nil {
		return nil
	}
	select {
	case <-tw.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

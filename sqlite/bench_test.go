package sqlite

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"chatmem"
	"chatmem/storetest"
)

// BenchmarkTail measures Tail{Tokens: 4000} (200 messages) on
// conversations of 1,000, 100,000 and 1,000,000 messages: the time per
// read should not grow with the length. It logs how long filling each
// conversation took (batches of 1,000 messages, one transaction each).
func BenchmarkTail(b *testing.B) {
	s := &timedAppends{Store: open(b, filepath.Join(b.TempDir(), "bench.db"))}
	storetest.BenchmarkTail(b, s, []int{1000, 100000, 1000000})
	for key, d := range s.spent {
		b.Logf("filled %s in %v", key.ID, d.Round(time.Millisecond))
	}
}

// timedAppends adds up the time spent in Append per conversation.
type timedAppends struct {
	*Store
	mu    sync.Mutex
	spent map[chatmem.Key]time.Duration
}

func (s *timedAppends) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, key, msgs, opts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spent == nil {
		s.spent = make(map[chatmem.Key]time.Duration)
	}
	s.spent[key] += time.Since(start)
	return res, err
}

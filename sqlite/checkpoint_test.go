package sqlite

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestCheckpointer: with the automatic checkpoint off on the write
// connection, the checkpointer copies the WAL into the database file, and
// the committer's own checkpoints make the WAL start over, so that a
// steady flow of appends leaves it bounded: here, with checkpoints every
// 50 pages and a restart past 200, the appends write about 30 times 200
// pages and the WAL holds at most 10 times 200 (about 300 pages when this
// test was written; without the committer's checkpoints, 6,800).
func TestCheckpointer(t *testing.T) {
	s, groups := openCounting(t)
	s.ckpt.every, s.ckpt.restartAt = 50, 200
	walFrames := func() int64 {
		fi, err := os.Stat(s.path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return (fi.Size() - 32) / (4096 + 24) // the header, then frames of a 4 KiB page
	}
	var mu sync.Mutex
	var most int64
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			key := chatmem.Key{Tenant: "t", ID: fmt.Sprintf("c%d", c)}
			for i := range 250 {
				msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: fmt.Sprintf("message %d of client %d", i, c), Tokens: 5}}
				if _, err := s.Append(t.Context(), key, msg, chatmem.AppendOptions{}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				most = max(most, walFrames())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if s.ckpt.passes.Load() == 0 {
		t.Fatal("the checkpointer never ran")
	}
	if most > 10*200 {
		t.Fatalf("the WAL grew to %d frames, want at most 2,000", most)
	}
	t.Logf("1,000 appends in %d groups, %d checkpoints; the WAL held at most %d frames", groups.Load(), s.ckpt.passes.Load(), most)
}

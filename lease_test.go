package chatmem_test

import (
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestLeaseSkippedWorkIsDone: two Memories over one store stand for two
// replicas. While the first one's extractor holds the conversation's lease
// (its call blocked), the second appends and, refused the lease, skips its
// work; once the first call returns, the first Memory, still holding the
// lease, finds the mark lagging and extracts the second's message too.
// Every message goes to an extractor once, and the mark reaches the end.
// (The race the Release's "wanted" closes, an append between the holder's
// last look and its release, is left to the replicas test: a test here
// could not place it.)
func TestLeaseSkippedWorkIsDone(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	var mu sync.Mutex
	counts := map[string]int{}
	first, second := newCountingExtractor(true, &mu, counts), newCountingExtractor(false, &mu, counts)
	var mems []*chatmem.Memory
	for _, x := range []*countingExtractor{first, second} {
		mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{x}, Workers: 1,
			Summary: chatmem.SummaryOptions{Retries: 1, Backoff: time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		if err := mem.Start(); err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		mems = append(mems, mem)
	}
	// Each Start scans for lagging fact marks in the background: a scan
	// still running at the first append could hand its message to the
	// second Memory, whose extractor does not wait, before the first
	// Memory's worker asks for the lease.
	for _, mem := range mems {
		flush(t, mem)
	}
	key := chatmem.Key{Tenant: "t", ID: "shared"}
	if _, err := mems[0].Append(ctx, key, turn(key, 1), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEntered(t, first) // the first Memory holds the lease, its call blocked
	if _, err := mems[1].Append(ctx, key, turn(key, 2), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	flush(t, mems[1]) // refused the lease: done without calling its extractor
	mu.Lock()
	n := counts["shared said 2"]
	mu.Unlock()
	if n != 0 {
		t.Fatalf("the second Memory extracted while the first held the lease (%d calls)", n)
	}
	close(first.gate)
	flush(t, mems[0])
	wantExtractedOnce(t, store, &mu, counts, []chatmem.Key{key})
}

package chatmem_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// slowExtractor takes a while per call, as a model would, and records
// how many calls overlap, overall and per conversation (told apart by
// the "conv=" prefix of their messages), and the order of each
// conversation's messages.
type slowExtractor struct {
	mu       sync.Mutex
	now, max int
	perConv  map[string]int
	overlap  bool           // two calls of one conversation overlapped
	seen     map[string]int // the last seq extracted, per conversation
	disorder bool           // a conversation's messages came out of order
}

func (x *slowExtractor) Name() string { return "slow" }

func (x *slowExtractor) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	conv, _, _ := strings.Cut(strings.TrimPrefix(msgs[0].Content, "conv="), " ")
	x.mu.Lock()
	x.now++
	x.max = max(x.max, x.now)
	x.perConv[conv]++
	x.overlap = x.overlap || x.perConv[conv] > 1
	for _, m := range msgs {
		x.disorder = x.disorder || int(m.Seq) <= x.seen[conv]
		x.seen[conv] = int(m.Seq)
	}
	x.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	x.mu.Lock()
	x.now--
	x.perConv[conv]--
	x.mu.Unlock()
	var out []chatmem.Fact
	for _, m := range msgs {
		if _, n, ok := strings.Cut(m.Content, "order "); ok {
			out = append(out, chatmem.Fact{Key: "order_id", Value: n, SourceSeq: m.Seq, Confidence: 1})
		}
	}
	return out, nil
}

// TestWorkersRunConversationsInParallel: the workers process different
// conversations at once, one conversation never in two of them, its work
// in the order it was appended, and every message's facts are extracted.
func TestWorkersRunConversationsInParallel(t *testing.T) {
	ctx := context.Background()
	x := &slowExtractor{perConv: map[string]int{}, seen: map[string]int{}}
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{x}, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			key := chatmem.Key{Tenant: "t", ID: fmt.Sprint("c", c)}
			for i := range 10 {
				msg := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("conv=c%d my order %d-%d", c, c, i)}
				if _, err := mem.Append(ctx, key, []chatmem.Message{msg}, chatmem.AppendOptions{}); err != nil {
					t.Error(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	if err := mem.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.max < 2 || x.max > 4 {
		t.Errorf("at most %d extractions ran at once, want 2 to 4 (Workers: 4)", x.max)
	}
	if x.overlap || x.disorder {
		t.Errorf("one conversation's extractions overlapped (%v) or ran out of order (%v)", x.overlap, x.disorder)
	}
	for c := range 8 {
		facts, err := mem.Facts(ctx, chatmem.Key{Tenant: "t", ID: fmt.Sprint("c", c)})
		if err != nil {
			t.Fatal(err)
		}
		if len(facts) != 1 || facts[0].Value != fmt.Sprintf("%d-9", c) || x.seen[fmt.Sprint("c", c)] != 10 {
			t.Errorf("conversation c%d: facts %+v, last message extracted %d; want order %d-9 from all 10", c, facts, x.seen[fmt.Sprint("c", c)], c)
		}
	}
}

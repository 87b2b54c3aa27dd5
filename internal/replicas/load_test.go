package replicas

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

func TestPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three chatmem processes; skipped with -short")
	}
	url := postgresURL(t)
	t.Run("Load", func(t *testing.T) { testReplicas(t, url) })
	t.Run("DerivedOnce", func(t *testing.T) { testDerivedOnce(t, url) })
}

func TestRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and three chatmem processes; skipped with -short")
	}
	url := redisClusterURL(t)
	t.Run("Load", func(t *testing.T) { testReplicas(t, url) })
	t.Run("DerivedOnce", func(t *testing.T) { testDerivedOnce(t, url) })
}

// The load of testReplicas: workers append one message at a time to a few
// shared conversations, each through the next replica in turn, and read it
// back through another; replica 0 is killed with SIGKILL after killAfter
// acknowledged appends.
const (
	conversations = 6
	workers       = 18
	perWorker     = 30
	killAfter     = workers * perWorker / 3
)

// testReplicas drives three replicas over storeURL and checks that every
// acknowledged append is stored once, at the sequence number it was
// acknowledged with, in dense sequences; that a context read through
// another replica right after the acknowledgement sees it; and that the
// two replicas left go on after one is killed.
func testReplicas(t *testing.T, storeURL string) {
	reps := startReplicas(t, storeURL, 3)
	ctx := context.Background()

	var (
		mu        sync.Mutex
		acked     = map[string]int64{} // content -> seq acknowledged
		maybe     = map[string]bool{}  // sent to the killed replica, not answered
		nAcked    atomic.Int64
		afterKill atomic.Int64 // acknowledged by the survivors after the kill
		killed    atomic.Bool
		killOnce  sync.Once
		wg        sync.WaitGroup
	)
	alive := func(i int) bool { return i != 0 || !killed.Load() }
	pick := func(i int) int { // replica i, or the next one alive
		for !alive(i % len(reps)) {
			i++
		}
		return i % len(reps)
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range perWorker {
				conv := fmt.Sprintf("c%d", (w+k)%conversations)
				content := fmt.Sprintf("w%d-k%d", w, k)
				a := pick(w + k)
				wasKilled := killed.Load()
				resp, err := reps[a].client.Append(ctx, conv, []chatmem.Message{{Role: chatmem.RoleUser, Content: content}}, client.AppendOptions{})
				if err != nil {
					if a == 0 && killed.Load() {
						mu.Lock()
						maybe[content] = true
						mu.Unlock()
						continue
					}
					t.Errorf("append %s to %s through replica %d: %v", content, conv, a, err)
					return
				}
				seq := resp.Messages[0].Seq
				mu.Lock()
				acked[content] = seq
				mu.Unlock()
				if wasKilled {
					afterKill.Add(1)
				}
				if nAcked.Add(1) == killAfter {
					killOnce.Do(func() {
						killed.Store(true)
						reps[0].kill()
					})
				}

				// Read your write through another replica.
				b := pick(a + 1)
				win, err := reps[b].client.Context(ctx, conv, client.ContextParams{Policy: chatmem.PolicyLastTurns, Turns: 1000})
				if err != nil {
					if b == 0 && killed.Load() {
						continue
					}
					t.Errorf("context of %s through replica %d: %v", conv, b, err)
					return
				}
				if !holds(win.Messages, seq, content) {
					t.Errorf("context of %s through replica %d right after replica %d acknowledged seq %d (%s): not in the window of %d messages ending at seq %d",
						conv, b, a, seq, content, len(win.Messages), lastSeq(win.Messages))
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if !killed.Load() {
		t.Fatalf("only %d appends acknowledged, replica 0 never killed", nAcked.Load())
	}
	if afterKill.Load() == 0 {
		t.Errorf("no append acknowledged after replica 0 was killed")
	}

	// Every conversation, read whole through a survivor.
	seen := map[string]int64{}
	for c := range conversations {
		conv := fmt.Sprintf("c%d", c)
		var after int64
		for {
			page, err := reps[1].client.Messages(ctx, conv, after, 500)
			if err != nil {
				t.Fatalf("messages of %s: %v", conv, err)
			}
			for _, m := range page.Messages {
				if m.Seq != after+1 {
					t.Errorf("%s: seq %d after %d, want dense", conv, m.Seq, after)
				}
				after = m.Seq
				if prev, dup := seen[m.Content]; dup {
					t.Errorf("%s: %q stored twice (seq %d and %d)", conv, m.Content, prev, m.Seq)
				}
				seen[m.Content] = m.Seq
				if _, ok := acked[m.Content]; !ok && !maybe[m.Content] {
					t.Errorf("%s: seq %d holds %q, which no client sent", conv, m.Seq, m.Content)
				}
			}
			if page.NextAfter == nil {
				break
			}
		}
	}
	for content, seq := range acked {
		if got, ok := seen[content]; !ok {
			t.Errorf("acknowledged append %q (seq %d) lost", content, seq)
		} else if got != seq {
			t.Errorf("acknowledged append %q at seq %d, stored at %d", content, seq, got)
		}
	}
	t.Logf("%d appends acknowledged (%d after the kill), %d unanswered by the killed replica, %d stored",
		len(acked), afterKill.Load(), len(maybe), len(seen))
}

// holds reports whether msgs holds content at seq.
func holds(msgs []chatmem.Message, seq int64, content string) bool {
	for _, m := range msgs {
		if m.Seq == seq {
			return m.Content == content
		}
	}
	return false
}

func lastSeq(msgs []chatmem.Message) int64 {
	if len(msgs) == 0 {
		return 0
	}
	return msgs[len(msgs)-1].Seq
}

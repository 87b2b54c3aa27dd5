package replicas

import (
	"context"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/llm/llmtest"
)

// countingModel is one fake model (OpenAI Chat Completions) that every
// replica calls as its summarizer and its extractor. It counts, per
// message, the calls whose transcript holds it, by kind: a message sent to
// the extractors twice, or summarized twice, shows as a count of 2.
type countingModel struct {
	*httptest.Server
	inflight atomic.Int64
	mu       sync.Mutex
	calls    map[string]map[string]int // kind ("extract", "summarize") -> message text -> calls
}

// transcriptUser finds the user lines of a prompt's transcript and the
// message ID each starts with.
var transcriptUser = regexp.MustCompile(`(?m)^\[seq (\d+)\] user: (d\d+-w\d+-k\d+)`)

func newCountingModel(t *testing.T) *countingModel {
	f := &countingModel{calls: map[string]map[string]int{"extract": {}, "summarize": {}}}
	f.Server = httptest.NewServer(llmtest.ChatCompletions(f.reply))
	t.Cleanup(f.Close)
	return f
}

// reply counts the call and answers as the model would: for the
// extractor, a fact from the last user message; for the summarizer, a
// short summary.
func (f *countingModel) reply(req llmtest.ChatRequest) string {
	f.inflight.Add(1)
	defer f.inflight.Add(-1)
	kind := "summarize"
	if strings.Contains(req.Text("system"), `"facts"`) {
		kind = "extract"
	}
	lines := transcriptUser.FindAllStringSubmatch(req.Last(), -1)
	f.mu.Lock()
	for _, l := range lines {
		f.calls[kind][l[2]]++
	}
	f.mu.Unlock()
	if kind == "summarize" {
		return fmt.Sprintf("The user sent %d more messages.", len(lines))
	}
	if len(lines) == 0 {
		return `{"facts":[]}`
	}
	last := lines[len(lines)-1]
	seq, _ := strconv.ParseInt(last[1], 10, 64)
	return fmt.Sprintf(`{"facts":[{"key":"last_said","value":%q,"source_seq":%d,"confidence":0.9}]}`, last[2], seq)
}

// count returns how many calls of kind held the message text.
func (f *countingModel) count(kind, text string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[kind][text]
}

// The load of testDerivedOnce: workers append one user message at a time
// to a few shared conversations, each through the next replica in turn.
const (
	derivedConversations = 4
	derivedWorkers       = 12
	derivedPerWorker     = 15
)

// testDerivedOnce starts three replicas over storeURL that share one fake
// model as summarizer and extractor, appends to shared conversations
// round-robin until summaries and extraction run on every replica, and
// checks, by counting the fake's calls per message, that each message's
// facts were extracted once, and that each message a summary covers was
// summarized once, across the replicas (the lease in the store; the
// compare-and-set alone would store once but call twice).
func testDerivedOnce(t *testing.T, storeURL string) {
	model := newCountingModel(t)
	reps := startReplicas(t, storeURL, 3,
		"--summarizer", "openai", "--extractors", "openai",
		"--llm-base-url", model.URL+"/v1", "--llm-api-key", "sk-test", "--llm-model", "m",
		"--summary-trigger", "150", "--summary-target", "60")
	ctx := context.Background()

	type sent struct {
		conv string
		seq  int64
	}
	var (
		mu    sync.Mutex
		acked = map[string]sent{} // message ID -> where it was stored
		wg    sync.WaitGroup
	)
	for w := range derivedWorkers {
		wg.Go(func() {
			for k := range derivedPerWorker {
				conv := fmt.Sprintf("d%d", (w+k)%derivedConversations)
				id := fmt.Sprintf("d%d-w%d-k%d", (w+k)%derivedConversations, w, k)
				content := id + " please keep this in mind about my order and its delivery next week"
				r := reps[(w+k)%len(reps)]
				resp, err := r.client.Append(ctx, conv, []chatmem.Message{{Role: chatmem.RoleUser, Content: content}}, client.AppendOptions{})
				if err != nil {
					t.Errorf("append %s: %v", id, err)
					return
				}
				mu.Lock()
				acked[id] = sent{conv, resp.Messages[0].Seq}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	// Wait for the workers: every message extracted, then no call running.
	deadline := time.Now().Add(2 * time.Minute)
	for id := range acked {
		for model.count("extract", id) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("message %s never reached the extractor", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	covers := map[string]int64{}
	for c := range derivedConversations {
		conv := fmt.Sprintf("d%d", c)
		s, err := reps[c%len(reps)].client.Summary(ctx, conv)
		if err != nil {
			t.Fatalf("summary of %s: %v", conv, err)
		}
		covers[conv] = s.CoversSeq
	}
	for model.inflight.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the fake model still has calls running after 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}

	var extracted, summarized int
	for id, at := range acked {
		if n := model.count("extract", id); n != 1 {
			t.Errorf("message %s (%s seq %d) went to the extractor %d times, want once", id, at.conv, at.seq, n)
		}
		extracted++
		n := model.count("summarize", id)
		switch {
		case n > 1:
			t.Errorf("message %s (%s seq %d) was summarized %d times, want once", id, at.conv, at.seq, n)
		case n == 0 && at.seq <= covers[at.conv]:
			t.Errorf("message %s (%s seq %d) is covered by the summary (through seq %d) but was never summarized", id, at.conv, at.seq, covers[at.conv])
		}
		summarized += n
	}
	for conv, s := range covers {
		if s == 0 {
			t.Errorf("%s has no summary after %d appends: the test summarized nothing", conv, derivedWorkers*derivedPerWorker/derivedConversations)
		}
	}
	t.Logf("%d messages through 3 replicas: each extracted once, %d summarized once (summaries cover %v)", extracted, summarized, covers)
}

package chatmem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

func newSummaryMemory(t *testing.T, s chatmem.Summarizer, opts chatmem.Options) *chatmem.Memory {
	t.Helper()
	opts.Counter = tokenizer.Estimate{}
	opts.Summarizer = s
	mem, err := chatmem.New(memstore.New(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

func windowText(w chatmem.Window) string {
	var b strings.Builder
	for _, m := range w.Messages {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// The seed's point: at budget 25 a plain window forgets the name and the
// order ID. With summary_buffer and facts (offline summarizer and rule
// extractor, no model) the last user message is sent and both survive.
func TestSeedSummaryBufferWithFactsRemembers(t *testing.T) {
	ctx := context.Background()
	mem := newSummaryMemory(t, offline.NewSummarizer(offline.Options{}), chatmem.Options{
		Extractors: []chatmem.Extractor{offline.DefaultExtractor()},
		Summary:    chatmem.SummaryOptions{Trigger: 20, Target: 10},
		Sync:       true,
	})
	for _, m := range seed.History() {
		if _, err := mem.Append(ctx, seedKey, []chatmem.Message{m}, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 25}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if text := windowText(plain); strings.Contains(text, "Kavya") || strings.Contains(text, "SE-10423") {
		t.Fatalf("plain window at 25 should forget, got %q", text)
	}
	w, err := mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 25, Facts: true}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text := windowText(w)
	last := w.Messages[len(w.Messages)-1]
	if last.Content != "Add the DryFit ones to my cart please." {
		t.Errorf("last message sent = %q, want the last user message", last.Content)
	}
	for _, want := range []string{"Kavya", "SE-10423"} {
		if !strings.Contains(text, want) {
			t.Errorf("context at budget 25 lacks %q:\n%s", want, text)
		}
	}
	if w.Tokens > 25 || w.Parts.System+w.Parts.Facts+w.Parts.Summary+w.Parts.Recent+w.Parts.Overhead != w.Tokens {
		t.Errorf("tokens %d (parts %+v) over budget 25 or not the sum of parts", w.Tokens, w.Parts)
	}
	t.Logf("context at 25 (%d tokens, parts %+v):\n%s", w.Tokens, w.Parts, text)

	// At a larger budget the summary itself is sent, and it carries both.
	w, err = mem.Context(ctx, seedKey, chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 100}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Summary == nil || !strings.Contains(w.Summary.Text, "Kavya") || !strings.Contains(w.Summary.Text, "SE-10423") {
		t.Fatalf("summary at budget 100 = %+v", w.Summary)
	}
	if first := w.Messages[1]; first.Seq != w.Summary.CoversSeq+1 {
		t.Errorf("window starts at seq %d, summary covers %d: gap", first.Seq, w.Summary.CoversSeq)
	}
}

// countingSummarizer wraps a summarizer, counts calls and can be made to
// fail, hang or return nothing.
type countingSummarizer struct {
	calls atomic.Int64
	mode  atomic.Value // "", "fail", "empty", "hang"
	inner chatmem.Summarizer
}

func (c *countingSummarizer) Name() string { return "counting" }
func (c *countingSummarizer) Summarize(ctx context.Context, prev string, msgs []chatmem.Message) (string, error) {
	c.calls.Add(1)
	switch c.mode.Load() {
	case "fail":
		return "", errors.New("upstream 503")
	case "empty":
		return "   ", nil
	case "hang":
		<-ctx.Done()
		return "", ctx.Err()
	}
	return c.inner.Summarize(ctx, prev, msgs)
}

func appendTurns(t *testing.T, mem *chatmem.Memory, key chatmem.Key, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		msgs := []chatmem.Message{
			{Role: chatmem.RoleUser, Content: fmt.Sprintf("Question %d about order SE-%05d, please check.", i, i)},
			{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("Order SE-%05d ships on day %d.", i, i)},
		}
		if _, err := mem.Append(context.Background(), key, msgs, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSummaryHysteresisAndFailures(t *testing.T) {
	ctx := context.Background()
	sum := &countingSummarizer{inner: offline.NewSummarizer(offline.Options{})}
	sum.mode.Store("")
	mem := newSummaryMemory(t, sum, chatmem.Options{
		Summary: chatmem.SummaryOptions{Trigger: 100, Target: 40, Timeout: 50 * time.Millisecond, Retries: 1, Backoff: time.Millisecond},
		Sync:    true,
	})
	key := chatmem.Key{Tenant: "t", ID: "hyst"}
	appendTurns(t, mem, key, 0, 40) // each turn is about 20 tokens
	calls := sum.calls.Load()
	if calls == 0 || calls > 40/3 {
		t.Errorf("summarizer called %d times over 40 turns; hysteresis should call it every few turns", calls)
	}
	good, err := mem.Summary(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	policy := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 400}
	for _, mode := range []string{"fail", "empty", "hang"} {
		t.Run(mode, func(t *testing.T) {
			sum.mode.Store(mode)
			appendTurns(t, mem, key, 100, 10) // past the trigger: the summarizer is called and fails
			got, err := mem.Summary(ctx, key)
			if err != nil || got != good {
				t.Fatalf("after a %s summarizer, summary = %+v, %v; want the previous one", mode, got, err)
			}
			w, err := mem.Context(ctx, key, policy, chatmem.ContextOptions{})
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}, chatmem.ContextOptions{})
			if w.Summary != nil {
				// Sent only without a gap.
				if w.Messages[1].Seq != w.Summary.CoversSeq+1 {
					t.Fatalf("gap: window starts at %d, summary covers %d", w.Messages[1].Seq, w.Summary.CoversSeq)
				}
			} else if fmt.Sprint(contentsOf(w)) != fmt.Sprint(contentsOf(plain)) {
				t.Fatalf("without the summary the window should be the plain one")
			}
		})
	}
	sum.mode.Store("")
	appendTurns(t, mem, key, 200, 2)
	if got, _ := mem.Summary(ctx, key); got.CoversSeq <= good.CoversSeq {
		t.Errorf("after recovery summary covers %d, want more than %d", got.CoversSeq, good.CoversSeq)
	}
}

func contentsOf(w chatmem.Window) []string {
	var s []string
	for _, m := range w.Messages {
		s = append(s, m.Content)
	}
	return s
}

// The worker runs while writers append and a reader assembles contexts:
// every context that carries a summary continues exactly after it.
func TestSummaryNoGapUnderConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	mem := newSummaryMemory(t, offline.NewSummarizer(offline.Options{MaxChars: 400}), chatmem.Options{
		Summary: chatmem.SummaryOptions{Trigger: 60, Target: 30},
	})
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "gap"}
	appendTurns(t, mem, key, 0, 1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var withSummary atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 1000}, chatmem.ContextOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			if w.Summary != nil {
				withSummary.Add(1)
				if w.Messages[1].Seq != w.Summary.CoversSeq+1 {
					t.Errorf("gap: window starts at %d, summary covers %d", w.Messages[1].Seq, w.Summary.CoversSeq)
					return
				}
			}
		}
	})
	var writers sync.WaitGroup
	for g := range 4 {
		writers.Go(func() {
			// Paced like chat traffic, so the worker runs between turns.
			for i := range 150 {
				appendTurns(t, mem, key, 1000*(g+1)+i, 1)
				time.Sleep(time.Millisecond)
			}
		})
	}
	writers.Wait()
	if err := mem.Close(); err != nil { // drains the queue
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	s, err := mem.Summary(ctx, key)
	if err != nil || s.CoversSeq == 0 {
		t.Fatalf("after the worker drained: summary %+v, %v", s, err)
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 1000}, chatmem.ContextOptions{})
	if err != nil || w.Summary == nil || w.Messages[1].Seq != s.CoversSeq+1 {
		t.Fatalf("final context: summary %+v, first seq %d, %v", w.Summary, w.Messages[1].Seq, err)
	}
	t.Logf("%d contexts carried a summary; final summary covers %d of 1202 messages", withSummary.Load(), s.CoversSeq)
}

// Restating a fact with the value it has writes nothing new: the history
// keeps the first statement; a new value becomes current.
func TestExtractedFactsRestatedKeepHistory(t *testing.T) {
	ctx := context.Background()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{offline.DefaultExtractor()}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "facts"}
	for _, text := range []string{"My order SE-10423 is late.", "Any news on my order SE-10423?", "Sorry, my order SE-20000 I mean."} {
		if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text}}, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := mem.Store().(chatmem.FactStore).FactHistory(ctx, key, "order_id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range hist {
		got = append(got, fmt.Sprintf("%s@%d", f.Value, f.SourceSeq))
	}
	if want := "[SE-10423@1 SE-20000@3]"; fmt.Sprint(got) != want {
		t.Errorf("order_id history = %v, want %s", got, want)
	}
}

// Context caches summaries per conversation; a deleted and re-created
// conversation must never be sent its predecessor's summary.
func TestSummaryCacheDoesNotOutliveTheConversation(t *testing.T) {
	ctx := context.Background()
	mem := newSummaryMemory(t, offline.NewSummarizer(offline.Options{}), chatmem.Options{
		Summary: chatmem.SummaryOptions{Trigger: 40, Target: 20},
		Sync:    true,
	})
	key := chatmem.Key{Tenant: "t", ID: "reused"}
	appendTurns(t, mem, key, 0, 10)
	p := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 1000}
	w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil || w.Summary == nil {
		t.Fatalf("first conversation: summary %v, %v", w.Summary, err)
	}
	if err := mem.Store().Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "A new conversation."}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err = mem.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil || w.Summary != nil || len(w.Messages) != 1 {
		t.Fatalf("re-created conversation: summary %+v, %d messages, %v; want no summary, 1 message", w.Summary, len(w.Messages), err)
	}
}

// A conversation that opens with a system message: the first cut must not
// hand the summarizer the system message alone (it is pinned, not
// summarized), which would fail and retry on every append.
func TestSummaryCutSkipsSystemOnlyChunks(t *testing.T) {
	sum := &countingSummarizer{inner: offline.NewSummarizer(offline.Options{})}
	sum.mode.Store("")
	mem := newSummaryMemory(t, sum, chatmem.Options{
		Summary: chatmem.SummaryOptions{Trigger: 30, Target: 10, Retries: 1, Backoff: time.Hour}, // a retry would hang the test
		Sync:    true,
	})
	key := chatmem.Key{Tenant: "t", ID: "sys"}
	if _, err := mem.Append(context.Background(), key, []chatmem.Message{{Role: chatmem.RoleSystem, Content: "You are a support bot for an online shoe shop."}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	appendTurns(t, mem, key, 0, 6)
	s, err := mem.Summary(context.Background(), key)
	if err != nil || s.CoversSeq < 2 || strings.Contains(s.Text, "support bot") {
		t.Fatalf("summary = %+v, %v; want one covering turns, without the pinned system message", s, err)
	}
}

// A turn's context counts nothing it counted before: stored messages carry
// their counts, and an unchanged facts block is counted once.
func TestContextDoesNotRecountTheFactsBlock(t *testing.T) {
	ctx := context.Background()
	c := &countingCounter{Counter: tokenizer.Estimate{}}
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Append(ctx, seedKey, seed.History(), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mem.SetFacts(ctx, seedKey, []chatmem.Fact{{Key: "name", Value: "Kavya"}}); err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 100, Facts: true}
	if _, err := mem.Context(ctx, seedKey, p, chatmem.ContextOptions{}); err != nil {
		t.Fatal(err)
	}
	before := c.calls.Load()
	for range 3 {
		w, err := mem.Context(ctx, seedKey, p, chatmem.ContextOptions{})
		if err != nil || w.Parts.Facts == 0 {
			t.Fatalf("context: parts %+v, %v", w.Parts, err)
		}
	}
	if n := c.calls.Load() - before; n != 0 {
		t.Errorf("three more turns counted %d messages, want 0", n)
	}
}

package chatmem_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// gatedSummarizer joins the messages' contents to the previous summary;
// its first call signals started and waits for release.
type gatedSummarizer struct {
	calls            atomic.Int64
	once             sync.Once
	started, release chan struct{}
}

func (g *gatedSummarizer) Name() string { return "gated" }
func (g *gatedSummarizer) Summarize(ctx context.Context, prev string, msgs []chatmem.Message) (string, error) {
	if g.calls.Add(1) == 1 {
		g.once.Do(func() { close(g.started) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	parts := []string{prev}
	for _, m := range msgs {
		parts = append(parts, m.Content)
	}
	return strings.TrimSpace(strings.Join(parts, " | ")), nil
}

// TestSummaryAfterRedactMidJob: the worker's summarizer has read a
// message and is still working when the message is redacted. What it
// made from the old text must not be stored: the summary is made again
// from the redacted text.
func TestSummaryAfterRedactMidJob(t *testing.T) {
	ctx := context.Background()
	gate := &gatedSummarizer{started: make(chan struct{}), release: make(chan struct{})}
	mem := newSummaryMemory(t, gate, chatmem.Options{Summary: chatmem.SummaryOptions{Trigger: 60, Target: 30}})
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "redact-mid-job"}
	if _, err := mem.Append(ctx, key, []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "My phone number is 555-0199, call me about the order."},
		{Role: chatmem.RoleAssistant, Content: "Noted, we will call you about the order."},
	}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	appendTurns(t, mem, key, 0, 8)
	select {
	case <-gate.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the summarizer was not called")
	}
	if _, _, err := mem.Redact(ctx, key, 1, "My phone number is [redacted], call me about the order.", chatmem.RedactOptions{}); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	if err := mem.Close(); err != nil { // drains the queue
		t.Fatal(err)
	}
	s, err := mem.Summary(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.Text, "555-0199") {
		t.Errorf("the summary made from the text before the redaction was stored: %q", s.Text)
	}
	if s.CoversSeq < 1 || !strings.Contains(s.Text, "[redacted]") {
		t.Errorf("summary %+v; want one covering message 1, made from the redacted text", s)
	}
	if n := gate.calls.Load(); n < 2 {
		t.Errorf("the summarizer was called %d times; want the work done again after the redaction", n)
	}
}

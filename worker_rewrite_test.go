package chatmem_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// gate holds a fake model's first call: it signals started and waits for
// release.
type gate struct {
	calls            atomic.Int64
	once             sync.Once
	started, release chan struct{}
}

func newGate() *gate { return &gate{started: make(chan struct{}), release: make(chan struct{})} }

func (g *gate) wait(ctx context.Context) error {
	if g.calls.Add(1) != 1 {
		return nil
	}
	g.once.Do(func() { close(g.started) })
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) waitStarted(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(30 * time.Second):
		t.Fatalf("the %s was not called", what)
	}
}

// gatedExtractor takes "phone" (a user fact) and "order_id" (the
// conversation's) from user messages that say "my phone is X" and "my
// order is Y".
type gatedExtractor struct{ *gate }

func (gatedExtractor) Name() string { return "gated" }
func (g gatedExtractor) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	var out []chatmem.Fact
	for _, m := range msgs {
		if m.Role != chatmem.RoleUser {
			continue
		}
		words := strings.Fields(m.Content)
		for i := 0; i+3 < len(words); i++ {
			if words[i] == "my" && words[i+2] == "is" && (words[i+1] == "phone" || words[i+1] == "order") {
				k := map[string]string{"phone": "phone", "order": "order_id"}[words[i+1]]
				out = append(out, chatmem.Fact{Key: k, Value: strings.Trim(words[i+3], ".,"), SourceSeq: m.Seq, Confidence: 1})
			}
		}
	}
	return out, nil
}

// unmarkedStore is a memory store that keeps no fact marks, so that
// extraction follows the worker's jobs: its FactMark is ambiguous between
// the two embedded types, at the same depth, and so not promoted, and it
// is no chatmem.FactMarker.
type unmarkedStore struct {
	*memstore.Store
	noFactMarks
}

type noFactMarks struct{}

func (noFactMarks) FactMark() {}

// factStores are a memory store with fact marks (as every store has) and
// one without.
func factStores(t *testing.T) []struct {
	what  string
	store chatmem.Store
} {
	t.Helper()
	stores := []struct {
		what  string
		store chatmem.Store
	}{
		{"marked", memstore.New()},
		{"unmarked", unmarkedStore{Store: memstore.New()}},
	}
	for _, c := range stores {
		if _, marked := c.store.(chatmem.FactMarker); marked != (c.what == "marked") {
			t.Fatalf("%s: the store keeps fact marks: %v", c.what, marked)
		}
	}
	return stores
}

// TestFactsAfterRedactMidJob: the worker's extractor has read a message
// and is still working when the message is redacted. The facts it found
// in the old text (a user fact and a conversation fact) must not be
// stored: the extraction is made again from the redacted text. With fact
// marks (the stores' way) and without (following the jobs).
func TestFactsAfterRedactMidJob(t *testing.T) {
	for _, c := range factStores(t) {
		t.Run(c.what, func(t *testing.T) {
			ctx := context.Background()
			g := newGate()
			mem, err := chatmem.New(c.store, chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{gatedExtractor{g}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := mem.Start(); err != nil {
				t.Fatal(err)
			}
			key := chatmem.Key{Tenant: "t", ID: "redact-mid-extraction"}
			user := chatmem.Key{Tenant: "t", ID: "u1"}
			if _, err := mem.Append(ctx, key, []chatmem.Message{
				{Role: chatmem.RoleUser, Content: "Hello, my phone is 555-0199 and my order is SE-10423."},
				{Role: chatmem.RoleAssistant, Content: "Thanks, we will call you about it."},
			}, chatmem.AppendOptions{User: user.ID}); err != nil {
				t.Fatal(err)
			}
			g.waitStarted(t, "extractor")
			if _, _, err := mem.Redact(ctx, key, 1, "Hello, my phone is [redacted] and my order is [redacted].", chatmem.RedactOptions{}); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			if err := mem.Close(); err != nil { // drains the queue
				t.Fatal(err)
			}
			userFacts, err := mem.UserFactHistory(ctx, user, "")
			if err != nil {
				t.Fatal(err)
			}
			convFacts, err := mem.FactHistory(ctx, key, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range append(userFacts, convFacts...) {
				if f.Value != "[redacted]" {
					t.Errorf("fact %s = %q (%s) was stored: made from the text before the redaction", f.Key, f.Value, f.Scope)
				}
			}
			if len(userFacts) != 1 || userFacts[0].Key != "phone" || len(convFacts) != 1 || convFacts[0].Key != "order_id" {
				t.Errorf("user facts %+v, conversation facts %+v; want phone and order_id, from the redacted text", userFacts, convFacts)
			}
			if n := g.calls.Load(); n < 2 {
				t.Errorf("the extractor was called %d times; want the work done again after the redaction", n)
			}
		})
	}
}

// TestFactsAfterRewindMidJob: the worker's extractor has read the
// messages when the conversation is rewound and a new branch appended at
// the same seqs. The facts of the rewound messages must not be stored,
// and those of the new branch must be (with fact marks, the old job's
// mark once went past the new messages unextracted).
func TestFactsAfterRewindMidJob(t *testing.T) {
	for _, c := range factStores(t) {
		t.Run(c.what, func(t *testing.T) {
			ctx := context.Background()
			g := newGate()
			mem, err := chatmem.New(c.store, chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{gatedExtractor{g}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := mem.Start(); err != nil {
				t.Fatal(err)
			}
			key := chatmem.Key{Tenant: "t", ID: "rewind-mid-extraction"}
			branch := func(phone string) []chatmem.Message {
				return []chatmem.Message{
					{Role: chatmem.RoleUser, Content: "Hello, my phone is " + phone + "."},
					{Role: chatmem.RoleAssistant, Content: "Thanks, we will call you."},
				}
			}
			first := append([]chatmem.Message{
				{Role: chatmem.RoleUser, Content: "Hello there."},
				{Role: chatmem.RoleAssistant, Content: "Hi, how can I help?"},
			}, branch("555-0199")...)
			if _, err := mem.Append(ctx, key, first, chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			g.waitStarted(t, "extractor")
			if _, err := mem.Rewind(ctx, key, 2, chatmem.RewindOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := mem.Append(ctx, key, branch("555-0100"), chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			if err := mem.Close(); err != nil { // drains the queue
				t.Fatal(err)
			}
			h, err := mem.FactHistory(ctx, key, "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range h {
				got = append(got, fmt.Sprintf("%s=%s (seq %d)", f.Key, f.Value, f.SourceSeq))
			}
			if want := []string{"phone=555-0100 (seq 3)"}; !slices.Equal(got, want) {
				t.Errorf("fact history %q; want %q, from the new branch only", got, want)
			}
		})
	}
}

// gatedEmbedder gives the text before the redaction, the redacted text
// and any other text three orthogonal vectors.
type gatedEmbedder struct{ *gate }

func (gatedEmbedder) Name() string { return "test:gated" }
func (g gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		switch {
		case strings.Contains(t, "555-0199"):
			out[i] = []float32{1, 0, 0}
		case strings.Contains(t, "[redacted]"):
			out[i] = []float32{0, 1, 0}
		default:
			out[i] = []float32{0, 0, 1}
		}
	}
	return out, nil
}

// TestVectorsAfterRedactMidJob: the worker's embedder has read a message
// and is still working when the message is redacted. The vector of the
// old text must not be stored: the message is embedded again as redacted.
func TestVectorsAfterRedactMidJob(t *testing.T) {
	ctx := context.Background()
	g := newGate()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}, Embedder: gatedEmbedder{g}})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "redact-mid-embedding"}
	if _, err := mem.Append(ctx, key, []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "My phone number is 555-0199, call me about the order."},
		{Role: chatmem.RoleAssistant, Content: "Noted, we will call you about the order."},
	}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	g.waitStarted(t, "embedder")
	if _, _, err := mem.Redact(ctx, key, 1, "My phone number is [redacted], call me about the order.", chatmem.RedactOptions{}); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	if err := mem.Close(); err != nil { // drains the queue
		t.Fatal(err)
	}
	vs := mem.Store().(chatmem.VectorStore)
	similarity := func(query []float32) map[int64]float32 {
		hits, err := vs.NearestVectors(ctx, key, gatedEmbedder{}.Name(), query, 3, 10, 10)
		if err != nil {
			t.Fatal(err)
		}
		out := make(map[int64]float32, len(hits))
		for _, h := range hits {
			out[h.Seq] = h.Similarity
		}
		return out
	}
	if s := similarity([]float32{1, 0, 0})[1]; s > 0.5 {
		t.Errorf("message 1's stored vector is the text's before the redaction (similarity %v)", s)
	}
	if s, ok := similarity([]float32{0, 1, 0})[1]; !ok || s < 0.5 {
		t.Errorf("message 1's vector: similarity %v to the redacted text's (stored: %v); want it embedded again as redacted", s, ok)
	}
	if n := g.calls.Load(); n < 2 {
		t.Errorf("the embedder was called %d times; want the work done again after the redaction", n)
	}
}

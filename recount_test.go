package chatmem_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// countingCounter counts its Count calls.
type countingCounter struct {
	chatmem.Counter
	calls atomic.Int64
}

func (c *countingCounter) Count(ctx context.Context, m chatmem.Message) (int, error) {
	c.calls.Add(1)
	return c.Counter.Count(ctx, m)
}

// newRecountMemory returns a Memory over store counting with the estimate,
// which also resolves "double" to a counting doubleCounter.
func newRecountMemory(t *testing.T, store chatmem.Store) (*chatmem.Memory, *countingCounter) {
	t.Helper()
	double := &countingCounter{Counter: doubleCounter{}}
	mem, err := chatmem.New(store, chatmem.Options{
		Counter: tokenizer.Estimate{},
		Counters: func(name string) (chatmem.Counter, error) {
			if name == double.Name() {
				return double, nil
			}
			return nil, fmt.Errorf("%w: unknown tokenizer %q", chatmem.ErrInvalid, name)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return mem, double
}

// appendSeed appends the seed's history one message per append.
func appendSeed(t *testing.T, mem *chatmem.Memory, key chatmem.Key) {
	t.Helper()
	for _, m := range seed.History() {
		if _, err := mem.Append(t.Context(), key, []chatmem.Message{m}, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// windowString describes w for comparisons.
func windowString(w chatmem.Window) string {
	s := fmt.Sprintf("%d tokens, %d dropped:", w.Tokens, w.Dropped)
	for _, m := range w.Messages {
		s += fmt.Sprintf(" [%s %d %.20q]", m.Role, m.Tokens, m.Content)
	}
	return s
}

// TestMemoryRecount recounts the seed from the estimate to "double": the
// conversation records the new tokenizer and totals, and Context then sends
// from the stored counts, without counting anything, the windows that
// ContextOptions{Tokenizer: "double"} counted on the fly before; the old
// tokenizer is now the one counted on the fly.
func TestMemoryRecount(t *testing.T) {
	ctx := t.Context()
	mem, double := newRecountMemory(t, memstore.New())
	appendSeed(t, mem, seedKey)
	before, err := mem.Store().Conversation(ctx, seedKey)
	if err != nil {
		t.Fatal(err)
	}
	budgets := []int{25, 40, 100, 1000}
	policy := func(b int) chatmem.Policy { return chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: b} }
	onTheFly := map[int]string{} // budget -> window counted with "double"
	stored := map[int]string{}   // budget -> window from the estimate's stored counts
	for _, b := range budgets {
		w, err := mem.Context(ctx, seedKey, policy(b), chatmem.ContextOptions{Tokenizer: "double"})
		if err != nil {
			t.Fatalf("Context(budget=%d, tokenizer=double) error = %v", b, err)
		}
		onTheFly[b] = windowString(w)
		if w, err = mem.Context(ctx, seedKey, policy(b), chatmem.ContextOptions{}); err != nil {
			t.Fatalf("Context(budget=%d) error = %v", b, err)
		}
		stored[b] = windowString(w)
	}

	double.calls.Store(0)
	conv, err := mem.Recount(ctx, seedKey, "double")
	if err != nil {
		t.Fatalf("Recount(double) error = %v", err)
	}
	if n := double.calls.Load(); n != before.LastSeq {
		t.Errorf("Recount counted %d messages, want %d", n, before.LastSeq)
	}
	if conv.Tokenizer != "double" || conv.Tokens != 2*before.Tokens || conv.SystemTokens != 2*before.SystemTokens || conv.LastSeq != before.LastSeq {
		t.Errorf("Recount = tokenizer %q, %d tokens, %d system, last seq %d; want double, %d, %d, %d",
			conv.Tokenizer, conv.Tokens, conv.SystemTokens, conv.LastSeq, 2*before.Tokens, 2*before.SystemTokens, before.LastSeq)
	}

	double.calls.Store(0)
	for _, b := range budgets {
		for _, opts := range []chatmem.ContextOptions{{}, {Tokenizer: "double"}} {
			w, err := mem.Context(ctx, seedKey, policy(b), opts)
			if err != nil {
				t.Fatalf("Context(budget=%d, tokenizer=%q) after Recount error = %v", b, opts.Tokenizer, err)
			}
			if got := windowString(w); got != onTheFly[b] {
				t.Errorf("Context(budget=%d, tokenizer=%q) after Recount = %s\nwant (as counted on the fly before) %s", b, opts.Tokenizer, got, onTheFly[b])
			}
		}
		w, err := mem.Context(ctx, seedKey, policy(b), chatmem.ContextOptions{Tokenizer: "estimate"})
		if err != nil {
			t.Fatalf("Context(budget=%d, tokenizer=estimate) after Recount error = %v", b, err)
		}
		if got := windowString(w); got != stored[b] {
			t.Errorf("Context(budget=%d, tokenizer=estimate) after Recount = %s\nwant (as stored before) %s", b, got, stored[b])
		}
	}
	if n := double.calls.Load(); n != 0 {
		t.Errorf("Context after Recount counted %d messages with double, want 0: the stored counts serve", n)
	}

	// New messages are counted with the recorded tokenizer.
	res, err := mem.Append(ctx, seedKey, []chatmem.Message{{Role: chatmem.RoleAssistant, Content: "Done."}}, chatmem.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := doubleCounter{}.Count(ctx, res.Messages[0])
	if got := res.Messages[0].Tokens; got != want {
		t.Errorf("Append after Recount counted %d tokens, want %d (double)", got, want)
	}
}

func TestMemoryRecountErrors(t *testing.T) {
	ctx := t.Context()
	mem, _ := newRecountMemory(t, memstore.New())
	appendSeed(t, mem, seedKey)
	for _, c := range []struct {
		name      string
		key       chatmem.Key
		tokenizer string
		want      error
	}{
		{"unknown tokenizer", seedKey, "nope", chatmem.ErrInvalid},
		{"bad key", chatmem.Key{Tenant: "default", ID: "a b"}, "double", chatmem.ErrInvalid},
		{"missing conversation", chatmem.Key{Tenant: "default", ID: "missing"}, "double", chatmem.ErrNotFound},
	} {
		if _, err := mem.Recount(ctx, c.key, c.tokenizer); !errors.Is(err, c.want) {
			t.Errorf("Recount with %s error = %v, want %v", c.name, err, c.want)
		}
	}
	plain, _ := newRecountMemory(t, plainStore{memstore.New()})
	if _, err := plain.Recount(ctx, seedKey, "double"); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Recount on a store without Recounter error = %v, want ErrInvalid", err)
	}
}

// plainStore hides every optional interface of its Store.
type plainStore struct{ chatmem.Store }

// racingStore appends a message before each of its first `races` recounts
// reach the store, as a client appending meanwhile would.
type racingStore struct {
	*memstore.Store
	races int
}

func (s *racingStore) Recount(ctx context.Context, key chatmem.Key, tokenizer string, lastSeq int64, tokens []int) error {
	if s.races > 0 {
		s.races--
		msg := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("meanwhile %d", s.races), Tokens: 1}
		if _, err := s.Store.Append(ctx, key, []chatmem.Message{msg}, chatmem.AppendOptions{}); err != nil {
			return err
		}
	}
	return s.Store.Recount(ctx, key, tokenizer, lastSeq, tokens)
}

// TestMemoryRecountRetries checks that Recount tries again after appends
// arrived, counting only the new messages, and gives up with ErrConflict
// after three retries.
func TestMemoryRecountRetries(t *testing.T) {
	ctx := t.Context()
	store := &racingStore{Store: memstore.New()}
	mem, double := newRecountMemory(t, store)
	appendSeed(t, mem, seedKey)
	n := int64(len(seed.History()))

	store.races = 3
	double.calls.Store(0)
	conv, err := mem.Recount(ctx, seedKey, "double")
	if err != nil {
		t.Fatalf("Recount with 3 appends racing error = %v, want nil", err)
	}
	if conv.LastSeq != n+3 || conv.Tokenizer != "double" {
		t.Errorf("Recount = last seq %d, tokenizer %q; want %d, double", conv.LastSeq, conv.Tokenizer, n+3)
	}
	if got := double.calls.Load(); got != n+3 {
		t.Errorf("Recount counted %d messages, want %d: each once", got, n+3)
	}
	msgs, err := store.Range(ctx, seedKey, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, m := range msgs {
		want, _ := doubleCounter{}.Count(ctx, m)
		if m.Tokens != want {
			t.Errorf("seq %d has %d tokens, want %d", m.Seq, m.Tokens, want)
		}
		if m.Role != chatmem.RoleSystem {
			total += int64(m.Tokens)
		}
	}
	if conv.Tokens != total {
		t.Errorf("Recount Tokens = %d, want %d", conv.Tokens, total)
	}

	store.races = 4
	if _, err := mem.Recount(ctx, seedKey, "estimate"); !errors.Is(err, chatmem.ErrConflict) {
		t.Errorf("Recount with 4 appends racing error = %v, want ErrConflict", err)
	}
	if c, _ := store.Conversation(ctx, seedKey); c.Tokenizer != "double" {
		t.Errorf("Tokenizer after a failed Recount = %q, want double", c.Tokenizer)
	}
}

// convHookStore runs hook once, right after the first Conversation read
// it serves: another process acting between an append's read and its
// write.
type convHookStore struct {
	chatmem.Store
	hook func()
	once atomic.Bool
}

func (s *convHookStore) Conversation(ctx context.Context, key chatmem.Key) (chatmem.Conversation, error) {
	c, err := s.Store.Conversation(ctx, key)
	if s.once.CompareAndSwap(false, true) {
		s.hook()
	}
	return c, err
}

// TestAppendRecountedMeanwhile: another process recounts the conversation
// under another tokenizer between an append's read and its write. The
// store refuses the messages counted under the old one, and the append
// counts them again with the new.
func TestAppendRecountedMeanwhile(t *testing.T) {
	ctx := t.Context()
	base := memstore.New()
	other, _ := newRecountMemory(t, base) // the other process
	key := chatmem.Key{Tenant: "acme", ID: "recounted"}
	if _, err := other.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "Hi, I am Kavya."}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	store := &convHookStore{Store: base, hook: func() {
		if _, err := other.Recount(ctx, key, "double"); err != nil {
			t.Errorf("Recount: %v", err)
		}
	}}
	mem, _ := newRecountMemory(t, store) // no window read: no cache entry, the append reads first
	res, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "Where is my order SE-10423?"}}, chatmem.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !store.once.Load() {
		t.Fatal("the append read no conversation before writing")
	}
	m := res.Messages[0]
	if want, _ := (doubleCounter{}).Count(ctx, m); m.Tokens != want {
		t.Errorf("the append counted %d tokens, want %d (double, the tokenizer since the recount)", m.Tokens, want)
	}
	conv, err := base.Conversation(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := base.Range(ctx, key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, m := range msgs {
		total += m.Tokens
	}
	if conv.Tokenizer != "double" || int64(total) != conv.Tokens || len(msgs) != 2 {
		t.Errorf("the conversation holds %d messages of %d tokens under %q, its total says %d; want 2 under double, adding up", len(msgs), total, conv.Tokenizer, conv.Tokens)
	}
}

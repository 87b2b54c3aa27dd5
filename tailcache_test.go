package chatmem_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// readCounter counts a store's message reads.
type readCounter struct {
	chatmem.Store
	tails, ranges, systems, convs, sinces atomic.Int64
}

// sinceCounter is a readCounter that passes the store's SinceReader
// through, counting its reads, so that Memory reads the conversation's row
// and its new messages in one call.
type sinceCounter struct{ *readCounter }

func (s sinceCounter) ConversationSince(ctx context.Context, key chatmem.Key, after int64, limit int) (chatmem.Conversation, []chatmem.Message, error) {
	s.sinces.Add(1)
	return s.Store.(chatmem.SinceReader).ConversationSince(ctx, key, after, limit)
}

// tailAppendCounter is a sinceCounter that passes the store's
// TailAppender through, counting its calls.
type tailAppendCounter struct {
	sinceCounter
	appendTails *atomic.Int64
}

func (s tailAppendCounter) AppendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead, error) {
	s.appendTails.Add(1)
	return s.Store.(chatmem.TailAppender).AppendTail(ctx, key, msgs, opts, q)
}

func (s *readCounter) Tail(ctx context.Context, key chatmem.Key, q chatmem.TailQuery) ([]chatmem.Message, error) {
	s.tails.Add(1)
	return s.Store.Tail(ctx, key, q)
}

func (s *readCounter) Range(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.Message, error) {
	s.ranges.Add(1)
	return s.Store.Range(ctx, key, after, limit)
}

func (s *readCounter) System(ctx context.Context, key chatmem.Key) ([]chatmem.Message, error) {
	s.systems.Add(1)
	return s.Store.System(ctx, key)
}

func (s *readCounter) Conversation(ctx context.Context, key chatmem.Key) (chatmem.Conversation, error) {
	s.convs.Add(1)
	return s.Store.Conversation(ctx, key)
}

// Postings and MessagesAt pass the store's search through (every store of
// this module has one), for the recall policy.
func (s *readCounter) Postings(ctx context.Context, key chatmem.Key, terms []string, before int64, limit int) ([][]int64, error) {
	return s.Store.(chatmem.Searcher).Postings(ctx, key, terms, before, limit)
}

func (s *readCounter) MessagesAt(ctx context.Context, key chatmem.Key, seqs []int64) ([]chatmem.Message, error) {
	return s.Store.(chatmem.Searcher).MessagesAt(ctx, key, seqs)
}

func (s *readCounter) reads() string {
	return fmt.Sprintf("tail %d, range %d, system %d, conversation %d, conversation since %d",
		s.tails.Load(), s.ranges.Load(), s.systems.Load(), s.convs.Load(), s.sinces.Load())
}

func (s *readCounter) reset() {
	s.tails.Store(0)
	s.ranges.Store(0)
	s.systems.Store(0)
	s.convs.Store(0)
	s.sinces.Store(0)
}

// eighthCounter counts a token per 8 bytes of content: short messages
// count none.
type eighthCounter struct{}

func (eighthCounter) Name() string { return "eighth" }
func (eighthCounter) Count(_ context.Context, m chatmem.Message) (int, error) {
	return len(m.Content) / 8, nil
}

func newCachedMemory(t testing.TB, store chatmem.Store, cacheBytes int64) *chatmem.Memory {
	return newCountedMemory(t, store, tokenizer.Estimate{}, cacheBytes)
}

func newCountedMemory(t testing.TB, store chatmem.Store, c chatmem.Counter, cacheBytes int64) *chatmem.Memory {
	t.Helper()
	mem, err := chatmem.New(store, chatmem.Options{Counter: c, TailCacheBytes: cacheBytes})
	if err != nil {
		t.Fatal(err)
	}
	return mem
}

// TestTailCacheTurnReads: once a conversation's window has been read, a
// turn's context reads the conversation's row and the turn's new messages
// (one Range, or both in one ConversationSince from a SinceReader),
// whichever process appended them, not the window again.
func TestTailCacheTurnReads(t *testing.T) {
	t.Run("range", func(t *testing.T) { testTailCacheTurnReads(t, false) })
	t.Run("since", func(t *testing.T) { testTailCacheTurnReads(t, true) })
}

func testTailCacheTurnReads(t *testing.T, since bool) {
	ctx := context.Background()
	store := &readCounter{Store: memstore.New()}
	var counted chatmem.Store = store
	if since {
		counted = sinceCounter{store}
	}
	mem := newCachedMemory(t, counted, 0)
	other := newCachedMemory(t, counted, 0) // another process on the same store
	// oneRead reports whether a turn read only what it should: the row and
	// at most one range (none after this process's own append, which
	// extends the entry), or one ConversationSince.
	oneRead := func() bool {
		if store.tails.Load()+store.systems.Load() != 0 {
			return false
		}
		if since {
			return store.sinces.Load() == 1 && store.ranges.Load()+store.convs.Load() == 0
		}
		return store.ranges.Load() <= 1 && store.convs.Load() == 1 && store.sinces.Load() == 0
	}
	key := chatmem.Key{Tenant: "acme", ID: "turns"}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}
	turn := func(m *chatmem.Memory, i int) {
		t.Helper()
		msgs := []chatmem.Message{
			{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("why ", 10))},
			{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("because ", 20))},
		}
		if _, err := m.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	window := func(m *chatmem.Memory) chatmem.Window {
		t.Helper()
		w, err := m.Context(ctx, key, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleSystem, Content: "Be brief."}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		turn(mem, i)
	}
	window(mem) // fills the cache
	for i := 100; i < 120; i++ {
		turn(mem, i)
		store.reset()
		w := window(mem)
		if !oneRead() {
			t.Fatalf("turn %d read %s; want the conversation's row and one range, or one conversation since", i, store.reads())
		}
		if got := w.Messages[len(w.Messages)-1].Content; !strings.HasPrefix(got, fmt.Sprintf("answer %d:", i)) {
			t.Fatalf("turn %d: the window ends with %q", i, got)
		}
		if w.Messages[0].Role != chatmem.RoleSystem || w.Messages[0].Content != "Be brief." {
			t.Fatalf("turn %d: the window starts with %+v, want the system message", i, w.Messages[0])
		}
	}
	turn(other, 120)
	turn(other, 121)
	store.reset()
	w := window(mem)
	if !oneRead() {
		t.Fatalf("after another process's appends the turn read %s; want the row and one range, or one conversation since", store.reads())
	}
	if got := w.Messages[len(w.Messages)-1].Content; !strings.HasPrefix(got, "answer 121:") {
		t.Fatalf("the window ends with %q, want the other process's last reply", got)
	}
	// A window's messages are the caller's: changing them changes no other.
	w.Messages[len(w.Messages)-1].Content = "changed"
	w.Messages[len(w.Messages)-1].Metadata = map[string]string{"x": "y"}
	if w2 := window(mem); w2.Messages[len(w2.Messages)-1].Content == "changed" || w2.Messages[len(w2.Messages)-1].Metadata != nil {
		t.Fatal("changing a window's message changed the next window")
	}
}

// TestTailCacheAppend: a turn's append to a conversation whose tail is
// cached reads nothing first, the store checking the tokenizer the cache
// knows (AppendOptions.ExpectedTokenizer); after another process recounted
// the conversation under another tokenizer, the append reads it and
// counts with the new one.
func TestTailCacheAppend(t *testing.T) {
	ctx := t.Context()
	store := &readCounter{Store: memstore.New()}
	mem, _ := newRecountMemory(t, store)
	other, _ := newRecountMemory(t, store.Store) // another process, uncounted
	key := chatmem.Key{Tenant: "acme", ID: "append"}
	appendOne := func(m *chatmem.Memory, text string) chatmem.Message {
		t.Helper()
		res, err := m.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text}}, chatmem.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Messages[0]
	}
	appendOne(mem, "Hi, I am Kavya.")
	if _, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 100}, chatmem.ContextOptions{}); err != nil {
		t.Fatal(err)
	}
	store.reset()
	m := appendOne(mem, "My order SE-10423 has not arrived.")
	if store.convs.Load()+store.ranges.Load()+store.tails.Load()+store.systems.Load() != 0 {
		t.Errorf("an append to a cached conversation read %s; want nothing", store.reads())
	}
	if want, _ := (tokenizer.Estimate{}).Count(ctx, m); m.Tokens != want {
		t.Errorf("the append counted %d tokens, want %d (estimate)", m.Tokens, want)
	}

	if _, err := other.Recount(ctx, key, "double"); err != nil {
		t.Fatal(err)
	}
	store.reset()
	m = appendOne(mem, "Where is it now?")
	if want, _ := (doubleCounter{}).Count(ctx, m); m.Tokens != want {
		t.Errorf("the append after another process's recount counted %d tokens, want %d (double)", m.Tokens, want)
	}
	if store.convs.Load() == 0 {
		t.Errorf("the append after another process's recount read %s; want the conversation read, to learn its tokenizer", store.reads())
	}
	conv, err := store.Conversation(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if conv.Tokenizer != "double" || conv.LastSeq != 3 {
		t.Errorf("the conversation is at %d under %q, want 3 under double", conv.LastSeq, conv.Tokenizer)
	}
}

// TestTailCacheMatchesStore: whatever the appends (by this Memory, by
// another on the same store, many at once, system messages, messages that
// count no tokens), deletes and re-creations, every window assembled with
// the cache is the one assembled from the store alone, under token
// budgets, turn limits and recall of every size. (Recall here found its
// ranking summing scores in map order, which broke ties between equal
// candidates differently from call to call.)
func TestTailCacheMatchesStore(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		store string
		seed  uint64
		since bool // read through the store's SinceReader
	}{{"memory", 1, false}, {"memory", 2, false}, {"memory", 3, true}, {"memory", 4, true}, {"sqlite", 5, false}, {"sqlite", 6, true}} {
		name := fmt.Sprint(tc.store, tc.seed)
		if tc.since {
			name += "-since"
		}
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 7))
			var base chatmem.Store = memstore.New()
			if tc.store == "sqlite" {
				s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "chatmem.db"), sqlite.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				base = s
			}
			store := &readCounter{Store: base}
			var counted chatmem.Store = store
			if tc.since {
				counted = sinceCounter{store}
			}
			cached := newCountedMemory(t, counted, eighthCounter{}, 64<<10) // small: evictions happen
			other := newCountedMemory(t, base, eighthCounter{}, 0)
			plain := newCountedMemory(t, base, eighthCounter{}, -1)
			keys := []chatmem.Key{{Tenant: "t", ID: "a"}, {Tenant: "t", ID: "b"}, {Tenant: "u", ID: "a"}}
			text := func() string {
				if rng.IntN(10) == 0 {
					return "ok" // no tokens for eighthCounter
				}
				words := []string{"order", "parcel", "refund", "Kavya", "shoes", "size", "blue", "Malmo", "tracking", "word"}
				var b strings.Builder
				for range rng.IntN(60) {
					b.WriteString(words[rng.IntN(len(words))] + " ")
				}
				return b.String() + fmt.Sprint(rng.IntN(50))
			}
			batch := func(n int) []chatmem.Message {
				msgs := make([]chatmem.Message, n)
				for i := range msgs {
					switch r := rng.IntN(20); {
					case r == 0:
						msgs[i] = chatmem.Message{Role: chatmem.RoleSystem, Content: text()}
					case r < 10:
						msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: text()}
					default:
						msgs[i] = chatmem.Message{Role: chatmem.RoleAssistant, Content: text(), Metadata: map[string]string{"i": fmt.Sprint(i)}}
					}
				}
				return msgs
			}
			served, steps := 0, 3000
			if tc.store == "sqlite" {
				steps = 500
			}
			for step := range steps {
				key := keys[rng.IntN(len(keys))]
				switch r := rng.IntN(100); {
				case r < 30:
					if _, err := cached.Append(ctx, key, batch(1+rng.IntN(3)), chatmem.AppendOptions{}); err != nil {
						t.Fatal(err)
					}
				case r < 40:
					if _, err := other.Append(ctx, key, batch(1+rng.IntN(3)), chatmem.AppendOptions{}); err != nil {
						t.Fatal(err)
					}
				case r < 41:
					if _, err := other.Append(ctx, key, batch(300), chatmem.AppendOptions{}); err != nil {
						t.Fatal(err)
					}
				case r < 43:
					if err := base.Delete(ctx, key); err != nil && !errors.Is(err, chatmem.ErrNotFound) {
						t.Fatal(err)
					}
				default:
					var p chatmem.Policy
					switch rng.IntN(5) {
					case 3:
						p = chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 10 + rng.IntN(800)}
					case 4:
						p = chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Recall: true, Budget: 10 + rng.IntN(800)}
					case 0:
						p = chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 10 + rng.IntN(800)}
					case 1:
						p = chatmem.Policy{Kind: chatmem.PolicyLastTurns, Turns: 1 + rng.IntN(8)}
					default:
						p = chatmem.Policy{Kind: chatmem.PolicyLastTurns, Turns: 1 + rng.IntN(8), Budget: 10 + rng.IntN(800)}
					}
					before := store.tails.Load()
					got, gerr := cached.Context(ctx, key, p, chatmem.ContextOptions{})
					want, werr := plain.Context(ctx, key, p, chatmem.ContextOptions{})
					if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d, %s, %+v:\ncached %+v, %v\nstore  %+v, %v", step, key, p, got, gerr, want, werr)
					}
					if gerr == nil && store.tails.Load() == before {
						served++
					}
				}
				if size, sum, bound := chatmem.TailCacheSize(cached); size != sum || size > bound {
					t.Fatalf("step %d: the cache counts %d bytes, its entries %d, bound %d", step, size, sum, bound)
				}
			}
			if tc.since && store.sinces.Load() == 0 {
				t.Fatal("no turn read through ConversationSince")
			}
			if served < steps/6 {
				t.Fatalf("the cache served %d windows without a tail read; the test does not exercise it", served)
			}
			t.Logf("%d windows served from the cache", served)
		})
	}
}

// TestTailCacheConcurrent: goroutines taking turns in shared and own
// conversations through one Memory (run with -race) always see a window
// that ends with the newest message they know of and holds no gap.
func TestTailCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	mem := newCachedMemory(t, memstore.New(), 16<<10)
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 300}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			key := chatmem.Key{Tenant: "t", ID: fmt.Sprint("own-", g)}
			if g%2 == 0 {
				key.ID = "shared"
			}
			for i := range 200 {
				res, err := mem.Append(ctx, key, []chatmem.Message{
					{Role: chatmem.RoleUser, Content: fmt.Sprintf("g%d question %d %s", g, i, strings.Repeat("x ", i%40))},
					{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("g%d answer %d", g, i)},
				}, chatmem.AppendOptions{})
				if err != nil {
					errs <- err
					return
				}
				w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
				if err != nil {
					errs <- err
					return
				}
				last := res.Messages[1].Seq
				if n := len(w.Messages); n == 0 || w.Messages[n-1].Seq < last {
					errs <- fmt.Errorf("%s: after appending up to %d the window ends at %+v", key, last, w.Messages[n-1:])
					return
				}
				for j := 1; j < len(w.Messages); j++ {
					if w.Messages[j].Seq != w.Messages[j-1].Seq+1 {
						errs <- fmt.Errorf("%s: the window has a gap between %d and %d", key, w.Messages[j-1].Seq, w.Messages[j].Seq)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if size, sum, bound := chatmem.TailCacheSize(mem); size != sum || size > bound {
		t.Fatalf("the cache counts %d bytes, its entries %d, bound %d", size, sum, bound)
	}
}

// lenCounter: one token per byte of content.
type lenCounter struct{}

func (lenCounter) Name() string { return "len" }
func (lenCounter) Count(_ context.Context, m chatmem.Message) (int, error) {
	return len(m.Content), nil
}

func mustAppend(t *testing.T, m *chatmem.Memory, key chatmem.Key, msgs ...chatmem.Message) {
	t.Helper()
	if _, err := m.Append(context.Background(), key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

func compare(t *testing.T, what string, cached, plain *chatmem.Memory, key chatmem.Key, p chatmem.Policy, opts chatmem.ContextOptions) (chatmem.Window, error) {
	t.Helper()
	ctx := context.Background()
	got, gerr := cached.Context(ctx, key, p, opts)
	want, werr := plain.Context(ctx, key, p, opts)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
		t.Errorf("%s: windows differ\ncached %+v, %v\nplain  %+v, %v", what, got, gerr, want, werr)
	}
	return got, gerr
}

// TestTailCacheSystemMessagesAreCopies: a caller changing a system
// message of a window (here one assembled past the cache, from the read
// that filled it) changes no later window. (Found by review.)
func TestTailCacheSystemMessagesAreCopies(t *testing.T) {
	ctx := context.Background()
	base := memstore.New()
	cached := newCountedMemory(t, base, lenCounter{}, 0)
	plain := newCountedMemory(t, base, lenCounter{}, -1)
	key := chatmem.Key{Tenant: "t", ID: "alias"}
	mustAppend(t, cached, key,
		chatmem.Message{Role: chatmem.RoleSystem, Content: "S", Metadata: map[string]string{"k": "v"}},
		chatmem.Message{Role: chatmem.RoleUser, Content: strings.Repeat("x", 250)},
		chatmem.Message{Role: chatmem.RoleAssistant, Content: strings.Repeat("a", 10)},
		chatmem.Message{Role: chatmem.RoleUser, Content: strings.Repeat("b", 10)},
	)
	w, err := cached.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 101}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Messages[0].Metadata["k"] = "changed by caller"
	compare(t, "after caller mutated a returned system message", cached, plain, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 16}, chatmem.ContextOptions{})
}

// hookStore runs hook once, inside the first System call after arming.
type hookStore struct {
	chatmem.Store
	mu   sync.Mutex
	hook func()
}

func (s *hookStore) System(ctx context.Context, key chatmem.Key) ([]chatmem.Message, error) {
	s.mu.Lock()
	h := s.hook
	s.hook = nil
	s.mu.Unlock()
	if h != nil {
		h()
	}
	return s.Store.System(ctx, key)
}

// TestTailCacheRaceWithSystemRead: another process appends between
// Context's conversation read and its system read (ending in a message
// over twice the budget, so the tail read is empty): the entry must not
// keep a system message past its LastSeq, which catching up would add
// again. (Found by review.)
func TestTailCacheRaceWithSystemRead(t *testing.T) {
	base := memstore.New()
	hs := &hookStore{Store: base}
	cached := newCountedMemory(t, hs, lenCounter{}, 0)
	plain := newCountedMemory(t, base, lenCounter{}, -1)
	other := newCountedMemory(t, base, lenCounter{}, -1)
	key := chatmem.Key{Tenant: "t", ID: "dup"}
	mustAppend(t, cached, key,
		chatmem.Message{Role: chatmem.RoleSystem, Content: "S1"},
		chatmem.Message{Role: chatmem.RoleUser, Content: "hello"},
		chatmem.Message{Role: chatmem.RoleAssistant, Content: "hi"})
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 40}
	hs.hook = func() {
		mustAppend(t, other, key,
			chatmem.Message{Role: chatmem.RoleSystem, Content: "S2"},
			chatmem.Message{Role: chatmem.RoleUser, Content: strings.Repeat("h", 200)})
	}
	w, err := cached.Context(context.Background(), key, p, chatmem.ContextOptions{})
	t.Logf("racing turn: %v %v", w.Messages, err)
	mustAppend(t, other, key,
		chatmem.Message{Role: chatmem.RoleAssistant, Content: "too long"},
		chatmem.Message{Role: chatmem.RoleUser, Content: "short"})
	got, _ := compare(t, "after the race", cached, plain, key, p, chatmem.ContextOptions{})
	t.Logf("cached window: %+v", got.Messages)
}

// TestTailCacheEmptyQuery: budgets that leave the recent part a token or
// none give the same window cached or not.
func TestTailCacheEmptyQuery(t *testing.T) {
	for _, p := range []chatmem.Policy{
		{Kind: chatmem.PolicyRecall, Budget: 9},
		{Kind: chatmem.PolicyRecall, Budget: 5},
		{Kind: chatmem.PolicySummaryBuffer, Recall: true, Budget: 1},
	} {
		base := memstore.New()
		cached := newCountedMemory(t, base, lenCounter{}, 0)
		plain := newCountedMemory(t, base, lenCounter{}, -1)
		key := chatmem.Key{Tenant: "t", ID: "zero"}
		for i := range 5 {
			mustAppend(t, cached, key,
				chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprint("q", i)},
				chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprint("a", i)})
		}
		compare(t, "first", cached, plain, key, p, chatmem.ContextOptions{})
		mustAppend(t, cached, key,
			chatmem.Message{Role: chatmem.RoleUser, Content: "Q"},
			chatmem.Message{Role: chatmem.RoleAssistant, Content: "A"})
		w, err := compare(t, "second", cached, plain, key, p, chatmem.ContextOptions{})
		t.Logf("%+v: %d msgs %v", p, len(w.Messages), err)
	}
}

// TestTailCacheBoundsEmptyEntries: entries holding no message (the
// newest one is over the budget) count against the bound too. (Found by
// review.)
func TestTailCacheBoundsEmptyEntries(t *testing.T) {
	base := memstore.New()
	cached := newCountedMemory(t, base, lenCounter{}, 1<<10) // 1 KiB bound
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 50}
	for i := range 2000 {
		key := chatmem.Key{Tenant: "t", ID: fmt.Sprint("c", i)}
		mustAppend(t, cached, key, chatmem.Message{Role: chatmem.RoleUser, Content: strings.Repeat("x", 200)})
		cached.Context(context.Background(), key, p, chatmem.ContextOptions{}) // ErrBudgetTooSmall
	}
	size, sum, bound := chatmem.TailCacheSize(cached)
	if n := chatmem.TailCacheEntries(cached); n > 4 || size != sum || size > bound {
		t.Errorf("entries %d, accounted size %d (sum %d), bound %d", n, size, sum, bound)
	}
}

// TestCachedTail: the newest messages from the tail cache, with no read,
// as the store holds them; none when the cache cannot tell (no entry, a
// run that does not reach back far enough); and an append conditional on
// the last seq it gave that fails, writing nothing, once another process
// appended, after which Turn with that condition reads the store.
func TestCachedTail(t *testing.T) {
	ctx := t.Context()
	store := &readCounter{Store: memstore.New()}
	mem, _ := newRecountMemory(t, store)
	other, _ := newRecountMemory(t, store.Store)
	key := chatmem.Key{Tenant: "acme", ID: "cached-tail"}
	if _, _, _, ok := mem.CachedTail(key, 4); ok {
		t.Fatal("CachedTail answered for a conversation the cache has never seen")
	}
	var msgs []chatmem.Message
	for i := range 20 {
		msgs = append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d", i)},
			chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
	}
	msgs = append(msgs[:3], append([]chatmem.Message{{Role: chatmem.RoleSystem, Content: "Be brief."}}, msgs[3:]...)...)
	if _, err := mem.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 12}
	if _, err := mem.Context(ctx, key, p, chatmem.ContextOptions{}); err != nil {
		t.Fatal(err)
	}
	store.reset()
	got, last, _, ok := mem.CachedTail(key, 4)
	if !ok || last != 41 {
		t.Fatalf("CachedTail(4) = last %d, ok %v; want 41, true", last, ok)
	}
	if store.convs.Load()+store.ranges.Load()+store.tails.Load()+store.systems.Load() != 0 {
		t.Errorf("CachedTail read %s; want nothing", store.reads())
	}
	want, err := store.Range(ctx, key, 37, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("CachedTail(4) = %d messages, the store's newest 4 are %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].Content != want[i].Content {
			t.Errorf("CachedTail(4)[%d] = %d %q, want %d %q", i, got[i].Seq, got[i].Content, want[i].Seq, want[i].Content)
		}
	}
	if _, _, _, ok := mem.CachedTail(key, 41); ok {
		t.Error("CachedTail(41) answered from an entry that holds a 12-token window's run")
	}

	// Another process appends: the cache is behind, and a Turn
	// conditional on its last seq fails without writing.
	if _, err := other.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "elsewhere"}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	turn := []chatmem.Message{{Role: chatmem.RoleUser, Content: "here"}}
	_, _, err = mem.Turn(ctx, key, turn, chatmem.AppendOptions{ExpectedLastSeq: &last}, p, chatmem.ContextOptions{})
	if !errors.Is(err, chatmem.ErrConflict) {
		t.Fatalf("Turn conditional on the stale cache's last seq: %v, want ErrConflict", err)
	}
	if conv, _ := store.Conversation(ctx, key); conv.LastSeq != 42 {
		t.Errorf("after the failed Turn the conversation ends at %d, want 42", conv.LastSeq)
	}
	if _, _, _, ok := mem.CachedTail(key, 1); ok {
		t.Error("the stale entry is still there after the failed Turn")
	}
	at := int64(42)
	res, w, err := mem.Turn(ctx, key, turn, chatmem.AppendOptions{ExpectedLastSeq: &at}, p, chatmem.ContextOptions{})
	if err != nil || res.Messages[0].Seq != 43 {
		t.Fatalf("Turn conditional on the store's last seq: %v, %+v", err, res.Messages)
	}
	if n := len(w.Messages); n < 2 || w.Messages[n-2].Content != "elsewhere" || w.Messages[n-1].Content != "here" {
		t.Errorf("the window ends %+v, want the other's message then this one", w.Messages)
	}
}

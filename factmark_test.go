package chatmem_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// countingExtractor finds one fact per user message (key "m<seq>", the
// message's content as its value) and counts, per message content, the
// calls that returned that message's fact: extractions whose facts can be
// stored. While gate is open (not closed) a call waits for it; once killed
// is closed, a waiting call and every later one fail, as calls of a
// process that died would never answer.
type countingExtractor struct {
	gate    chan struct{}
	killed  chan struct{}
	entered chan struct{} // one value per call that started

	mu     *sync.Mutex
	counts map[string]int // shared between the extractors of one test
}

func newCountingExtractor(gated bool, mu *sync.Mutex, counts map[string]int) *countingExtractor {
	x := &countingExtractor{gate: make(chan struct{}), killed: make(chan struct{}), entered: make(chan struct{}, 1000), mu: mu, counts: counts}
	if !gated {
		close(x.gate)
	}
	return x
}

func (x *countingExtractor) Name() string { return "counting" }

func (x *countingExtractor) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	select {
	case x.entered <- struct{}{}:
	default:
	}
	select {
	case <-x.gate:
	case <-x.killed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case <-x.killed:
		return nil, errors.New("the process died")
	default:
	}
	var out []chatmem.Fact
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, m := range msgs {
		if m.Role != chatmem.RoleUser {
			continue
		}
		x.counts[m.Content]++
		out = append(out, chatmem.Fact{Key: fmt.Sprintf("m%d", m.Seq), Value: m.Content, SourceSeq: m.Seq, Confidence: 1})
	}
	return out, nil
}

// turn returns a user message (content "<id> said <n>") and a reply.
func turn(key chatmem.Key, n int) []chatmem.Message {
	return []chatmem.Message{
		{Role: chatmem.RoleUser, Content: fmt.Sprintf("%s said %d", key.ID, n)},
		{Role: chatmem.RoleAssistant, Content: "noted"},
	}
}

// wantExtractedOnce checks that every user message of the conversations
// was extracted exactly once, by the counts and in the store: its fact is
// current, with one value in its history, and the fact mark is at the
// conversation's last message.
func wantExtractedOnce(t *testing.T, store chatmem.Store, mu *sync.Mutex, counts map[string]int, keys []chatmem.Key) {
	t.Helper()
	ctx := t.Context()
	fs, fm := store.(chatmem.FactStore), store.(chatmem.FactMarker)
	mu.Lock()
	defer mu.Unlock()
	for _, key := range keys {
		msgs, err := store.Range(ctx, key, 0, 0)
		if err != nil {
			t.Fatalf("Range(%s) error = %v", key, err)
		}
		for _, m := range msgs {
			if m.Role != chatmem.RoleUser {
				continue
			}
			if n := counts[m.Content]; n != 1 {
				t.Errorf("%s seq %d (%q) extracted %d times, want 1", key, m.Seq, m.Content, n)
			}
			h, err := fs.FactHistory(ctx, key, fmt.Sprintf("m%d", m.Seq))
			if err != nil || len(h) != 1 || h[0].Value != m.Content {
				t.Errorf("%s: FactHistory(m%d) = %+v, %v; want one value %q", key, m.Seq, h, err, m.Content)
			}
		}
		mk, err := fm.FactMark(ctx, key)
		if err != nil || mk.Seq != mk.LastSeq {
			t.Errorf("%s: FactMark = %+v, %v; want Seq = LastSeq", key, mk, err)
		}
	}
}

// waitEntered waits until the extractor has started a call. The bound is
// only there to name the failure instead of hanging until go test's
// timeout: it is generous, for a loaded machine running -race.
func waitEntered(t *testing.T, x *countingExtractor) {
	t.Helper()
	select {
	case <-x.entered:
	case <-time.After(2 * time.Minute):
		t.Fatal("the extractor was never called")
	}
}

func flush(t *testing.T, mem *chatmem.Memory) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := mem.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// TestFactsOfDroppedWorkCatchUp fills the worker's queue so that appends'
// work is dropped, then checks that the dropped messages' facts are
// extracted at the conversation's next append, or by the scan the next
// Start runs, each message once.
func TestFactsOfDroppedWorkCatchUp(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	var mu sync.Mutex
	counts := map[string]int{}
	x := newCountingExtractor(true, &mu, counts)
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{x}, QueueSize: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	flush(t, mem) // the startup scan has found nothing to do: it must not pick up the dropped work below
	tenant := "dropped"
	keys := make([]chatmem.Key, 6)
	for i := range keys {
		keys[i] = chatmem.Key{Tenant: tenant, ID: fmt.Sprintf("c%d", i)}
	}
	add := func(key chatmem.Key, n int) {
		t.Helper()
		if _, err := mem.Append(ctx, key, turn(key, n), chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	add(keys[0], 1)
	waitEntered(t, x) // the only worker is busy with c0
	for _, key := range keys[1:] {
		add(key, 1) // c1 fills the queue; c2..c5 are dropped
		add(key, 2)
	}
	close(x.gate)
	flush(t, mem)
	for _, key := range keys[2:] {
		if mk, err := store.FactMark(ctx, key); err != nil || mk.Seq != 0 {
			t.Fatalf("%s: FactMark = %+v, %v; want 0: its work should have been dropped (the test no longer fills the queue)", key, mk, err)
		}
	}

	// The next append catches up on what was dropped before it.
	add(keys[2], 3)
	flush(t, mem)
	if err := mem.Close(); err != nil {
		t.Fatal(err)
	}
	wantExtractedOnce(t, store, &mu, counts, keys[:3])

	// The next process's Start finds the rest.
	next, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{newCountingExtractor(false, &mu, counts)}, QueueSize: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Start(); err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	flush(t, next)
	wantExtractedOnce(t, store, &mu, counts, keys)
}

// TestFactsOfAKilledWorkerCatchUp kills a process (its extractor never
// answers, and it is abandoned) while its worker extracts, and checks
// that a new process over the same SQLite file extracts every message's
// facts at its Start, each once.
func TestFactsOfAKilledWorkerCatchUp(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "chatmem.db")
	first, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	x := newCountingExtractor(true, &mu, counts)
	opts := chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{x}, Workers: 1,
		Summary: chatmem.SummaryOptions{Retries: 1, Backoff: time.Millisecond}}
	mem, err := chatmem.New(first, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	keys := []chatmem.Key{{Tenant: "killed", ID: "a"}, {Tenant: "killed", ID: "b"}, {Tenant: "other", ID: "c"}}
	for n := 1; n <= 3; n++ {
		for _, key := range keys {
			if _, err := mem.Append(ctx, key, turn(key, n), chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitEntered(t, x)
	// The kill: the call in flight, and those of the work still queued,
	// never store anything.
	close(x.killed)
	mem.Close()
	first.Close()

	second, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	var fm chatmem.FactMarker = second
	for _, key := range keys {
		if mk, err := fm.FactMark(ctx, key); err != nil || mk.Seq != 0 {
			t.Fatalf("%s: FactMark after the kill = %+v, %v; want 0", key, mk, err)
		}
	}
	opts.Extractors = []chatmem.Extractor{newCountingExtractor(false, &mu, counts)}
	restarted, err := chatmem.New(second, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.Start(); err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	flush(t, restarted)
	wantExtractedOnce(t, second, &mu, counts, keys)
}

// lostReplyStore stores facts and the fact mark, and then reports a
// failure, as a store whose reply was lost on the way back would.
type lostReplyStore struct {
	*memstore.Store
	mu   sync.Mutex
	lost int
}

func (s *lostReplyStore) SetFactsThrough(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact, prev, through int64) error {
	if err := s.Store.SetFactsThrough(ctx, key, created, facts, prev, through); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost++
	return fmt.Errorf("%w: connection reset after the write", chatmem.ErrUnavailable)
}

// TestFactsOfALostReplyAreNotExtractedAgain checks the other side of the
// promise: facts stored with their mark, whose acknowledgement was lost,
// are not extracted again by the next append's work.
func TestFactsOfALostReplyAreNotExtractedAgain(t *testing.T) {
	ctx := t.Context()
	store := &lostReplyStore{Store: memstore.New()}
	var mu sync.Mutex
	counts := map[string]int{}
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}, Sync: true,
		Extractors: []chatmem.Extractor{newCountingExtractor(false, &mu, counts)}})
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "lost", ID: "c"}
	for n := 1; n <= 4; n++ {
		if _, err := mem.Append(ctx, key, turn(key, n), chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if store.lost != 4 {
		t.Fatalf("%d writes lost their reply, want 4", store.lost)
	}
	wantExtractedOnce(t, store, &mu, counts, []chatmem.Key{key})
	if mu.Lock(); len(counts) != 4 || !strings.HasPrefix(fmt.Sprint(counts), "map[c said 1:1") {
		t.Errorf("extractions = %v, want each of the 4 user messages once", counts)
	}
	mu.Unlock()
}

package chatmem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

// Regression: facts extracted from a deleted conversation once landed in
// its successor with the same ID.
type gateExtractor struct{ gate chan struct{} }

func (g gateExtractor) Name() string { return "gate" }
func (g gateExtractor) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	<-g.gate
	var out []chatmem.Fact
	for _, m := range msgs {
		if m.Role == chatmem.RoleUser && strings.HasPrefix(m.Content, "name ") {
			out = append(out, chatmem.Fact{Key: "name", Value: strings.TrimPrefix(m.Content, "name "), SourceSeq: m.Seq, Confidence: 1})
		}
	}
	return out, nil
}

func TestFactsOfADeletedConversationDoNotReachItsSuccessor(t *testing.T) {
	ctx := context.Background()
	gate := make(chan struct{})
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{gateExtractor{gate}}})
	if err != nil {
		t.Fatal(err)
	}
	mem.Start()
	defer mem.Close()
	key := chatmem.Key{Tenant: "t", ID: "x"}
	mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "name Alice"}}, chatmem.AppendOptions{})
	time.Sleep(20 * time.Millisecond) // worker is now inside Extract for Alice's job
	if err := mem.Store().Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello, I am someone else"}}, chatmem.AppendOptions{})
	close(gate)
	mem.Flush(ctx)
	facts, _ := mem.Facts(ctx, key)
	if len(facts) != 0 {
		t.Errorf("new conversation got the deleted one's facts: %+v", facts)
	}
}

// Regression (3): empty window with nil error.
func TestContextSkipsAnUnansweredCallInsteadOfAnEmptyWindow(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "big"}
	_, err := mem.Append(ctx, key, []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "look it up"},
		{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: "c1", Type: "function", Function: chatmem.FunctionCall{Name: "f", Arguments: strings.Repeat("x", 4000)}}}},
	}, chatmem.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 100}, chatmem.ContextOptions{})
	all, _ := mem.Store().Range(ctx, key, 0, 0)
	aw, aerr := chatmem.TokenBudget(all, 100)
	t.Logf("Apply: %d msgs err=%v", len(aw.Messages), aerr)
	if err == nil && len(w.Messages) == 0 {
		t.Errorf("Context returned an empty window with nil error (Apply gives %d messages)", len(aw.Messages))
	}
}

// Regression (4): Dropped wrong when Pending does not fully fit.
func TestDroppedWithPendingThatDoesNotFit(t *testing.T) {
	ctx := context.Background()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "pend"}
	_, err := mem.Append(ctx, key, []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "sys one sys one"},
		{Role: chatmem.RoleSystem, Content: "sys two sys two"},
		{Role: chatmem.RoleUser, Content: strings.Repeat("u", 400)},
		{Role: chatmem.RoleAssistant, Content: strings.Repeat("a", 400)},
	}, chatmem.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pending := []chatmem.Message{
		{Role: chatmem.RoleUser, Content: strings.Repeat("p", 400)},
		{Role: chatmem.RoleAssistant, Content: strings.Repeat("q", 400)},
		{Role: chatmem.RoleUser, Content: "short"},
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 50}, chatmem.ContextOptions{Pending: pending})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range w.Messages {
		t.Logf("%d %s %.10q", m.Seq, m.Role, m.Content)
	}
	if w.Dropped != 2 {
		t.Errorf("Dropped = %d, want 2 (stored u,a not sent; both system messages sent)", w.Dropped)
	}
}

// Regression: a run of more than 256 messages without a user message (an
// agent's tool loop) once stalled summarization for good.
func TestSummaryCrossesLongToolLoops(t *testing.T) {
	ctx := context.Background()
	mem := newSummaryMemory(t, offline.NewSummarizer(offline.Options{}), chatmem.Options{Summary: chatmem.SummaryOptions{Trigger: 200, Target: 100}, Sync: true})
	key := chatmem.Key{Tenant: "t", ID: "agent"}
	mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "run the job, my order is SE-1"}}, chatmem.AppendOptions{})
	for i := 0; i < 150; i++ {
		id := fmt.Sprintf("c%d", i)
		_, err := mem.Append(ctx, key, []chatmem.Message{
			{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{{ID: id, Type: "function", Function: chatmem.FunctionCall{Name: "step", Arguments: "{}"}}}},
			{Role: chatmem.RoleTool, ToolCallID: id, Content: "step done"},
		}, chatmem.AppendOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	appendTurns(t, mem, key, 0, 40)
	s, err := mem.Summary(ctx, key)
	conv, _ := mem.Store().Conversation(ctx, key)
	if err != nil {
		t.Errorf("no summary after %d messages (%d tokens): %v", conv.LastSeq, conv.Tokens, err)
	} else {
		t.Logf("summary covers %d of %d", s.CoversSeq, conv.LastSeq)
	}
	_ = errors.Is
}

// Regression (soak): a Delete and a re-creating append that landed between
// the worker's check of the conversation's CreatedAt and its write put the
// deleted conversation's facts and summary into its successor.
// recreatingStore makes that interleaving certain: it deletes the
// conversation and starts it again just before the next summary or fact
// write.
type recreatingStore struct {
	*memstore.Store
	armed bool
}

func (s *recreatingStore) recreate(ctx context.Context, key chatmem.Key) {
	if !s.armed {
		return
	}
	s.armed = false
	if err := s.Store.Delete(ctx, key); err != nil {
		panic(err)
	}
	// As long as the old one, so that a summary of it would fit.
	other := make([]chatmem.Message, 20)
	for i := range other {
		other[i] = chatmem.Message{Role: chatmem.RoleUser, Content: "hello, I am someone else", Tokens: 6}
	}
	if _, err := s.Store.Append(ctx, key, other, chatmem.AppendOptions{}); err != nil {
		panic(err)
	}
}

func (s *recreatingStore) PutSummary(ctx context.Context, key chatmem.Key, sum chatmem.Summary, prev int64) error {
	s.recreate(ctx, key)
	return s.Store.PutSummary(ctx, key, sum, prev)
}

func (s *recreatingStore) PutSummaryOf(ctx context.Context, key chatmem.Key, created time.Time, sum chatmem.Summary, prev int64) error {
	s.recreate(ctx, key)
	return s.Store.PutSummaryOf(ctx, key, created, sum, prev)
}

func (s *recreatingStore) SetFacts(ctx context.Context, key chatmem.Key, facts []chatmem.Fact) error {
	s.recreate(ctx, key)
	return s.Store.SetFacts(ctx, key, facts)
}

func (s *recreatingStore) SetFactsOf(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact) error {
	s.recreate(ctx, key)
	return s.Store.SetFactsOf(ctx, key, created, facts)
}

func (s *recreatingStore) SetFactsThrough(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact, prev, through int64) error {
	s.recreate(ctx, key)
	return s.Store.SetFactsThrough(ctx, key, created, facts, prev, through)
}

func TestWritesOfADeletedConversationDoNotReachItsSuccessor(t *testing.T) {
	ctx := context.Background()
	gate := make(chan struct{})
	close(gate)
	key := chatmem.Key{Tenant: "t", ID: "x"}
	var msgs []chatmem.Message
	for i := range 6 {
		msgs = append(msgs,
			chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("name Alice the %dth, asking about order A-%d again", i, i)},
			chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("Order A-%d ships on Monday, Alice; anything else?", i)})
	}
	for _, c := range []struct {
		what string
		opts chatmem.Options
	}{
		{"facts", chatmem.Options{Extractors: []chatmem.Extractor{gateExtractor{gate}}}},
		{"summary", chatmem.Options{Summarizer: offline.NewSummarizer(offline.Options{}), Summary: chatmem.SummaryOptions{Trigger: 60, Target: 20}}},
	} {
		store := &recreatingStore{Store: memstore.New(), armed: true}
		c.opts.Counter, c.opts.Sync = tokenizer.Estimate{}, true
		mem, err := chatmem.New(store, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if store.armed {
			t.Fatalf("%s: the worker wrote nothing; the test no longer tests the race", c.what)
		}
		if facts, err := store.Facts(ctx, key); err != nil || len(facts) != 0 {
			t.Errorf("%s: the new conversation's facts = %+v, %v; want none of the deleted one's", c.what, facts, err)
		}
		if s, err := store.Summary(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
			t.Errorf("%s: the new conversation's summary = %q, %v; want none (ErrNotFound)", c.what, s.Text, err)
		}
	}
}

// slowFactWrites is a memory store whose extraction writes announce
// themselves and then take a while, so that an application's SetFacts can
// land between an extraction's read of the current values and its write.
type slowFactWrites struct {
	*memstore.Store
	writing chan struct{}
}

func (s slowFactWrites) SetFactsThrough(ctx context.Context, key chatmem.Key, created time.Time, facts []chatmem.Fact, prev, through int64) error {
	if len(facts) > 0 {
		close(s.writing)
		time.Sleep(50 * time.Millisecond)
	}
	return s.Store.SetFactsThrough(ctx, key, created, facts, prev, through)
}

// Regression (CI, TestMCPStdio): an extraction that compared the values
// before the application set the same fact wrote after it, and the fact
// the app set came back "set by rules". The app's write and an
// extraction's compare-and-write now take the conversation's fact lock.
func TestAppFactSetDuringAnExtractionKeepsItsProvenance(t *testing.T) {
	ctx := context.Background()
	store := slowFactWrites{memstore.New(), make(chan struct{})}
	open := make(chan struct{})
	close(open)
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{gateExtractor{open}}})
	if err != nil {
		t.Fatal(err)
	}
	mem.Start()
	defer mem.Close()
	key := chatmem.Key{Tenant: "t", ID: "x"}
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "name Kavya"}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- mem.Flush(ctx) }()
	select {
	case <-store.writing: // the extraction has compared and is writing
	case <-time.After(time.Minute):
		t.Fatal("no extraction wrote facts within a minute")
	}
	if err := mem.SetFacts(ctx, key, []chatmem.Fact{{Key: "name", Value: "Kavya"}}); err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	facts, err := mem.Facts(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 1 || facts[0].Value != "Kavya" || facts[0].SetBy != "app" {
		t.Errorf("facts = %+v, want name=Kavya set by app", facts)
	}
}

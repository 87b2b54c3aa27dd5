package chatmem_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

func TestParsePrices(t *testing.T) {
	p, err := chatmem.ParsePrices([]byte(`{"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
		"emb": {"embedding_input": 0.02}, "o3": {"input": 2, "output": 8, "reasoning": 9}}`))
	if err != nil {
		t.Fatal(err)
	}
	mini := p["gpt-4o-mini"]
	if mini.Reasoning != 0.6 || mini.EmbeddingInput != 0.15 {
		t.Errorf("defaults = %+v, want reasoning at output's price and embedding at input's", mini)
	}
	// 1M input of which 400k cached, 100k output of which 30k reasoning.
	tok := chatmem.Tokens{Input: 1_000_000, CachedInput: 400_000, Output: 100_000, Reasoning: 30_000}
	if got, want := p["o3"].Cost(tok), 0.6*2+0.4*2+0.07*8+0.03*9; math.Abs(got-want) > 1e-9 {
		t.Errorf("o3 cost = %g, want %g", got, want)
	}
	if got, want := mini.Cost(tok), 0.6*0.15+0.4*0.075+0.1*0.6; math.Abs(got-want) > 1e-9 {
		t.Errorf("mini cost = %g, want %g", got, want)
	}
	for _, bad := range []string{`{"m": {"inputs": 1}}`, `{"m": {"input": -1}}`, `{"m": {}}`, `{"a b": {"input": 1}}`, `[1]`, `{"m": {"input": 1}} x`} {
		if _, err := chatmem.ParsePrices([]byte(bad)); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("ParsePrices(%s) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]chatmem.Limit{
		"":                              {},
		"2000 tokens per day":           {Tokens: 2000, Period: chatmem.PeriodDay},
		"5.5 cost per month":            {Cost: 5.5, Period: chatmem.PeriodMonth},
		"1000 tokens, 2 cost per month": {Tokens: 1000, Cost: 2, Period: chatmem.PeriodMonth},
		" 7 tokens per day ":            {Tokens: 7, Period: chatmem.PeriodDay},
	} {
		got, err := chatmem.ParseLimit(in)
		if err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if again, _ := chatmem.ParseLimit(got.String()); again != got {
			t.Errorf("ParseLimit(%q.String() = %q) = %+v, want %+v", in, got.String(), again, got)
		}
	}
	for _, bad := range []string{"2000 tokens", "2000 tokens per week", "0 tokens per day", "-1 cost per day", "1 tokens, 2 tokens per day", "x tokens per day", "5 dollars per day"} {
		if _, err := chatmem.ParseLimit(bad); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("ParseLimit(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

// failingUsage is a UsageStore whose adds fail while fail is set.
type failingUsage struct {
	chatmem.UsageStore
	fail bool
}

func (f *failingUsage) AddUsage(ctx context.Context, recs []chatmem.UsageRecord) error {
	if f.fail {
		return chatmem.ErrUnavailable
	}
	return f.UsageStore.AddUsage(ctx, recs)
}

// TestLedgerFlushKeeps: counts whose write failed are written by the next
// flush, none lost and none twice.
func TestLedgerFlushKeeps(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 5, 1, 10, 30, 0, 0, time.UTC)
	st := &failingUsage{UsageStore: memstore.New(), fail: true}
	l := chatmem.NewLedger(chatmem.LedgerOptions{Store: st, FlushInterval: time.Hour, Now: func() time.Time { return now }})
	u := chatmem.Usage{Tenant: "acme", User: "ana", Conversation: "c1", Model: "m", Kind: chatmem.CallChat, Tokens: chatmem.Tokens{Input: 10, Output: 2}}
	l.Record(ctx, u)
	if err := l.Flush(ctx); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Fatalf("Flush with the store failing = %v, want ErrUnavailable", err)
	}
	l.Record(ctx, u)
	st.fail = false
	q := chatmem.UsageQuery{Tenant: "acme", From: now.Truncate(time.Hour), To: now.Truncate(time.Hour).Add(time.Hour), GroupBy: chatmem.GroupByUser}
	rep, err := l.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Calls != 2 || rep.Total.Input != 20 || l.FlushErrors() != 1 {
		t.Errorf("after a failed flush and a good one: %+v (flush errors %d), want 2 calls, 20 input tokens", rep.Total, l.FlushErrors())
	}
	// Invalid usage is not counted.
	l.Record(ctx, chatmem.Usage{Tenant: "acme", Model: "m", Kind: "dream"})
	if rep, _ := l.Query(ctx, q); rep.Total.Calls != 2 {
		t.Errorf("an invalid record was counted: %+v", rep.Total)
	}
}

// TestLedgerAllow: a limit refuses at and over it, counts the refusals,
// and allows again in the next period.
func TestLedgerAllow(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 5, 1, 23, 0, 0, 0, time.UTC)
	l := chatmem.NewLedger(chatmem.LedgerOptions{Store: memstore.New(), Now: func() time.Time { return now },
		Limits: func(tenant string) chatmem.TenantLimits {
			return chatmem.TenantLimits{Memory: chatmem.Limit{Tokens: 100, Period: chatmem.PeriodDay}}
		}})
	if err := l.Allow(ctx, "acme", true); err != nil {
		t.Fatalf("Allow before any spend = %v", err)
	}
	l.Record(ctx, chatmem.Usage{Tenant: "acme", Model: "m", Kind: chatmem.CallSummarize, Tokens: chatmem.Tokens{Input: 90, Output: 10}})
	if err := l.Allow(ctx, "acme", true); !errors.Is(err, chatmem.ErrBudgetExhausted) {
		t.Errorf("Allow at the limit = %v, want ErrBudgetExhausted", err)
	}
	if err := l.Allow(ctx, "acme", false); err != nil {
		t.Errorf("Allow of a proxied call (no proxy limit) = %v", err)
	}
	if err := l.Allow(ctx, "globex", true); err != nil {
		t.Errorf("Allow of another tenant = %v", err)
	}
	var refused int64
	l.Refused(func(tenant, limit string, n int64) {
		if tenant == "acme" && limit == "memory" {
			refused = n
		}
	})
	if refused != 1 {
		t.Errorf("refusals = %d, want 1", refused)
	}
	now = now.Add(2 * time.Hour) // the next UTC day
	if err := l.Allow(ctx, "acme", true); err != nil {
		t.Errorf("Allow the next day = %v", err)
	}
}

// reportingSummarizer is a model summarizer (not Local) that reports 50
// input and 10 output tokens per call and counts its calls.
type reportingSummarizer struct{ calls atomic.Int64 }

func (*reportingSummarizer) Name() string { return "reporting" }
func (r *reportingSummarizer) Summarize(ctx context.Context, prev string, msgs []chatmem.Message) (string, error) {
	r.calls.Add(1)
	chatmem.ReportUsage(ctx, chatmem.ModelUsage{Model: "mini", Tokens: chatmem.Tokens{Input: 50, Output: 10}})
	return fmt.Sprintf("summary through seq %d", msgs[len(msgs)-1].Seq), nil
}

// TestWorkerHoldsOverLimit: with the worker (not Sync), a tenant over its
// memory limit gets no summarizer calls, its work is held, not lost, and
// Resume does it once the limit allows: the summary then covers every
// message appended meanwhile.
func TestWorkerHoldsOverLimit(t *testing.T) {
	ctx := t.Context()
	store := memstore.New()
	var limit atomic.Int64
	limit.Store(1)
	l := chatmem.NewLedger(chatmem.LedgerOptions{Store: store, FlushInterval: -1, Limits: func(string) chatmem.TenantLimits {
		return chatmem.TenantLimits{Memory: chatmem.Limit{Tokens: limit.Load(), Period: chatmem.PeriodDay}}
	}})
	sum := &reportingSummarizer{}
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}, Summarizer: sum, Ledger: l,
		Summary: chatmem.SummaryOptions{Trigger: 30, Target: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	key := chatmem.Key{Tenant: "acme", ID: "c1"}
	appendTurns(t, mem, key, 0, 4)
	if err := mem.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	first := sum.calls.Load()
	if first == 0 {
		t.Fatal("no summarizer call before the limit")
	}
	appendTurns(t, mem, key, 4, 6)
	if err := mem.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sum.calls.Load(); n != first {
		t.Errorf("summarizer calls over the limit: %d, then %d; want none more", first, n)
	}
	if mem.Held() != 1 {
		t.Errorf("Held() = %d, want 1", mem.Held())
	}
	conv, err := mem.Conversation(ctx, key)
	if err != nil || conv.LastSeq != 20 {
		t.Fatalf("conversation = %+v, %v; want all 20 messages", conv, err)
	}
	limit.Store(1 << 40)
	mem.Resume()
	if err := mem.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if sum.calls.Load() == first || mem.Held() != 0 {
		t.Errorf("after Resume: %d summarizer calls (%d before), %d held; want more calls, none held", sum.calls.Load(), first, mem.Held())
	}
	s, err := mem.Summary(ctx, key)
	if err != nil || s.CoversSeq < 17 {
		t.Errorf("summary after Resume = %+v, %v; want one over the messages appended over the limit", s, err)
	}
	rep, err := l.Query(ctx, chatmem.UsageQuery{Tenant: "acme", From: time.Now().UTC().Truncate(time.Hour), To: time.Now().UTC().Truncate(time.Hour).Add(time.Hour), GroupBy: chatmem.GroupByConversation})
	if err != nil || rep.Total.Calls != sum.calls.Load() || rep.Groups[0].ByKind[chatmem.CallSummarize].Input != 50*sum.calls.Load() {
		t.Errorf("usage = %+v, %v; want %d summarize calls of 50 input tokens", rep, err, sum.calls.Load())
	}
}

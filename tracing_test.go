package chatmem_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// recorder is a chatmem.Tracer that keeps the spans it starts, with their
// parents, for the tests of the hook's contract.
type recorder struct {
	mu    sync.Mutex
	spans []*recSpan
}

type recSpan struct {
	name   string
	kind   chatmem.SpanKind
	parent *recSpan
	attrs  map[string]any
	ended  bool
	err    error
}

type spanKey struct{}

func (r *recorder) Start(ctx context.Context, name string, kind chatmem.SpanKind, attrs ...chatmem.Attr) (context.Context, chatmem.Span) {
	parent, _ := ctx.Value(spanKey{}).(*recSpan)
	s := &recSpan{name: name, kind: kind, parent: parent, attrs: map[string]any{}}
	s.SetAttributes(attrs...)
	r.mu.Lock()
	r.spans = append(r.spans, s)
	r.mu.Unlock()
	return context.WithValue(ctx, spanKey{}, s), s
}

func (r *recorder) Inject(context.Context, func(string, string))                       {}
func (r *recorder) Extract(ctx context.Context, _ func(string) string) context.Context { return ctx }

func (s *recSpan) SetName(name string) { s.name = name }
func (s *recSpan) SetAttributes(attrs ...chatmem.Attr) {
	for _, a := range attrs {
		s.attrs[a.Key] = a.Value
	}
}
func (s *recSpan) End(err error) { s.ended, s.err = true, err }

// TestTracer: a Memory with a Tracer assembles the same windows as one
// without; each read is a chatmem.context span whose attributes say what
// the window holds, with the store's reads as its children; every span
// ends; and Store still hands out the store itself.
func TestTracer(t *testing.T) {
	ctx := t.Context()
	rec := &recorder{}
	plainStore, tracedStore := memstore.New(), memstore.New()
	clock := func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }
	plain, err := chatmem.New(plainStore, chatmem.Options{Counter: tokenizer.Estimate{}, Sync: true, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	traced, err := chatmem.New(tracedStore, chatmem.Options{Counter: tokenizer.Estimate{}, Sync: true, Now: clock, Tracer: rec})
	if err != nil {
		t.Fatal(err)
	}
	if traced.Store() != chatmem.Store(tracedStore) {
		t.Errorf("Store() = %T, want the store New got", traced.Store())
	}
	key := chatmem.Key{Tenant: "acme", ID: "kavya"}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 60}
	for i := range 6 {
		msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: fmt.Sprintf("question %d about order SE-1042%d", i, i)}}
		_, want, err := plain.Turn(ctx, key, msgs, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := traced.Turn(ctx, key, msgs, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("turn %d: traced window %+v, want %+v", i, got, want)
		}
		reply := []chatmem.Message{{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("answer %d, and it is a longer one than the question", i)}}
		if _, err := plain.Append(ctx, key, reply, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := traced.Append(ctx, key, reply, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := plain.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.spans = nil
	w, err := traced.Context(ctx, key, p, chatmem.ContextOptions{})
	if err != nil || !reflect.DeepEqual(w, want) {
		t.Fatalf("traced Context = %+v, %v; want %+v", w, err, want)
	}
	var asm *recSpan
	for _, s := range rec.spans {
		if !s.ended {
			t.Errorf("span %s not ended", s.name)
		}
		if s.name == "chatmem.context" {
			asm = s
		}
	}
	if asm == nil || asm.parent != nil || asm.kind != chatmem.SpanInternal {
		t.Fatalf("no chatmem.context root span among %d spans", len(rec.spans))
	}
	first := w.Messages[0].Seq
	for k, v := range map[string]any{
		"chatmem.policy": "token_budget", "chatmem.policy.budget": 60, "gen_ai.conversation.id": "kavya", "chatmem.tenant": "acme",
		"chatmem.window.tokens": w.Tokens, "chatmem.window.tokens.recent": w.Parts.Recent, "chatmem.window.sent": len(w.Messages),
		"chatmem.window.seq_ranges": fmt.Sprintf("%d-12", first), "chatmem.window.dropped": int(first - 1),
	} {
		if asm.attrs[k] != v {
			t.Errorf("chatmem.context %s = %v (%T), want %v (%T)", k, asm.attrs[k], asm.attrs[k], v, v)
		}
	}
	var reads []string
	for _, s := range rec.spans {
		if s.parent == asm {
			if s.kind != chatmem.SpanStore || s.attrs["db.operation.name"] != s.name[len("store."):] {
				t.Errorf("child span %s: kind %v, db.operation.name %v", s.name, s.kind, s.attrs["db.operation.name"])
			}
			reads = append(reads, s.name)
		}
	}
	if !slices.Contains(reads, "store.Conversation") && !slices.Contains(reads, "store.ConversationSince") {
		t.Errorf("the read's store spans %v hold no conversation read", reads)
	}

	// A conversation that does not exist is an answer, not a failure.
	rec.spans = nil
	if _, err := traced.Context(ctx, chatmem.Key{Tenant: "acme", ID: "nobody"}, p, chatmem.ContextOptions{}); err == nil {
		t.Fatal("Context of a missing conversation succeeded")
	}
	for _, s := range rec.spans {
		if s.err != nil {
			t.Errorf("span %s failed with %v for a missing conversation", s.name, s.err)
		}
	}
}

// TestTracerKeepsReceipts: a traced Memory still finds the store's
// optional abilities on the store itself: a receipt appended with a reply
// is kept and read back, as without a tracer.
func TestTracerKeepsReceipts(t *testing.T) {
	ctx := t.Context()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}, Tracer: &recorder{}})
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "acme", ID: "kavya"}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 200}
	_, w, err := mem.Turn(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "where is order SE-10423?"}},
		chatmem.AppendOptions{}, p, chatmem.ContextOptions{Receipt: true})
	if err != nil {
		t.Fatal(err)
	}
	if w.Receipt == nil {
		t.Fatal("no receipt with the window")
	}
	b, err := chatmem.EncodeReceipt(w.Receipt)
	if err != nil {
		t.Fatal(err)
	}
	res, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleAssistant, Content: "It ships today."}}, chatmem.AppendOptions{Receipt: b})
	if err != nil {
		t.Fatal(err)
	}
	seq := res.Messages[0].Seq
	got, err := mem.Receipt(ctx, key, seq)
	if err != nil {
		t.Fatalf("Receipt(%d) with a tracer: %v", seq, err)
	}
	if !reflect.DeepEqual(got.Sent, w.Receipt.Sent) {
		t.Errorf("stored receipt sent %+v, want %+v", got.Sent, w.Receipt.Sent)
	}
}

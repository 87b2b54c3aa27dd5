package chatmem

import (
	"context"
	"errors"
	"strconv"
)

// Tracer traces Memory's work: the context assembly, the store calls and,
// through the packages that make them, the model calls. It is the hook a
// tracing system (OpenTelemetry, in the telemetry package) implements, so
// that this package depends on none. Options.Tracer nil traces nothing and
// costs nothing: no span is started, no attribute built. Implementations
// are safe for concurrent use.
type Tracer interface {
	// Start begins a span named name as a child of the span ctx carries (a
	// new trace when it carries none) and returns ctx carrying the new
	// span. The caller ends the span.
	Start(ctx context.Context, name string, kind SpanKind, attrs ...Attr) (context.Context, Span)
	// Inject writes the trace context of ctx's span (W3C traceparent and
	// tracestate) with set, for a request that continues the trace.
	Inject(ctx context.Context, set func(key, value string))
	// Extract returns ctx carrying the remote span context that get finds
	// (W3C traceparent and tracestate), the parent of the spans started
	// from it; ctx as it is when there is none or it is invalid.
	Extract(ctx context.Context, get func(key string) string) context.Context
}

// Span is one traced operation. Its methods are safe to call after End,
// which does nothing then.
type Span interface {
	// SetName renames the span, for a name known only later (an HTTP
	// request's route).
	SetName(name string)
	// SetAttributes adds attributes; a key given again replaces the value.
	SetAttributes(attrs ...Attr)
	// End ends the span; a non-nil err marks it failed and is recorded
	// with it.
	End(err error)
}

// SpanKind is what a span stands for, as OpenTelemetry's span kinds do,
// with the store's calls apart so a tracer can add what it knows of the
// store.
type SpanKind int

// The span kinds.
const (
	// SpanInternal is work inside the process (the context assembly).
	SpanInternal SpanKind = iota
	// SpanServer is a request served (an HTTP request).
	SpanServer
	// SpanClient is a request made to another service (a model).
	SpanClient
	// SpanStore is a call to the store: a client span, to which the tracer
	// adds the store's system (db.system.name).
	SpanStore
)

// Attr is one span attribute. Value is a string, bool, int, int64,
// float64, []string or []int64; a tracer writes any other as text.
type Attr struct {
	Key   string
	Value any
}

// tracedContext is context in a span ("chatmem.context") whose attributes
// say what the window holds (assemblyAttrs). The store reads it makes are
// its children.
func (m *Memory) tracedContext(ctx context.Context, key Key, p Policy, opts ContextOptions, known *Conversation) (Window, error) {
	ctx, sp := m.tracer.Start(ctx, "chatmem.context", SpanInternal)
	w, err := m.contextSteps(ctx, key, p, opts, known)
	sp.SetAttributes(assemblyAttrs(key, p, opts, known != nil, w, err)...)
	failed := err
	if errors.Is(err, ErrNotFound) {
		// No such conversation (yet): an answer, not a failure.
		sp.SetAttributes(Attr{"chatmem.context.outcome", "not_found"})
		failed = nil
	}
	sp.End(failed)
	return w, err
}

// assemblyAttrs are the attributes of a context assembly's span: the
// conversation, the policy and its parameters, the tokens of each part of
// the window, the stored messages sent (their count and seq ranges) and
// left out, the summary and facts sent. It is the one place that maps what
// an assembly knows onto attributes; a failed assembly has the request's
// part only.
func assemblyAttrs(key Key, p Policy, opts ContextOptions, turn bool, w Window, err error) []Attr {
	attrs := []Attr{
		{"chatmem.tenant", key.Tenant},
		{"gen_ai.conversation.id", key.ID},
		{"chatmem.policy", string(p.Kind)},
		{"chatmem.policy.budget", p.Budget},
		{"chatmem.context.turn", turn},
		{"chatmem.context.preview", opts.Preview},
		{"chatmem.context.pending", len(opts.Pending)},
	}
	if p.Turns > 0 {
		attrs = append(attrs, Attr{"chatmem.policy.turns", p.Turns})
	}
	if p.Facts {
		attrs = append(attrs, Attr{"chatmem.policy.facts", true})
	}
	if p.Recall {
		attrs = append(attrs, Attr{"chatmem.policy.recall", true})
	}
	if p.Scope != "" {
		attrs = append(attrs, Attr{"chatmem.policy.scope", p.Scope})
	}
	if p.Cache != "" {
		attrs = append(attrs, Attr{"chatmem.policy.cache", p.Cache})
	}
	if opts.Tokenizer != "" {
		attrs = append(attrs, Attr{"chatmem.context.tokenizer", opts.Tokenizer})
	}
	if err != nil {
		return attrs
	}
	sent, ranges := storedRanges(w.Messages)
	attrs = append(attrs,
		Attr{"chatmem.window.tokens", w.Tokens},
		Attr{"chatmem.window.tokens.system", w.Parts.System},
		Attr{"chatmem.window.tokens.facts", w.Parts.Facts},
		Attr{"chatmem.window.tokens.summary", w.Parts.Summary},
		Attr{"chatmem.window.tokens.recalled", w.Parts.Recalled},
		Attr{"chatmem.window.tokens.recent", w.Parts.Recent},
		Attr{"chatmem.window.tokens.overhead", w.Parts.Overhead},
		Attr{"chatmem.window.tokens.reserved", w.Reserved},
		Attr{"chatmem.window.messages", len(w.Messages)},
		Attr{"chatmem.window.sent", sent},
		Attr{"chatmem.window.seq_ranges", ranges},
		Attr{"chatmem.window.dropped", w.Dropped},
		Attr{"chatmem.window.facts", len(w.Facts)},
	)
	if w.Summary != nil {
		attrs = append(attrs, Attr{"chatmem.window.summary.covers_seq", w.Summary.CoversSeq})
	}
	return attrs
}

// storedRanges counts the stored messages of msgs (Seq above 0: not made
// up, as facts and summary blocks are) and writes their seqs as ranges in
// the window's order, "1-3,7,9-12".
func storedRanges(msgs []Message) (int, string) {
	var b []byte
	n := 0
	for i := 0; i < len(msgs); i++ {
		if msgs[i].Seq <= 0 {
			continue
		}
		n++
		j := i
		for j+1 < len(msgs) && msgs[j+1].Seq == msgs[j].Seq+1 {
			j++
			n++
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, msgs[i].Seq, 10)
		if j > i {
			b = append(b, '-')
			b = strconv.AppendInt(b, msgs[j].Seq, 10)
		}
		i = j
	}
	return n, string(b)
}

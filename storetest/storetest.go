// Package storetest is the conformance suite every chatmem.Store passes. It
// is the executable form of the contract documented on chatmem.Store: each
// store's test file calls Run with a Harness that opens fresh stores, and its
// benchmark file calls BenchmarkTail.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T) chatmem.Store { return memstore.New() },
//		})
//	}
package storetest

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/chatmem/chatmem"
)

// Harness opens stores for the suite.
type Harness struct {
	// New returns a store over fresh, empty state (its own database schema,
	// key prefix, or instance). Called once per subtest; the harness
	// registers cleanup with t.Cleanup.
	New func(t *testing.T) chatmem.Store
	// Reopen returns another store over the same data as s, as a second
	// process would have. Nil if the store cannot (memory); the suite then
	// uses s itself.
	Reopen func(t *testing.T, s chatmem.Store) chatmem.Store
	// Dump returns everything s holds in its backend, raw: the database
	// file with its WAL, every row of its schema, every key and value
	// under its prefix, or its internals. The erasure subtest scans it
	// for what a deleted user left; nil skips that subtest.
	Dump func(t *testing.T, s chatmem.Store) []byte
	// EraseSteps installs step, which s's DeleteUser then calls between
	// its steps (each a transaction, script or round trip that leaves
	// the store consistent), in the goroutine that called it; nil
	// removes it. The erasure race subtest makes the writers' store
	// calls there. Nil for a store whose DeleteUser is one atomic step
	// (memory).
	EraseSteps func(s chatmem.Store, step func())
}

// reopen returns a second store over s's data, or s itself when the harness
// cannot open one.
func (h Harness) reopen(t *testing.T, s chatmem.Store) chatmem.Store {
	t.Helper()
	if h.Reopen == nil {
		return s
	}
	return h.Reopen(t, s)
}

// Run runs the conformance suite against the stores h opens, one subtest per
// behaviour of the chatmem.Store contract, and of chatmem.SummaryStore and
// chatmem.FactStore when the stores implement them.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest.Run: Harness.New is nil")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// tests lists the subtests in the order Run runs them.
var tests = []subtest{
	{"Ping", testPing},
	{"AppendOrder", testAppendOrder},
	{"NotFound", testNotFound},
	{"EmptyBatch", testEmptyBatch},
	{"InvalidKeys", testInvalidKeys},
	{"Idempotency", testIdempotency},
	{"IdempotencyProbe", testIdempotencyProbe},
	{"IdempotencyFingerprint", testIdempotencyFingerprint},
	{"Conflict", testConflict},
	{"TokenizerConflict", testTokenizerConflict},
	{"ConditionalAppend", testConditionalAppend},
	{"ConcurrentAppends", testConcurrentAppends},
	{"TenantIsolation", testTenantIsolation},
	{"Delete", testDelete},
	{"TTL", testTTL},
	{"PurgeInactive", testPurgeInactive},
	{"List", testList},
	{"ConversationMetadata", testConversationMetadata},
	{"TailTokens", testTailTokens},
	{"TailTurns", testTailTurns},
	{"System", testSystem},
	{"Range", testRange},
	{"ConversationSince", optional[chatmem.SinceReader](sinceTests)},
	{"AppendTail", optional[chatmem.TailAppender](appendTailTests)},
	{"Content", testContent},
	{"CreatedAtRange", testCreatedAtRange},
	{"ContextCanceled", testContextCanceled},
	{"LongTail", testLongTail},
	{"Summary", testSummaries},
	{"Facts", testFacts},
	{"Generation", testGenerations},
	{"FactMark", testFactMarks},
	{"Lease", testLeases},
	{"Recount", testRecounts},
	{"Rewind", testRewinds},
	{"Redact", testRedactions},
	{"Security", testSecurity},
	{"Search", testSearch},
	{"Vectors", testVectors},
	{"Users", optional[chatmem.UserStore](userTests)},
	{"Usage", optional[chatmem.UsageStore](usageTests)},
	{"Receipts", optional[chatmem.ReceiptStore](receiptTests)},
}

// BenchmarkTail fills one conversation of s per size (user and assistant
// messages of 20 tokens each) and measures Tail{Tokens: 4000} on it, one
// sub-benchmark per size named "messages=N". Stores call it from their own
// BenchmarkTail; the time per operation should not grow with the size.
func BenchmarkTail(b *testing.B, s chatmem.Store, sizes []int) {
	ctx := context.Background()
	for _, n := range sizes {
		key := chatmem.Key{Tenant: randomTenant(), ID: fmt.Sprintf("bench-%d", n)}
		fill(b, ctx, s, key, n)
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				msgs, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: 4000})
				if err != nil {
					b.Fatal(err)
				}
				if len(msgs) == 0 {
					b.Fatal("Tail returned no messages")
				}
			}
		})
	}
}

// subtest is one named behaviour of the contract.
type subtest struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// optional returns a subtest that runs tests if the harness's stores
// implement the optional interface I, and logs that they do not otherwise.
func optional[I any](tests []subtest) func(t *testing.T, h Harness) {
	return func(t *testing.T, h Harness) {
		if _, ok := h.New(t).(I); !ok {
			t.Logf("store does not implement %v", reflect.TypeFor[I]())
			return
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
		}
	}
}

// as returns s as the optional interface I, failing the test if it is not.
func as[I any](t *testing.T, s chatmem.Store) I {
	t.Helper()
	i, ok := s.(I)
	if !ok {
		t.Fatalf("store %T does not implement %v", s, reflect.TypeFor[I]())
	}
	return i
}

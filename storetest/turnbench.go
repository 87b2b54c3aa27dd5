package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TurnBudget is the token_budget BenchmarkTurn reads each turn's context
// under: about 77 messages of TurnContent's size.
const TurnBudget = 4000

// turnSentences are the bodies of the benchmark's messages: about 200
// characters each, so that a message with its number in front is about 52
// tokens under the seed's estimator (max(1, chars/4)). A few of them in
// turn give the recall index common and rarer words, as chats have.
var turnSentences = [...]string{
	"Hi, I'm Kavya. My order SE-10423 hasn't arrived yet and the tracking page has said in transit since Monday; could you please check where it is right now and tell me when it will finally reach my home?",
	"Sorry Kavya! The parcel left our warehouse in Malmo on Monday and is with the carrier; its last scan was at the Hamburg hub this morning, so it should arrive by 8 pm today; you get a text first.",
	"Ok, thanks a lot. Also, do you have running socks in size 42? My old ones wore through at the heel after a month of training for the half marathon in the spring, and I would like the same kind again.",
	"Yes: DryFit ankle socks come in a pack of three for Rs 249 and CushionRun for Rs 199; both have size 42 in stock, and DryFit has a reinforced heel made for long runs, which is what you need.",
}

// TurnContent returns the content of message i (0-based) of the benchmark
// conversation: about 52 tokens under the seed's estimator. Floors that
// run the same job without chatmem (a Go loop, raw Redis or SQL) use it
// so that both sides move the same bytes.
func TurnContent(i int) string {
	return fmt.Sprintf("%07d %s", i, turnSentences[i%len(turnSentences)])
}

// TurnContents returns the contents of messages n to n+count-1, made
// before a benchmark's loop so that the loop measures the turn, not the
// making of its text: a turn appends contents[i%count].
func TurnContents(n, count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = TurnContent(n + i)
	}
	return out
}

// TurnRole returns the role of message i: user and assistant in turn,
// starting with user.
func TurnRole(i int) chatmem.Role {
	if i%2 == 1 {
		return chatmem.RoleAssistant
	}
	return chatmem.RoleUser
}

// BenchmarkTurn measures a chat backend's turn through chatmem.Memory over
// the stores open returns, the job every store and its floor are measured on:
// a conversation of n messages of about 52 tokens (TurnContent), then per
// operation one Memory.Append of a user message and one Memory.Context
// under token_budget TurnBudget. opts configures the Memory (opts.Counter
// is required; the published figures use the seed's estimator,
// tokenizer.Estimate). For each n in sizes, open is called once for a
// fresh store (whose cleanup it registers), the conversation is filled
// through the store directly in batches of 1,000 (counted by opts.Counter),
// and three sub-benchmarks run on it, in this order (the turns append to
// the same conversation):
//
//	n=N       append one user message + read the context (the turn):
//	          Memory.Append, then Memory.Context
//	Turn/n=N  the same turn as one Memory.Turn call (one store write
//	          when Memory's tail cache holds the conversation)
//	read/n=N  read the context alone, nothing appended in between
//
// A store's benchmark is then a few lines:
//
//	func BenchmarkTurn(b *testing.B) {
//		storetest.BenchmarkTurn(b, func(b *testing.B) chatmem.Store { return memstore.New() },
//			chatmem.Options{Counter: tokenizer.Estimate{}}, []int{1000, 100000, 1000000})
//	}
//
// and its floor (the same job without chatmem) a sibling sub-benchmark
// using TurnContent and TurnBudget.
func BenchmarkTurn(b *testing.B, open func(b *testing.B) chatmem.Store, opts chatmem.Options, sizes []int) {
	if opts.Counter == nil {
		b.Fatal("storetest.BenchmarkTurn: opts.Counter is nil")
	}
	ctx := context.Background()
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: TurnBudget}
	for _, n := range sizes {
		var (
			mem *chatmem.Memory
			key chatmem.Key
		)
		// The store is opened and filled on the first sub-benchmark that
		// runs for this n, so a -bench filter that skips both skips the fill.
		parent := b
		setup := func(b *testing.B) {
			if mem != nil {
				return
			}
			// Opened on the parent: its cleanup (closing the store) runs
			// after the three sub-benchmarks and every -count round, not
			// after the first sub-benchmark, as it did.
			s := open(parent)
			key = chatmem.Key{Tenant: randomTenant(), ID: fmt.Sprintf("turn-%d", n)}
			fillTurns(b, ctx, s, opts.Counter, key, n)
			var err error
			if mem, err = chatmem.New(s, opts); err != nil {
				b.Fatal(err)
			}
			// The first read fills Memory's tail cache; a steady turn is
			// what is measured.
			if _, err := mem.Context(ctx, key, p, chatmem.ContextOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			setup(b)
			b.ReportAllocs()
			msg := []chatmem.Message{{Role: chatmem.RoleUser}}
			texts, i := TurnContents(n, 1024), 0
			cpu := CPUTime()
			for b.Loop() {
				// Every turn appends a user message, so the window starts on
				// the newest message at the latest.
				msg[0].Content = texts[i%len(texts)]
				i++
				if _, err := mem.Append(ctx, key, msg, chatmem.AppendOptions{}); err != nil {
					b.Fatal(err)
				}
				if _, err := mem.Context(ctx, key, p, chatmem.ContextOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			ReportCPU(b, cpu)
		})
		b.Run(fmt.Sprintf("Turn/n=%d", n), func(b *testing.B) {
			setup(b)
			b.ReportAllocs()
			msg := []chatmem.Message{{Role: chatmem.RoleUser}}
			texts, i := TurnContents(n, 1024), 0
			cpu := CPUTime()
			for b.Loop() {
				msg[0].Content = texts[i%len(texts)]
				i++
				_, w, err := mem.Turn(ctx, key, msg, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(w.Messages) == 0 {
					b.Fatal("Turn returned no messages")
				}
			}
			ReportCPU(b, cpu)
		})
		b.Run(fmt.Sprintf("read/n=%d", n), func(b *testing.B) {
			setup(b)
			b.ReportAllocs()
			cpu := CPUTime()
			for b.Loop() {
				w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(w.Messages) == 0 {
					b.Fatal("Context returned no messages")
				}
			}
			ReportCPU(b, cpu)
		})
	}
}

// fillTurns appends n messages of TurnContent to key in s in batches of
// 1,000, counted by counter, as Memory would have stored them.
func fillTurns(b *testing.B, ctx context.Context, s chatmem.Store, counter chatmem.Counter, key chatmem.Key, n int) {
	b.Helper()
	const batch = 1000
	msgs := make([]chatmem.Message, 0, batch)
	for i := range n {
		m := chatmem.Message{Role: TurnRole(i), Content: TurnContent(i)}
		var err error
		if m.Tokens, err = counter.Count(ctx, m); err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m)
		if len(msgs) == batch || i == n-1 {
			if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{Tokenizer: counter.Name()}); err != nil {
				b.Fatalf("fill %s: Append at %d: %v", key, i, err)
			}
			msgs = msgs[:0]
		}
	}
}

// ReportCPU reports the process's CPU time per operation since start (a
// CPUTime reading taken before b.Loop) as the metric cpu-ns/op, which a
// machine shared with other work disturbs less than ns/op. It reports
// nothing where CPUTime is 0.
func ReportCPU(b *testing.B, start time.Duration) {
	if cpu := CPUTime() - start; cpu > 0 && b.N > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storetest"
)

// BenchmarkTail measures Tail{Tokens: 4000} (200 messages) on
// conversations of 1,000, 100,000 and 1,000,000 messages: the time per
// read should not grow with the length. It logs how long filling each
// conversation took (batches of 1,000 messages, one transaction each).
func BenchmarkTail(b *testing.B) {
	s := &timedAppends{Store: open(b, filepath.Join(b.TempDir(), "bench.db"))}
	storetest.BenchmarkTail(b, s, []int{1000, 100000, 1000000})
	for key, d := range s.spent {
		b.Logf("filled %s in %v", key.ID, d.Round(time.Millisecond))
	}
}

// BenchmarkTailBounds measures Tail with both bounds, one of which selects
// most of the conversation and the other two messages (a budget near the
// total with one turn; a small budget with half the turns), on
// conversations of 1,000 and 100,000 messages of 10 tokens: the start of
// the run is found by one walk back over the shorter run, so the time per
// read stays that of a two-message tail at both lengths.
func BenchmarkTailBounds(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	ctx := context.Background()
	for _, n := range []int{1000, 100000} {
		key := chatmem.Key{Tenant: "t", ID: fmt.Sprint("bounds-", n)}
		for done := 0; done < n; done += 1000 {
			batch := make([]chatmem.Message, 1000)
			for i := range batch {
				batch[i] = chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprint("message ", done+i), Tokens: 10}
				if (done+i)%2 == 1 {
					batch[i].Role = chatmem.RoleAssistant
				}
			}
			if _, err := s.Append(ctx, key, batch, chatmem.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		for name, q := range map[string]chatmem.TailQuery{
			"budget-most/turns-1": {Tokens: 10 * (n - 10), Turns: 1},
			"budget-2/turns-half": {Tokens: 20, Turns: n / 4},
		} {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				for b.Loop() {
					msgs, err := s.Tail(ctx, key, q)
					if err != nil || len(msgs) != 2 {
						b.Fatalf("Tail(%+v) = %d messages, %v; want 2", q, len(msgs), err)
					}
				}
			})
		}
	}
}

// timedAppends adds up the time spent in Append per conversation.
type timedAppends struct {
	*Store
	mu    sync.Mutex
	spent map[chatmem.Key]time.Duration
}

func (s *timedAppends) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, key, msgs, opts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spent == nil {
		s.spent = make(map[chatmem.Key]time.Duration)
	}
	s.spent[key] += time.Since(start)
	return res, err
}

// BenchmarkPostings measures Postings of six terms of assorted frequencies
// (limit 256, before the newest 40 messages, as PolicyRecall asks beside a
// recent window) in conversations of 1,000 and 1,000,000 messages whose
// text is drawn from a Zipf-distributed vocabulary of 5,000 words, so the
// terms have realistic document frequencies. Both conversations are in one
// file, the short one begun first, so its postings sit before the long
// one's in every doclist. The time per call should not grow with the
// length. It reports the process's CPU time per call too (cpu-ns/op),
// steadier than the wall clock on a busy machine. -short leaves out the
// 1,000,000.
func BenchmarkPostings(b *testing.B) {
	sizes := []int{1000, 1000000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	vocab := benchVocabulary(5000)
	sets := benchTermSets(vocab)
	keys := make([]chatmem.Key, len(sizes))
	for i, n := range sizes {
		keys[i] = chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("postings-%d", n)}
		start := time.Now()
		fillText(b, s, keys[i], n, vocab, uint64(i))
		b.Logf("filled %d messages in %v", n, time.Since(start).Round(time.Millisecond))
	}
	for _, set := range sets {
		for i, n := range sizes {
			benchPostings(b, s, keys[i], n, set.name, set.terms)
		}
	}
}

// benchPostings runs Postings(terms, before, 256) on key, a conversation of
// n messages, with before its 40th newest message, as a sub-benchmark.
func benchPostings(b *testing.B, s *Store, key chatmem.Key, n int, name string, terms []string) {
	ctx := b.Context()
	before := int64(n - 40)
	b.Run(fmt.Sprintf("terms=%s/messages=%d", name, n), func(b *testing.B) {
		b.ReportAllocs()
		var found int
		cpu := cpuTime()
		for b.Loop() {
			out, err := s.Postings(ctx, key, terms, before, 256)
			if err != nil {
				b.Fatal(err)
			}
			found = 0
			for _, seqs := range out {
				found += len(seqs)
			}
		}
		if cpu := cpuTime() - cpu; cpu > 0 {
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
		b.ReportMetric(float64(found), "postings/op")
	})
}

// benchVocabulary returns n distinct made-up words of two to four
// syllables, none of them a stop word.
func benchVocabulary(n int) []string {
	onsets := []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "kl"}
	vowels := []string{"a", "e", "i", "o", "u", "ai", "ou"}
	r := rand.New(rand.NewPCG(7, 11))
	seen := make(map[string]bool, n)
	words := make([]string, 0, n)
	for len(words) < n {
		var w strings.Builder
		for range 2 + r.IntN(3) {
			w.WriteString(onsets[r.IntN(len(onsets))])
			w.WriteString(vowels[r.IntN(len(vowels))])
		}
		if word := w.String(); !seen[word] {
			seen[word] = true
			words = append(words, word)
		}
	}
	return words
}

// fillText appends n messages of 5 to 24 words drawn from vocab with a
// Zipf distribution (s = 1.1), 1,000 per Append: one transaction each.
func fillText(tb testing.TB, s *Store, key chatmem.Key, n int, vocab []string, seed uint64) {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, 42))
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	const batch = 1000
	var text strings.Builder
	for done := 0; done < n; {
		msgs := make([]chatmem.Message, min(batch, n-done))
		for i := range msgs {
			text.Reset()
			words := 5 + r.IntN(20)
			for j := range words {
				if j > 0 {
					text.WriteByte(' ')
				}
				text.WriteString(vocab[zipf.Uint64()])
			}
			role := chatmem.RoleUser
			if (done+i)%2 == 1 {
				role = chatmem.RoleAssistant
			}
			msgs[i] = chatmem.Message{Role: role, Content: text.String(), Tokens: words}
		}
		if _, err := s.Append(tb.Context(), key, msgs, chatmem.AppendOptions{}); err != nil {
			tb.Fatalf("fill %s: Append at %d: %v", key, done, err)
		}
		done += len(msgs)
	}
}

// BenchmarkAppendTurn measures the append the chat proxy makes each turn:
// a user message of about 100 characters and a reply of about 300, in one
// call, to a conversation that already holds 1,000 messages. It reports
// the process's CPU time per append (cpu-ns/op): on two cores that work
// competes with whatever runs beside it, such as the client reading the
// reply the proxy has just sent.
func BenchmarkAppendTurn(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "bench", ID: "turns"}
	const (
		user  = "Where is my order SE-10423? It has not arrived yet and the tracking page has said in transit since Monday."
		reply = "I am sorry about the wait. Order SE-10423 left our warehouse in Malmo on Monday and is with the carrier; " +
			"their last scan was at the Hamburg hub this morning, so it should reach you within two working days. " +
			"If it has not arrived by Thursday, tell me and I will open a claim with the carrier right away."
	)
	turn := func(i int) []chatmem.Message {
		return []chatmem.Message{
			{Role: chatmem.RoleUser, Content: fmt.Sprintf("%s (%d)", user, i), Tokens: 26},
			{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("%s (%d)", reply, i), Tokens: 76,
				Metadata: map[string]string{"prompt_tokens_upstream": "3900", "prompt_tokens_chatmem": "3902"}},
		}
	}
	for i := range 500 {
		if _, err := s.Append(ctx, key, turn(i), chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu := cpuTime()
	i := 500
	for b.Loop() {
		if _, err := s.Append(ctx, key, turn(i), chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if cpu := cpuTime() - cpu; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// benchTermSets returns the queries of the postings benchmarks over vocab.
// mixed: ranks 1, 4, 21, 151, 1001 and 4001, from a word in nine messages
// of ten to one in a few hundredths of a percent: the 1,000 messages have
// fewer than 256 postings of most, the 1,000,000 of none. frequent: the
// six most frequent words, with about 256 postings in both, so both calls
// return about 6 × 256 and differ in the length of the history alone.
func benchTermSets(vocab []string) []benchTermSet {
	termsOf := func(ranks ...int) []string {
		var terms []string
		for _, rank := range ranks {
			terms = append(terms, chatmem.Terms(vocab[rank])...)
		}
		return terms
	}
	return []benchTermSet{
		{"mixed", termsOf(0, 3, 20, 150, 1000, 4000)},
		{"frequent", termsOf(0, 1, 2, 3, 4, 5)},
	}
}

// benchTermSet is one query of the postings benchmarks.
type benchTermSet struct {
	name  string
	terms []string
}

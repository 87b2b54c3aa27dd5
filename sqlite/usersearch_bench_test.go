package sqlite

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/tokenizer"
)

// BenchmarkUserPostings measures UserPostings of six terms (limit 256, as
// BenchmarkPostings) for a user with 1,000 messages over 10 conversations
// and one with 1,000,000 over 1,000, both in one file, the text drawn from
// the Zipf vocabulary of BenchmarkPostings and every message dated a
// millisecond after the one before, the conversations' dates interleaved.
// The time per call should not grow with the user's history. -short
// leaves out the 1,000,000.
func BenchmarkUserPostings(b *testing.B) {
	sizes := []userBenchSize{{1000, 10}, {1000000, 1000}}
	if testing.Short() {
		sizes = sizes[:1]
	}
	vocab := benchVocabulary(5000)
	sets := benchTermSets(vocab)
	s, users := userBenchStore(b, sizes, vocab)
	for _, set := range sets {
		for i, sz := range sizes {
			b.Run(fmt.Sprintf("terms=%s/messages=%d/convs=%d", set.name, sz.messages, sz.convs), func(b *testing.B) {
				b.ReportAllocs()
				var found int
				cpu := cpuTime()
				for b.Loop() {
					out, err := s.UserPostings(b.Context(), users[i], set.terms, 256)
					if err != nil {
						b.Fatal(err)
					}
					found = 0
					for _, hits := range out {
						found += len(hits)
					}
				}
				if cpu := cpuTime() - cpu; cpu > 0 {
					b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
				}
				b.ReportMetric(float64(found), "postings/op")
			})
		}
	}
}

// fillUserText gives user n messages of Zipf text (as fillText) over
// convs conversations, one Append of up to 1,000 messages at a time, each
// message dated a millisecond apart with the conversations interleaved:
// message j of conversation c at j*convs + c milliseconds.
func fillUserText(tb testing.TB, s *Store, user chatmem.Key, n, convs int, vocab []string, seed uint64) {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, 42))
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	per := n / convs
	var text strings.Builder
	for c := range convs {
		key := chatmem.Key{Tenant: user.Tenant, ID: fmt.Sprintf("%s-c%d", user.ID, c)}
		for done := 0; done < per; {
			msgs := make([]chatmem.Message, min(1000, per-done))
			for i := range msgs {
				j := done + i
				text.Reset()
				words := 5 + r.IntN(20)
				for k := range words {
					if k > 0 {
						text.WriteByte(' ')
					}
					text.WriteString(vocab[zipf.Uint64()])
				}
				role := chatmem.RoleUser
				if j%2 == 1 {
					role = chatmem.RoleAssistant
				}
				msgs[i] = chatmem.Message{Role: role, Content: text.String(), Tokens: words,
					CreatedAt: base.Add(time.Duration(j*convs+c) * time.Millisecond)}
			}
			if _, err := s.Append(tb.Context(), key, msgs, chatmem.AppendOptions{User: user.ID}); err != nil {
				tb.Fatalf("fill %s: Append at %d: %v", key, done, err)
			}
			done += len(msgs)
		}
	}
}

// userBenchSize is one user of the user index benchmarks: its messages and
// the conversations they are spread over.
type userBenchSize struct{ messages, convs int }

// envUserBenchDB names a file the user index benchmarks keep their users
// in: filled on the first run, reused by the next ones (the 1,000,000
// messages take minutes to fill). Without it each run fills a new file.
const envUserBenchDB = "CHATMEM_USER_BENCH_DB"

// userBenchStore returns a store holding a user of each size (fillUserText,
// user i with seed i) and their keys.
func userBenchStore(b *testing.B, sizes []userBenchSize, vocab []string) (*Store, []chatmem.Key) {
	b.Helper()
	path := os.Getenv(envUserBenchDB)
	if path == "" {
		path = filepath.Join(b.TempDir(), "bench.db")
	}
	s := open(b, path)
	users := make([]chatmem.Key, len(sizes))
	for i, sz := range sizes {
		users[i] = chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("user-%d", sz.messages)}
		last := chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("%s-c%d", users[i].ID, sz.convs-1)}
		if c, err := s.Conversation(b.Context(), last); err == nil && c.LastSeq == int64(sz.messages/sz.convs) {
			continue // filled by an earlier run
		}
		start := time.Now()
		fillUserText(b, s, users[i], sz.messages, sz.convs, vocab, uint64(i))
		b.Logf("filled %d messages over %d conversations in %v", sz.messages, sz.convs, time.Since(start).Round(time.Millisecond))
	}
	return s, users
}

// BenchmarkRecallUserContext measures Memory.Context under PolicyRecall
// with scope user (budget 4,000, as `chatmem bench --policy recall --scope
// user`) in a new conversation of BenchmarkUserPostings's users, the query
// one of 64 sentences of the same Zipf text in turn: the cost should follow
// the window and the hits, not the user's history. -short leaves out the
// 1,000,000.
func BenchmarkRecallUserContext(b *testing.B) {
	sizes := []userBenchSize{{1000, 10}, {1000000, 1000}}
	if testing.Short() {
		sizes = sizes[:1]
	}
	vocab := benchVocabulary(5000)
	s, users := userBenchStore(b, sizes, vocab)
	mem, err := chatmem.New(s, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mem.Close() })
	r := rand.New(rand.NewPCG(99, 42))
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	queries := make([][]chatmem.Message, 64)
	for i := range queries {
		words := make([]string, 8+r.IntN(16))
		for j := range words {
			words[j] = vocab[zipf.Uint64()]
		}
		queries[i] = []chatmem.Message{{Role: chatmem.RoleUser, Content: strings.Join(words, " ")}}
	}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 4000, Scope: chatmem.ScopeUser}
	for i, sz := range sizes {
		key := chatmem.Key{Tenant: users[i].Tenant, ID: users[i].ID + "-now"}
		if _, err := s.Conversation(b.Context(), key); err != nil {
			hello := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello again"}}
			if _, err := mem.Append(b.Context(), key, hello, chatmem.AppendOptions{User: users[i].ID}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("messages=%d/convs=%d", sz.messages, sz.convs), func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuTime()
			q := 0
			for b.Loop() {
				if _, err := mem.Context(b.Context(), key, p, chatmem.ContextOptions{Pending: queries[q%len(queries)]}); err != nil {
					b.Fatal(err)
				}
				q++
			}
			if cpu := cpuTime() - cpu; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

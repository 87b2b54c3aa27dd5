package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// BenchmarkWindowVsRaw compares Tail{Tokens: 4000} on a 100,000-message
// conversation with the cheapest read of the same 200 messages by a caller
// that already knows their list indexes.
//
// The baseline, "raw", is one go-redis call (LRANGE) that fetches the
// messages AND decodes them into chatmem.Message with the decoder Tail uses
// (decodeRecords): turning stored records into messages is part of Tail's
// job, so a baseline without it would not be the same work. The goal is
// tail/raw <= 1.5. "lrange" (the fetch without decoding) is reported for
// information only; it is not the baseline.
//
// "tail" is the usual case, a store whose hint (learned from earlier Tails)
// lets it read the window in the script's round trip; "tail-cold" clears
// the hint before every call, so each takes the second round trip of a
// store that has not learned one yet (or guessed short).
//
// "interleaved" alternates the four reads in one loop, rotating their
// order, so that a busy machine slows them alike, and reports tail/raw (the
// goal), tail-cold/raw and tail/lrange as ratios of total times, and the
// first two again as ratios of median times ("-median"), which the stalls
// of a shared machine skew less; compare them over -count=10 runs, which
// the separate sub-benchmarks, run minutes apart, cannot give reliably.
func BenchmarkWindowVsRaw(b *testing.B) {
	const n, budget = 100000, 4000
	s := newTestStore(b, dialer(b))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "bench", ID: "window"}
	for done := 0; done < n; done += 1000 {
		msgs := make([]chatmem.Message, 1000)
		for i := range msgs {
			role := chatmem.RoleUser
			if (done+i)%2 == 1 {
				role = chatmem.RoleAssistant
			}
			msgs[i] = chatmem.Message{Role: role, Content: fmt.Sprintf("message %d", done+i+1), Tokens: 20}
		}
		if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	window, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: budget})
	if err != nil || len(window) != budget/20 {
		b.Fatalf("Tail = %d messages, %v; want %d", len(window), err, budget/20)
	}
	first, last := window[0].Seq-1, window[len(window)-1].Seq-1 // list indexes
	msgsKey := s.convKeys(key)[kMsgs]

	tail := func() error {
		_, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: budget})
		return err
	}
	tailCold := func() error {
		s.hint.perToken.Store(0)
		s.hint.perTurn.Store(0)
		return tail()
	}
	// raw is the baseline: one call that fetches the window, and decoding.
	raw := func() error {
		items, err := s.client.LRange(ctx, msgsKey, first, last).Result()
		if err != nil {
			return err
		}
		msgs, err := decodeRecords(items)
		if err == nil && len(msgs) != len(window) {
			err = fmt.Errorf("raw read %d messages, want %d", len(msgs), len(window))
		}
		return err
	}
	lrange := func() error { return s.client.LRange(ctx, msgsKey, first, last).Err() }

	for _, bm := range []struct {
		name string
		read func() error
	}{{"tail", tail}, {"tail-cold", tailCold}, {"raw", raw}, {"lrange", lrange}} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			if err := tail(); err != nil { // learn the hint
				b.Fatal(err)
			}
			for b.Loop() {
				if err := bm.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		reads := []func() error{tail, tailCold, raw, lrange}
		var sums [4]time.Duration
		var times [4][]time.Duration
		i := 0
		for b.Loop() {
			// Rotate the order too, so that none always follows another.
			for j := range reads {
				k := (i + j) % len(reads)
				if k == 0 && tail() != nil { // the cold read cleared the hint
					b.Fatal("tail failed")
				}
				t0 := time.Now()
				if err := reads[k](); err != nil {
					b.Fatal(err)
				}
				d := time.Since(t0)
				sums[k] += d
				times[k] = append(times[k], d)
			}
			i++
		}
		var med [4]float64
		for k, t := range times {
			slices.Sort(t)
			med[k] = float64(t[len(t)/2])
		}
		b.ReportMetric(float64(sums[0])/float64(sums[2]), "tail/raw")
		b.ReportMetric(float64(sums[1])/float64(sums[2]), "tail-cold/raw")
		b.ReportMetric(med[0]/med[2], "tail/raw-median")
		b.ReportMetric(med[1]/med[2], "tail-cold/raw-median")
		b.ReportMetric(float64(sums[0])/float64(sums[3]), "tail/lrange")
		b.ReportMetric(float64(sums[0].Nanoseconds())/float64(b.N), "tail-ns")
		b.ReportMetric(float64(sums[1].Nanoseconds())/float64(b.N), "tail-cold-ns")
		b.ReportMetric(float64(sums[2].Nanoseconds())/float64(b.N), "raw-ns")
	})
}

// BenchmarkPostings measures Postings of six terms with limit 256, the
// shape of a recall query, on conversations of 1,000 and 1,000,000
// messages (the latter skipped with -short). The messages are sentences of
// 6 to 20 words drawn from a Zipf-distributed vocabulary of 5,000 words,
// so terms have realistic document frequencies; the query mixes terms of
// ranks 1 to 3,000, from one in most messages to one in a few hundred of a
// million. The time per operation should not grow with the size.
//
// "interleaved" alternates the two sizes in one loop, so that a busy
// machine slows them alike, and reports the ratio of their total and of
// their median times ("1M/1k", "1M/1k-median"); the goal is at most 1.5.
// The 1M query returns more postings (the rarer terms have fewer than 256
// in 1,000 messages), so it also runs the query on the 1M conversation
// with before = 1001: its first 1,000 messages are the 1k conversation's
// (fillText is seeded), so that query returns exactly what the 1k one
// does, from sorted sets a thousand times larger ("1M-early/1k").
func BenchmarkPostings(b *testing.B) {
	s := newTestStore(b, dialer(b))
	ctx := context.Background()
	vocab := benchVocabulary(5000)
	var terms []string
	for _, rank := range []int{0, 5, 30, 150, 700, 3000} {
		terms = append(terms, chatmem.Terms(vocab[rank])...)
	}
	sizes := []int{1000, 1000000}
	if testing.Short() {
		sizes = sizes[:1] // the million-message fill takes minutes
	}
	keys := make([]chatmem.Key, len(sizes))
	for i, n := range sizes {
		keys[i] = chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("postings-%d", n)}
		fillText(b, s, keys[i], n, vocab)
	}
	postings := func(key chatmem.Key, before int64) int {
		out, err := s.Postings(ctx, key, terms, before, 256)
		if err != nil {
			b.Fatal(err)
		}
		found := 0
		for _, p := range out {
			found += len(p)
		}
		return found
	}
	query := func(i int) int { return postings(keys[i], int64(sizes[i])+1) }
	for i, n := range sizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			found := 0
			for b.Loop() {
				found = query(i)
			}
			b.ReportMetric(float64(found), "postings/op")
		})
	}
	if len(sizes) < 2 {
		return
	}
	if got, want := postings(keys[1], int64(sizes[0])+1), query(0); got != want {
		b.Fatalf("the 1M conversation's first %d messages have %d postings, the 1k conversation %d; want the same", sizes[0], got, want)
	}
	b.Run("interleaved", func(b *testing.B) {
		reads := []func() int{
			func() int { return query(0) },
			func() int { return query(1) },
			func() int { return postings(keys[1], int64(sizes[0])+1) },
		}
		sums := make([]time.Duration, len(reads))
		times := make([][]time.Duration, len(reads))
		k := 0
		for b.Loop() {
			// Rotate the order too, so that none always follows another.
			for j := range reads {
				i := (k + j) % len(reads)
				t0 := time.Now()
				reads[i]()
				d := time.Since(t0)
				sums[i] += d
				times[i] = append(times[i], d)
			}
			k++
		}
		median := func(i int) float64 {
			slices.Sort(times[i])
			return float64(times[i][len(times[i])/2])
		}
		b.ReportMetric(float64(sums[1])/float64(sums[0]), "1M/1k")
		b.ReportMetric(median(1)/median(0), "1M/1k-median")
		b.ReportMetric(float64(sums[2])/float64(sums[0]), "1M-early/1k")
		b.ReportMetric(median(2)/median(0), "1M-early/1k-median")
	})
}

// benchVocabulary returns n distinct made-up words of two to four
// syllables, none of them a stop word, most common first (for fillText's
// Zipf draw).
func benchVocabulary(n int) []string {
	const consonants, vowels = "bcdfghklmnprstvz", "aeiou"
	r := rand.New(rand.NewPCG(1, 2))
	seen := make(map[string]bool)
	var words []string
	for len(words) < n {
		var w []byte
		for range 2 + r.IntN(3) {
			w = append(w, consonants[r.IntN(len(consonants))], vowels[r.IntN(len(vowels))])
		}
		if t := chatmem.Terms(string(w)); len(t) == 1 && !seen[t[0]] {
			seen[t[0]] = true
			words = append(words, string(w))
		}
	}
	return words
}

// fillText appends n messages of Zipf-drawn sentences from vocab to key,
// alternating user and assistant, in batches of 1,000.
func fillText(b *testing.B, s *Store, key chatmem.Key, n int, vocab []string) {
	b.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	var text []byte
	for done := 0; done < n; done += 1000 {
		msgs := make([]chatmem.Message, min(1000, n-done))
		for i := range msgs {
			text = text[:0]
			words := 6 + r.IntN(15)
			for j := range words {
				if j > 0 {
					text = append(text, ' ')
				}
				text = append(text, vocab[zipf.Uint64()]...)
			}
			text = append(text, '.')
			role := chatmem.RoleUser
			if (done+i)%2 == 1 {
				role = chatmem.RoleAssistant
			}
			msgs[i] = chatmem.Message{Role: role, Content: string(text), Tokens: words + 1}
		}
		if _, err := s.Append(context.Background(), key, msgs, chatmem.AppendOptions{}); err != nil {
			b.Fatalf("fill %s at %d: %v", key, done, err)
		}
	}
}

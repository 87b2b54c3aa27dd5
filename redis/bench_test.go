package redis

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"chatmem"
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

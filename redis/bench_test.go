package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"chatmem"
)

// BenchmarkWindowVsRaw compares Tail{Tokens: 4000} on a 100,000-message
// conversation with the cheapest read of the same 200 messages that knows
// their indexes in advance: one LRANGE, alone ("raw") and followed by the
// decoding Tail does too ("raw+decode"). The difference is the price of
// finding the window on the server (the gallop over the cum list) and of the
// script call.
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
	msgsKey := s.convKeys(key)[1]

	b.Run("tail", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: budget}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.client.LRange(ctx, msgsKey, first, last).Result(); err != nil {
				b.Fatal(err)
			}
		}
	})
	rawDecode := func() error {
		items, err := s.client.LRange(ctx, msgsKey, first, last).Result()
		if err != nil {
			return err
		}
		list := make([]any, len(items))
		for i, it := range items {
			list[i] = it
		}
		_, err = decodeMessages(list)
		return err
	}
	// interleaved alternates the three reads, so that a busy machine slows
	// them alike, and reports the ratios.
	b.Run("interleaved", func(b *testing.B) {
		var tail, raw, rawDec time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: budget}); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if err := s.client.LRange(ctx, msgsKey, first, last).Err(); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			if err := rawDecode(); err != nil {
				b.Fatal(err)
			}
			tail, raw, rawDec = tail+t1.Sub(t0), raw+t2.Sub(t1), rawDec+time.Since(t2)
		}
		b.ReportMetric(float64(tail)/float64(raw), "tail/raw")
		b.ReportMetric(float64(tail)/float64(rawDec), "tail/raw+decode")
	})
	b.Run("raw+decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := rawDecode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

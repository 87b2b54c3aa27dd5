package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// BenchmarkAppendConcurrent appends one message per operation from each
// number of clients, every client on a conversation of its own, and
// reports appends per second and the p99 latency of an append: what the
// store does with concurrent commits (group them, or queue them). open
// returns a fresh store for each client count.
func BenchmarkAppendConcurrent(b *testing.B, open func(b *testing.B) chatmem.Store, clients ...int) {
	for _, n := range clients {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			tenant := randomTenant()
			var next atomic.Int64
			lat := make([][]time.Duration, n)
			msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: "a message of about ten words, give or take", Tokens: 10}}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for c := range n {
				wg.Go(func() {
					key := chatmem.Key{Tenant: tenant, ID: fmt.Sprintf("c%d", c)}
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						if _, err := s.Append(ctx, key, msg, chatmem.AppendOptions{}); err != nil {
							b.Error(err)
							return
						}
						lat[c] = append(lat[c], time.Since(t0))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(lat...)
			if len(all) == 0 {
				return
			}
			slices.Sort(all)
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "appends/s")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

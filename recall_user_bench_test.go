package chatmem_test

import (
	"fmt"
	"testing"

	"github.com/chatmem/chatmem"
)

// BenchmarkRecallUserContext measures Context under PolicyRecall with scope
// user (budget 4000) on the memory store, in a new conversation of a user
// whose other conversations hold 1,000 messages in 10 conversations, then
// 100,000 in 1,000: the cost should follow the window and the hits, not the
// user's history. BenchmarkRecallContext is the same query over one
// conversation.
func BenchmarkRecallUserContext(b *testing.B) {
	for _, size := range []struct{ n, convs int }{{1000, 10}, {100000, 1000}} {
		mem := newMemory(b)
		per := size.n / size.convs
		for c := range size.convs {
			key := chatmem.Key{Tenant: "t", ID: fmt.Sprintf("c%d", c)}
			if _, err := mem.Append(b.Context(), key, filler(per, uint64(c+1)), chatmem.AppendOptions{User: "u"}); err != nil {
				b.Fatal(err)
			}
		}
		key := chatmem.Key{Tenant: "t", ID: "now"}
		if _, err := mem.Append(b.Context(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello again"}}, chatmem.AppendOptions{User: "u"}); err != nil {
			b.Fatal(err)
		}
		p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 4000, Scope: chatmem.ScopeUser}
		q := []chatmem.Message{{Role: chatmem.RoleUser, Content: "what was the hotel and flight plan for the beach holiday?"}}
		b.Run(fmt.Sprintf("messages=%d/conversations=%d", size.n, size.convs), func(b *testing.B) {
			b.ReportAllocs()
			cpu := chatmem.CPUTime()
			for b.Loop() {
				if _, err := mem.Context(b.Context(), key, p, chatmem.ContextOptions{Pending: q}); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := chatmem.CPUTime() - cpu; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

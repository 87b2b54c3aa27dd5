package chatmem_test

import (
	"fmt"
	"testing"

	"github.com/chatmem/chatmem"
)

// BenchmarkRecallContext measures Context under PolicyRecall (budget 4000)
// on the memory store, at two conversation sizes: the cost should follow
// the window and the hits, not the history.
func BenchmarkRecallContext(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		mem := newMemory(b)
		key := chatmem.Key{Tenant: "t", ID: fmt.Sprintf("bench-%d", n)}
		msgs := filler(n, uint64(n))
		for i := 0; i < n; i += 1000 {
			if _, err := mem.Append(b.Context(), key, msgs[i:min(i+1000, n)], chatmem.AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 4000}
		q := []chatmem.Message{{Role: chatmem.RoleUser, Content: "what was the hotel and flight plan for the beach holiday?"}}
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := mem.Context(b.Context(), key, p, chatmem.ContextOptions{Pending: q}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

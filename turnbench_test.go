package chatmem_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// turnSizes are the conversation sizes issue 18's table is measured at.
var turnSizes = []int{1000, 100000, 1000000}

// BenchmarkTurn is the in-process floor of a chat turn and the tail
// cache's effect on one store (storetest.BenchmarkTurn has the job; each
// store's own BenchmarkTurn runs it on that store, ./memory for the
// in-process one):
//
//	goloop/n=N, goloop/read/n=N  the seed's algorithm as a plain Go loop:
//	                              append to a slice, walk back from the end
//	                              counting each message with the seed's
//	                              estimator until TurnBudget, drop leading
//	                              non-user messages, return a copy
//	sqlite/cache=off|on/...       Memory over SQLite, tail cache off and on
func BenchmarkTurn(b *testing.B) {
	b.Run("goloop", func(b *testing.B) {
		for _, n := range turnSizes {
			msgs := make([]loopMessage, 0, n+1<<20)
			for i := range n {
				msgs = append(msgs, loopMessage{role: storetest.TurnRole(i), content: storetest.TurnContent(i)})
			}
			b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
				b.ReportAllocs()
				i, cpu := n, storetest.CPUTime()
				for b.Loop() {
					msgs = append(msgs, loopMessage{role: chatmem.RoleUser, content: storetest.TurnContent(i)})
					i++
					if len(loopWindow(msgs, storetest.TurnBudget)) == 0 {
						b.Fatal("empty window")
					}
				}
				storetest.ReportCPU(b, cpu)
			})
			b.Run(fmt.Sprintf("read/n=%d", n), func(b *testing.B) {
				b.ReportAllocs()
				cpu := storetest.CPUTime()
				for b.Loop() {
					if len(loopWindow(msgs, storetest.TurnBudget)) == 0 {
						b.Fatal("empty window")
					}
				}
				storetest.ReportCPU(b, cpu)
			})
		}
	})
	for _, cache := range []struct {
		name  string
		bytes int64
	}{{"off", -1}, {"on", 0}} {
		b.Run("sqlite/cache="+cache.name, func(b *testing.B) {
			open := func(b *testing.B) chatmem.Store {
				s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "chatmem.db"), sqlite.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				return s
			}
			opts := chatmem.Options{Counter: tokenizer.Estimate{}, TailCacheBytes: cache.bytes}
			storetest.BenchmarkTurn(b, open, opts, turnSizes[:2])
		})
	}
}

// loopMessage is a message as the seed keeps it: a role and a content.
type loopMessage struct {
	role    chatmem.Role
	content string
}

// loopWindow is the seed's window(messages, budget) in Go.
func loopWindow(msgs []loopMessage, budget int) []loopMessage {
	used, start := 0, len(msgs)
	for start > 0 {
		t := tokenizer.EstimateText(msgs[start-1].content)
		if used+t > budget {
			break
		}
		used += t
		start--
	}
	for start < len(msgs) && msgs[start].role != chatmem.RoleUser {
		start++
	}
	return append([]loopMessage(nil), msgs[start:]...)
}

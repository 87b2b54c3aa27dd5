package chatmem_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/loadtest"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

// turnSizes are the conversation sizes docs/performance.md's turn table is
// measured at.
var turnSizes = []int{1000, 100000, 1000000}

// BenchmarkTurn is the in-process floor of a chat turn and the tail
// cache's effect on one store (storetest.BenchmarkTurn has the job; each
// store's own BenchmarkTurn runs it on that store, ./memory for the
// in-process one):
//
//	goloop/n=N, goloop/read/n=N  the seed's algorithm as a plain Go loop
//	                              (loadtest.LoopWindow, the floor chatmem
//	                              bench reports too):
//	                              append a chatmem.Message counted once (the
//	                              seed's estimator) to a slice; walk back
//	                              from the end summing the counts while they
//	                              fit TurnBudget, drop leading non-user
//	                              messages, return a copy
//	sqlite/cache=off|on/...       Memory over SQLite, tail cache off and on
func BenchmarkTurn(b *testing.B) {
	b.Run("goloop", func(b *testing.B) {
		for _, n := range turnSizes {
			// Room for the fill and the turns a run appends (a quarter of
			// n, at least 1,024), then the slice grows as a plain
			// program's does. Not a fixed million spare messages: that
			// made the loop's heap at n=1,000 some 140 MB, a hundred
			// times what the job holds, so the collector hardly ran
			// during the loop's measurement while it ran every few
			// hundred turns in the store's.
			msgs := make([]chatmem.Message, 0, n+max(n/4, 1024))
			for i := range n {
				msgs = append(msgs, newLoopMessage(storetest.TurnRole(i), storetest.TurnContent(i)))
			}
			b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
				b.ReportAllocs()
				texts, i := storetest.TurnContents(n, 1024), 0
				cpu := storetest.CPUTime()
				for b.Loop() {
					msgs = append(msgs, newLoopMessage(chatmem.RoleUser, texts[i%len(texts)]))
					i++
					if len(loadtest.LoopWindow(msgs, storetest.TurnBudget)) == 0 {
						b.Fatal("empty window")
					}
				}
				storetest.ReportCPU(b, cpu)
			})
			b.Run(fmt.Sprintf("read/n=%d", n), func(b *testing.B) {
				b.ReportAllocs()
				cpu := storetest.CPUTime()
				for b.Loop() {
					if len(loadtest.LoopWindow(msgs, storetest.TurnBudget)) == 0 {
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

// newLoopMessage is a message as the Go loop keeps it: a chatmem.Message
// (so that the loop moves and returns the same structs as Memory does)
// with its role, its content and its tokens, counted once.
func newLoopMessage(role chatmem.Role, content string) chatmem.Message {
	return chatmem.Message{Role: role, Content: content, Tokens: tokenizer.EstimateText(content)}
}

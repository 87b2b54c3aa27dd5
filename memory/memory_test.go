package memory_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memory"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:  func(t *testing.T) chatmem.Store { return memory.New() },
		Dump: func(t *testing.T, s chatmem.Store) []byte { return memory.Dump(s.(*memory.Store)) },
	})
}

func BenchmarkTail(b *testing.B) {
	storetest.BenchmarkTail(b, memory.New(), []int{1000, 100000, 1000000})
}

// BenchmarkAppendTurn appends one turn (a user message of about 100
// characters and a reply of about 300, counted already) to a conversation
// that holds 1,000 messages or more: the store's share of Memory.Append,
// indexing for recall included.
func BenchmarkAppendTurn(b *testing.B) {
	s := memory.New()
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
			{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("%s (%d)", reply, i), Tokens: 76},
		}
	}
	for i := range 500 {
		if _, err := s.Append(ctx, key, turn(i), chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu := storetest.CPUTime()
	i := 500
	for b.Loop() {
		if _, err := s.Append(ctx, key, turn(i), chatmem.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if cpu := storetest.CPUTime() - cpu; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkTurn is storetest.BenchmarkTurn on the in-process store: one
// Memory.Append and one token_budget Context per turn; `go test -bench
// Turn .` in the root has the plain Go loop it is compared with.
func BenchmarkTurn(b *testing.B) {
	storetest.BenchmarkTurn(b, func(*testing.B) chatmem.Store { return memory.New() },
		chatmem.Options{Counter: tokenizer.Estimate{}}, []int{1000, 100000, 1000000})
}

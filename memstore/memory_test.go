package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/storetest"
	"github.com/chatmem/chatmem/tokenizer"
)

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:  func(t *testing.T) chatmem.Store { return memstore.New() },
		Dump: func(t *testing.T, s chatmem.Store) []byte { return memstore.Dump(s.(*memstore.Store)) },
	})
}

func BenchmarkTail(b *testing.B) {
	storetest.BenchmarkTail(b, memstore.New(), []int{1000, 100000, 1000000})
}

// BenchmarkAppendTurn appends one turn (a user message of about 100
// characters and a reply of about 300, counted already) to a conversation
// that holds 1,000 messages or more: the store's share of Memory.Append,
// indexing for recall included.
func BenchmarkAppendTurn(b *testing.B) {
	s := memstore.New()
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
	storetest.BenchmarkTurn(b, func(*testing.B) chatmem.Store { return memstore.New() },
		chatmem.Options{Counter: tokenizer.Estimate{}}, []int{1000, 100000, 1000000})
}

// TestIndexCatchesUp: Append leaves the recall index alone and Postings
// brings it up to date from its watermark, so what was appended since the
// last search is found by the next one, and nothing twice, while appends
// and searches run at once.
func TestIndexCatchesUp(t *testing.T) {
	s := memstore.New()
	ctx := t.Context()
	key := chatmem.Key{Tenant: "t", ID: "index"}
	const writers, perWriter = 4, 50
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				text := fmt.Sprintf("apple w%d n%d", w, i)
				if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text, Tokens: 3}}, chatmem.AppendOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	go func() {
		defer close(done)
		for {
			got, err := s.Postings(ctx, key, []string{"appl"}, 1<<40, writers*perWriter)
			if err == nil && len(got[0]) == writers*perWriter {
				return
			}
			if err != nil && !errors.Is(err, chatmem.ErrNotFound) {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	<-done
	got, err := s.Postings(ctx, key, []string{"appl", "w3", "n49"}, 1<<40, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got[0]); n != writers*perWriter || got[0][0] != writers*perWriter || got[0][n-1] != 1 {
		t.Errorf("Postings(appl) = %d seqs from %v, want every one of %d, newest first", n, got[0][:min(n, 3)], writers*perWriter)
	}
	if len(got[1]) != perWriter || len(got[2]) != writers {
		t.Errorf("Postings(w3, n49) = %d and %d seqs, want %d and %d", len(got[1]), len(got[2]), perWriter, writers)
	}
	// One more append after a search: the next search finds it at once.
	res, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "banana", Tokens: 1}}, chatmem.AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.Postings(ctx, key, []string{"banana", "appl"}, 1<<40, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if seq := res.Messages[0].Seq; len(got[0]) != 1 || got[0][0] != seq || len(got[1]) != writers*perWriter {
		t.Errorf("after one more append: Postings(banana) = %v, want [%d]; %d seqs of appl, want %d", got[0], seq, len(got[1]), writers*perWriter)
	}
}

// BenchmarkDeleteUser erases a user whose conversations hold 100 messages
// each, at 100 and at 1,000 conversations; ns/message should stay flat
// from one size to the other (it grew with the number of conversations
// when each conversation's removal went over the user's whole index).
func BenchmarkDeleteUser(b *testing.B) {
	ctx := context.Background()
	user := chatmem.Key{Tenant: "bench", ID: "u-1"}
	const perConv = 100
	for _, convs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("conversations=%d", convs), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				s := memstore.New()
				for c := range convs {
					key := chatmem.Key{Tenant: user.Tenant, ID: fmt.Sprintf("c-%04d", c)}
					msgs := make([]chatmem.Message, perConv)
					for i := range msgs {
						msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Tokens: 12,
							Content: fmt.Sprintf("order SE-%d left the warehouse in Malmo and ships today (%d)", c, i)}
					}
					if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{User: user.ID}); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				n, err := s.DeleteUser(ctx, user)
				if err != nil || n != convs {
					b.Fatalf("DeleteUser = %d, %v, want %d", n, err, convs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*convs*perConv), "ns/message")
		})
	}
}

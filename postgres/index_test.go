package postgres_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
)

// TestIndexPending checks the search index's watermark: an append writes
// no postings; Postings and UserPostings find a message from the moment
// its append returned (they index what is past the watermark
// themselves); IndexPending run by several goroutines at once writes the
// postings one run writes; an expired conversation started afresh starts
// its index afresh; and a missing conversation is chatmem.ErrNotFound.
func TestIndexPending(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema)
	ctx := t.Context()
	admin := testenv.PostgresAdmin(t)
	key := chatmem.Key{Tenant: "ix", ID: "c"}
	other := chatmem.Key{Tenant: "ix", ID: "d"}
	add := func(key chatmem.Key, text string) int64 {
		t.Helper()
		res, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text, Tokens: 3}},
			chatmem.AppendOptions{User: "u"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Messages[0].Seq
	}
	for i := range 30 {
		add(key, fmt.Sprintf("parcel number %d is late", i))
	}
	add(other, "the zebra crossing")
	if rows := postingRows(t, admin, schema); len(rows) != 0 {
		t.Fatalf("after appends message_terms has %d rows, want none (the appends do not index)", len(rows))
	}

	seq := add(key, "where is my kangaroo")
	got, err := s.Postings(ctx, key, []string{"kangaroo", "parcel"}, seq+1, 100)
	if err != nil || len(got) != 2 || !slices.Equal(got[0], []int64{seq}) || len(got[1]) != 30 {
		t.Fatalf("Postings(kangaroo, parcel) right after the append = %v, %v; want [[%d] [30 seqs]]", got, err, seq)
	}
	hits, err := s.UserPostings(ctx, chatmem.Key{Tenant: "ix", ID: "u"}, []string{"zebra"}, 10)
	if err != nil || len(hits) != 1 || len(hits[0]) != 1 || hits[0][0].Conversation != other.ID {
		t.Fatalf("UserPostings(zebra) = %v, %v; want one hit in %s", hits, err, other)
	}
	once := postingRows(t, admin, schema)

	// Indexed again, by several at once (nothing past the watermark
	// here, so reset it first): the same postings.
	if _, err := admin.Exec(ctx, "UPDATE "+schema+".conversations SET terms_seq = 0"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for _, k := range []chatmem.Key{key, other} {
				if err := s.IndexPending(ctx, k); err != nil {
					t.Errorf("IndexPending(%s): %v", k, err)
				}
			}
		})
	}
	wg.Wait()
	if again := postingRows(t, admin, schema); !slices.Equal(again, once) {
		t.Errorf("indexed again by three at once: %d postings, want the %d of one run", len(again), len(once))
	}

	if err := s.IndexPending(ctx, chatmem.Key{Tenant: "ix", ID: "none"}); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("IndexPending(missing) = %v, want ErrNotFound", err)
	}
	if err := s.IndexPending(ctx, chatmem.Key{Tenant: "", ID: "x"}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("IndexPending(bad key) = %v, want ErrInvalid", err)
	}
}

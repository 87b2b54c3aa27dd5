package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// factMarkTests lists the chatmem.FactMarker subtests in the order
// testFactMarks runs them.
var factMarkTests = []subtest{
	{"Fresh", testFactMarkFresh},
	{"Through", testFactMarkThrough},
	{"Invalid", testFactMarkInvalid},
	{"NotFound", testFactMarkNotFound},
	{"Endings", testFactMarkEndings},
	{"Race", testFactMarkRace},
	{"Laggards", testFactLaggards},
}

// testFactMarks runs the chatmem.FactMarker subtests if the harness's
// stores implement it.
var testFactMarks = optional[chatmem.FactMarker](factMarkTests)

// mustFactMark returns key's mark, failing the test on an error.
func mustFactMark(t *testing.T, fm chatmem.FactMarker, key chatmem.Key) chatmem.FactMark {
	t.Helper()
	mk, err := fm.FactMark(t.Context(), key)
	if err != nil {
		t.Fatalf("FactMark(%s) error = %v, want nil", key, err)
	}
	return mk
}

// wantFactMark checks key's mark against seq and the conversation's
// LastSeq and CreatedAt.
func wantFactMark(t *testing.T, what string, s chatmem.Store, key chatmem.Key, seq int64) {
	t.Helper()
	mk := mustFactMark(t, as[chatmem.FactMarker](t, s), key)
	conv := mustConversation(t, s, key)
	if mk.Seq != seq || mk.LastSeq != conv.LastSeq || !mk.Created.Equal(conv.CreatedAt) {
		t.Errorf("%s: FactMark = {Seq %d, LastSeq %d, Created %v}, want {%d, %d, %v}",
			what, mk.Seq, mk.LastSeq, mk.Created, seq, conv.LastSeq, conv.CreatedAt)
	}
}

// fourMessages appends two user and two assistant messages to a new
// conversation and returns its CreatedAt.
func fourMessages(t *testing.T, s chatmem.Store, key chatmem.Key) time.Time {
	t.Helper()
	res := mustAppend(t, s, key, []chatmem.Message{
		msg(chatmem.RoleUser, "my name is Ada", 4), msg(chatmem.RoleAssistant, "hello Ada", 3),
		msg(chatmem.RoleUser, "order SE-1", 3), msg(chatmem.RoleAssistant, "noted", 1),
	}, chatmem.AppendOptions{})
	return res.Conversation.CreatedAt
}

// testFactMarkFresh checks that a new conversation's mark is 0 with its
// LastSeq and CreatedAt, that appends leave the mark where it is, and
// that facts set without the mark (SetFacts, SetFactsOf) do not move it.
func testFactMarkFresh(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("fresh")
	created := fourMessages(t, s, key)
	wantFactMark(t, "after Append", s, key, 0)
	mustSetFacts(t, as[chatmem.FactStore](t, s), key, fact("name", "Ada"))
	if gw, ok := s.(chatmem.GenerationWriter); ok {
		if err := gw.SetFactsOf(t.Context(), key, created, []chatmem.Fact{fact("order", "SE-1")}); err != nil {
			t.Fatalf("SetFactsOf error = %v, want nil", err)
		}
	}
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "more", 1)}, chatmem.AppendOptions{})
	wantFactMark(t, "after SetFacts and Append", s, key, 0)
}

// testFactMarkThrough checks the compare-and-set: SetFactsThrough stores
// its facts and moves the mark, in CreatedAt as Append or Conversation
// return it and through a second store; a repeat with the old prev is
// ErrConflict and writes nothing; an empty batch moves the mark alone.
func testFactMarkThrough(t *testing.T, h Harness) {
	s := h.New(t)
	fm, fs := as[chatmem.FactMarker](t, s), as[chatmem.FactStore](t, s)
	ctx := t.Context()
	key := randomKey("through")
	created := fourMessages(t, s, key)

	name := fact("name", "Ada")
	name.SourceSeq = 1
	if err := fm.SetFactsThrough(ctx, key, created, []chatmem.Fact{name}, 0, 2); err != nil {
		t.Fatalf("SetFactsThrough(prev 0, through 2) error = %v, want nil", err)
	}
	wantFactMark(t, "after SetFactsThrough(0, 2)", s, key, 2)
	wantFacts(t, "after SetFactsThrough(0, 2)", fs, key, name)

	again := fact("name", "Grace")
	err := fm.SetFactsThrough(ctx, key, created, []chatmem.Fact{again}, 0, 2)
	wantErr(t, "SetFactsThrough with a stale prev", err, chatmem.ErrConflict)
	err = fm.SetFactsThrough(ctx, key, created, []chatmem.Fact{again}, 1, 3)
	wantErr(t, "SetFactsThrough with prev 1 behind mark 2", err, chatmem.ErrConflict)
	wantFactMark(t, "after conflicts", s, key, 2)
	wantHistory(t, "after conflicts", fs, key, "name", name)

	// A second store over the same data sees the mark, and moves it on,
	// with CreatedAt as Conversation returns it.
	other := h.reopen(t, s)
	conv := mustConversation(t, other, key)
	wantFactMark(t, "through a second store", other, key, 2)
	order := fact("order", "SE-1")
	order.SourceSeq = 3
	if err := as[chatmem.FactMarker](t, other).SetFactsThrough(ctx, key, conv.CreatedAt.Local(), []chatmem.Fact{order}, 2, 3); err != nil {
		t.Fatalf("SetFactsThrough(prev 2, through 3) through a second store error = %v, want nil", err)
	}
	wantFactMark(t, "after SetFactsThrough(2, 3)", s, key, 3)
	wantFacts(t, "after SetFactsThrough(2, 3)", fs, key, name, order)

	// The last message stated nothing: the mark moves alone.
	if err := fm.SetFactsThrough(ctx, key, created, nil, 3, 4); err != nil {
		t.Fatalf("SetFactsThrough(no facts, 3, 4) error = %v, want nil", err)
	}
	wantFactMark(t, "after SetFactsThrough(no facts, 3, 4)", s, key, 4)
	wantFacts(t, "after SetFactsThrough(no facts)", fs, key, name, order)
	if got := mustConversation(t, s, key); got.LastSeq != 4 || !got.UpdatedAt.Equal(conv.UpdatedAt) {
		t.Errorf("Conversation after SetFactsThrough = LastSeq %d, UpdatedAt %v; want 4, %v (unchanged)", got.LastSeq, got.UpdatedAt, conv.UpdatedAt)
	}
}

// testFactMarkInvalid checks that a through outside prev+1..LastSeq, a
// negative prev and an invalid fact wrap ErrInvalid and write nothing,
// and that a limit outside 1..1000 for FactLaggards wraps ErrInvalid.
func testFactMarkInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	fm, fs := as[chatmem.FactMarker](t, s), as[chatmem.FactStore](t, s)
	ctx := t.Context()
	key := randomKey("invalid")
	created := fourMessages(t, s, key)
	ok := []chatmem.Fact{fact("name", "Ada")}
	for _, tc := range []struct {
		name          string
		facts         []chatmem.Fact
		prev, through int64
	}{
		{"through beyond LastSeq", ok, 0, 5},
		{"through equal to prev", ok, 0, 0},
		{"through below prev", ok, 2, 1},
		{"negative prev", ok, -1, 2},
		{"invalid fact key", []chatmem.Fact{fact("bad key!", "x")}, 0, 2},
		{"empty fact value", []chatmem.Fact{fact("name", "")}, 0, 2},
	} {
		err := fm.SetFactsThrough(ctx, key, created, tc.facts, tc.prev, tc.through)
		wantErr(t, "SetFactsThrough with "+tc.name, err, chatmem.ErrInvalid)
	}
	wantFactMark(t, "after refused writes", s, key, 0)
	wantFacts(t, "after refused writes", fs, key)
	for _, limit := range []int{-1, 0, 1001} {
		_, err := fm.FactLaggards(ctx, chatmem.Key{}, limit)
		wantErr(t, fmt.Sprintf("FactLaggards(limit %d)", limit), err, chatmem.ErrInvalid)
	}
	_, err := fm.FactMark(ctx, chatmem.Key{Tenant: "bad tenant", ID: "x"})
	wantErr(t, "FactMark with a bad key", err, chatmem.ErrInvalid)
}

// testFactMarkNotFound checks that a missing conversation, and another
// CreatedAt than the conversation's, are ErrNotFound and write nothing.
func testFactMarkNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	fm, fs := as[chatmem.FactMarker](t, s), as[chatmem.FactStore](t, s)
	ctx := t.Context()
	missing := randomKey("missing")
	_, err := fm.FactMark(ctx, missing)
	wantErr(t, "FactMark of a missing conversation", err, chatmem.ErrNotFound)
	err = fm.SetFactsThrough(ctx, missing, time.Now(), []chatmem.Fact{fact("name", "Ada")}, 0, 1)
	wantErr(t, "SetFactsThrough on a missing conversation", err, chatmem.ErrNotFound)
	wantNotFound(t, s, missing)

	key := randomKey("other")
	created := fourMessages(t, s, key)
	for _, other := range otherTimes(created) {
		err := fm.SetFactsThrough(ctx, key, other.at, []chatmem.Fact{fact("name", "Ada")}, 0, 2)
		wantErr(t, "SetFactsThrough created "+other.name, err, chatmem.ErrNotFound)
	}
	wantFactMark(t, "after writes for other conversations", s, key, 0)
	wantFacts(t, "after writes for other conversations", fs, key)
}

// testFactMarkEndings checks that a conversation that ends (deleted,
// expired, swept, purged) has no mark, and one created again under its ID
// starts at 0.
func testFactMarkEndings(t *testing.T, h Harness) {
	s := h.New(t)
	fm := as[chatmem.FactMarker](t, s)
	ctx := t.Context()
	endings(t, s, func(key chatmem.Key) {
		conv := mustConversation(t, s, key)
		if err := fm.SetFactsThrough(ctx, key, conv.CreatedAt, []chatmem.Fact{fact("name", "Ada")}, 0, 2); err != nil {
			t.Fatalf("SetFactsThrough(%s) error = %v, want nil", key, err)
		}
	}, func(how string, key chatmem.Key) {
		_, err := fm.FactMark(ctx, key)
		wantErr(t, "FactMark after "+how, err, chatmem.ErrNotFound)
	}, func(how string, key chatmem.Key) {
		wantFactMark(t, "FactMark of the conversation created again after "+how, s, key, 0)
	})
}

// testFactMarkRace checks the compare-and-set under contention: of
// extractors racing to move the mark from 0, through one store or
// several, exactly one writes its facts.
func testFactMarkRace(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	key := randomKey("race")
	created := fourMessages(t, s, key)
	stores := []chatmem.Store{s, h.reopen(t, s)}
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		fm := as[chatmem.FactMarker](t, stores[i%len(stores)])
		wg.Go(func() {
			errs[i] = fm.SetFactsThrough(ctx, key, created, []chatmem.Fact{fact("winner", fmt.Sprint(i))}, 0, 4)
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, chatmem.ErrConflict):
			t.Errorf("racer %d: SetFactsThrough error = %v, want nil or ErrConflict", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d racers moved the mark from 0, want exactly 1", won)
	}
	h2, err := as[chatmem.FactStore](t, s).FactHistory(ctx, key, "winner")
	if err != nil || len(h2) != 1 {
		t.Errorf("FactHistory(winner) = %d values, %v; want 1, nil", len(h2), err)
	}
	wantFactMark(t, "after the race", s, key, 4)
}

// testFactLaggards checks that FactLaggards lists the live conversations
// whose mark is below LastSeq, ordered by tenant and ID across tenants,
// page by page, and leaves out the caught-up, the expired and the
// deleted.
func testFactLaggards(t *testing.T, h Harness) {
	s := h.New(t)
	fm := as[chatmem.FactMarker](t, s)
	ctx := t.Context()
	// Two tenants that sort next to each other, apart from other runs'.
	base := randomTenant()
	tenants := []string{base + "a", base + "b"}
	var want []chatmem.Key
	for _, tenant := range tenants {
		for _, id := range []string{"c1", "c2", "c3", "c4", "c5"} {
			key := chatmem.Key{Tenant: tenant, ID: id}
			created := fourMessages(t, s, key)
			switch id {
			case "c2": // caught up
				if err := fm.SetFactsThrough(ctx, key, created, nil, 0, 4); err != nil {
					t.Fatal(err)
				}
			case "c3": // half way
				if err := fm.SetFactsThrough(ctx, key, created, nil, 0, 2); err != nil {
					t.Fatal(err)
				}
				want = append(want, key)
			case "c4": // deleted
				if err := s.Delete(ctx, key); err != nil {
					t.Fatal(err)
				}
			default:
				want = append(want, key)
			}
		}
	}
	expired := chatmem.Key{Tenant: tenants[0], ID: "c0"}
	mustAppend(t, s, expired, []chatmem.Message{msg(chatmem.RoleUser, "gone soon", 1)}, chatmem.AppendOptions{TTL: 100 * time.Millisecond})
	time.Sleep(200 * time.Millisecond)

	ours := func(keys []chatmem.Key) []chatmem.Key {
		return slices.DeleteFunc(keys, func(k chatmem.Key) bool { return !slices.Contains(tenants, k.Tenant) })
	}
	// From just before the first tenant, as the whole listing would reach it.
	start := chatmem.Key{Tenant: base, ID: "~"}
	all, err := fm.FactLaggards(ctx, start, 1000)
	if err != nil {
		t.Fatalf("FactLaggards error = %v, want nil", err)
	}
	if got := ours(all); !slices.Equal(got, want) {
		t.Errorf("FactLaggards = %v, want %v", got, want)
	}
	var paged []chatmem.Key
	after := start
	for range 10 {
		page, err := fm.FactLaggards(ctx, after, 2)
		if err != nil {
			t.Fatalf("FactLaggards(after %s, 2) error = %v, want nil", after, err)
		}
		if len(page) > 2 {
			t.Fatalf("FactLaggards(limit 2) returned %d keys", len(page))
		}
		paged = append(paged, page...)
		if len(page) < 2 || !slices.Contains(tenants, page[len(page)-1].Tenant) {
			break
		}
		after = page[len(page)-1]
	}
	if got := ours(paged); !slices.Equal(got, want) {
		t.Errorf("FactLaggards page by page = %v, want %v", got, want)
	}
	// The zero Key starts from the first tenant of all.
	first, err := fm.FactLaggards(ctx, chatmem.Key{}, 1)
	if err != nil || len(first) != 1 {
		t.Errorf("FactLaggards(zero key, 1) = %v, %v; want one key", first, err)
	}
}

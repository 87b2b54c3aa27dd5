package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// summaryTests lists the chatmem.SummaryStore subtests in the order
// testSummaries runs them.
var summaryTests = []subtest{
	{"NotFound", testSummaryNotFound},
	{"RoundTrip", testSummaryRoundTrip},
	{"CompareAndSet", testSummaryCompareAndSet},
	{"Invalid", testSummaryInvalid},
	{"Race", testSummaryRace},
	{"TenantIsolation", testSummaryTenantIsolation},
	{"Endings", testSummaryEndings},
}

// testSummaries runs the chatmem.SummaryStore subtests if the harness's stores implement it.
var testSummaries = optional[chatmem.SummaryStore](summaryTests)

// diffSummary describes the first difference between got and want, or
// returns "". Times compare with Equal (stores may change the location).
func diffSummary(got, want chatmem.Summary) string {
	switch {
	case got.Text != want.Text:
		return fmt.Sprintf("Text = %q, want %q", got.Text, want.Text)
	case got.CoversSeq != want.CoversSeq:
		return fmt.Sprintf("CoversSeq = %d, want %d", got.CoversSeq, want.CoversSeq)
	case got.Tokens != want.Tokens:
		return fmt.Sprintf("Tokens = %d, want %d", got.Tokens, want.Tokens)
	case got.Summarizer != want.Summarizer:
		return fmt.Sprintf("Summarizer = %q, want %q", got.Summarizer, want.Summarizer)
	case !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Sprintf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	return ""
}

// wantSummary fails the test unless key's summary is want.
func wantSummary(t *testing.T, what string, ss chatmem.SummaryStore, key chatmem.Key, want chatmem.Summary) {
	t.Helper()
	got, err := ss.Summary(t.Context(), key)
	if err != nil {
		t.Errorf("%s: Summary(%s) error = %v, want nil", what, key, err)
		return
	}
	if d := diffSummary(got, want); d != "" {
		t.Errorf("%s: Summary(%s): %s", what, key, d)
	}
}

// wantNoSummary fails the test unless Summary(key) wraps ErrNotFound.
func wantNoSummary(t *testing.T, what string, ss chatmem.SummaryStore, key chatmem.Key) {
	t.Helper()
	s, err := ss.Summary(t.Context(), key)
	if !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("%s: Summary(%s) = covers %d, %v; want ErrNotFound", what, key, s.CoversSeq, err)
	}
}

// mustPutSummary stores s with PutSummary and fails the test on an error.
func mustPutSummary(t *testing.T, ss chatmem.SummaryStore, key chatmem.Key, s chatmem.Summary, prev int64) {
	t.Helper()
	if err := ss.PutSummary(t.Context(), key, s, prev); err != nil {
		t.Fatalf("PutSummary(%s, covers %d, prev %d) error = %v, want nil", key, s.CoversSeq, prev, err)
	}
}

// summaryAt returns a summary covering seq, written by "offline" at a time
// with microseconds.
func summaryAt(text string, seq int64) chatmem.Summary {
	return chatmem.Summary{Text: text, CoversSeq: seq, Tokens: len(text) / 4, Summarizer: "offline",
		CreatedAt: time.Date(2025, 4, 5, 6, 7, 8, 123456000, time.UTC)}
}

// testSummaryNotFound checks that a conversation that does not exist, and
// one without a summary, have none (ErrNotFound); that PutSummary on a
// missing conversation wraps ErrNotFound and creates nothing; and that
// malformed keys wrap ErrInvalid.
func testSummaryNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	ss := as[chatmem.SummaryStore](t, s)
	ctx := t.Context()
	known := randomKey("known")
	fill(t, ctx, s, known, 2)
	wantNoSummary(t, "conversation without a summary", ss, known)
	for _, key := range []chatmem.Key{randomKey("nobody"), {Tenant: known.Tenant, ID: "other"}} {
		wantNoSummary(t, "missing conversation", ss, key)
		err := ss.PutSummary(ctx, key, summaryAt("nothing to summarize", 1), 0)
		wantErr(t, fmt.Sprintf("PutSummary(%s) to a missing conversation", key), err, chatmem.ErrNotFound)
		wantNotFound(t, s, key)
	}
	wantNoSummary(t, "conversation without a summary, after PutSummary elsewhere", ss, known)

	for _, bad := range badIDs {
		for _, key := range []chatmem.Key{{Tenant: bad, ID: "ok"}, {Tenant: known.Tenant, ID: bad}} {
			name := fmt.Sprintf("%.40q/%.40q", key.Tenant, key.ID)
			_, err := ss.Summary(ctx, key)
			wantErr(t, "Summary("+name+")", err, chatmem.ErrInvalid)
			err = ss.PutSummary(ctx, key, summaryAt("x", 1), 0)
			wantErr(t, "PutSummary("+name+")", err, chatmem.ErrInvalid)
		}
	}
}

// testSummaryRoundTrip checks that every field of a summary survives the
// round trip, CreatedAt to the microsecond, also through a second store over
// the same data; that a zero CreatedAt means the store's clock; that Unicode
// text is kept exactly; and that a summary changes none of the
// conversation's metadata.
func testSummaryRoundTrip(t *testing.T, h Harness) {
	s := h.New(t)
	ss := as[chatmem.SummaryStore](t, s)
	key := randomKey("summary")
	fill(t, t.Context(), s, key, 6)
	conv := mustConversation(t, s, key)

	first := chatmem.Summary{
		Text:       "Ada asked where order A-17 is; it shipped on Monday.",
		CoversSeq:  4,
		Tokens:     13,
		Summarizer: "openai:gpt-4o-mini",
		// Another location: stores may return UTC, times compare with Equal.
		CreatedAt: time.Date(2025, 3, 4, 5, 6, 7, 891234000, time.FixedZone("UTC+1", 3600)),
	}
	mustPutSummary(t, ss, key, first, 0)
	wantSummary(t, "after the first PutSummary", ss, key, first)
	wantSummary(t, "after the first PutSummary, through a second store", as[chatmem.SummaryStore](t, h.reopen(t, s)), key, first)
	wantConversation(t, "Conversation after PutSummary", mustConversation(t, s, key), conv)

	second := chatmem.Summary{
		Text:       "要約: Zoë (👋🏽) wants order A-17 sent to 東京 instead;\nthe assistant said «ok».\t'quotes' \"too\"",
		CoversSeq:  6,
		Tokens:     0,
		Summarizer: "offline",
	}
	before := time.Now()
	mustPutSummary(t, ss, key, second, first.CoversSeq)
	after := time.Now()
	got, err := ss.Summary(t.Context(), key)
	if err != nil {
		t.Fatalf("Summary after the second PutSummary error = %v, want nil", err)
	}
	if got.CreatedAt.Before(before.Add(-time.Second)) || got.CreatedAt.After(after.Add(time.Second)) {
		t.Errorf("CreatedAt of a summary put with zero CreatedAt = %v, want between %v and %v", got.CreatedAt, before, after)
	}
	second.CreatedAt = got.CreatedAt
	if d := diffSummary(got, second); d != "" {
		t.Errorf("Summary after the second PutSummary: %s", d)
	}
	wantConversation(t, "Conversation after the second PutSummary", mustConversation(t, s, key), conv)
}

// testSummaryCompareAndSet checks that PutSummary is a compare-and-set on
// the covered sequence number: a prev other than what the stored summary
// covers (0 for none) wraps ErrConflict and changes nothing, also when no
// summary is stored, and a retry of a PutSummary that succeeded conflicts.
func testSummaryCompareAndSet(t *testing.T, h Harness) {
	s := h.New(t)
	ss := as[chatmem.SummaryStore](t, s)
	ctx := t.Context()
	key := randomKey("cas")
	fill(t, ctx, s, key, 10)

	a := summaryAt("first three messages", 3)
	mustPutSummary(t, ss, key, a, 0)
	// Each is valid on its own: CoversSeq is after prev and within LastSeq.
	for _, c := range []struct{ prev, covers int64 }{{0, 5}, {2, 5}, {4, 5}, {9, 10}} {
		err := ss.PutSummary(ctx, key, summaryAt("stale", c.covers), c.prev)
		wantErr(t, fmt.Sprintf("PutSummary(prev %d, covers %d) with the summary at 3", c.prev, c.covers), err, chatmem.ErrConflict)
	}
	wantSummary(t, "after conflicts", ss, key, a)

	b := summaryAt("all ten messages", 10)
	mustPutSummary(t, ss, key, b, 3)
	err := ss.PutSummary(ctx, key, b, 3)
	wantErr(t, "a repeated PutSummary(prev 3, covers 10)", err, chatmem.ErrConflict)
	wantSummary(t, "after a repeated PutSummary", ss, key, b)

	// No summary stored: only prev 0 matches.
	none := chatmem.Key{Tenant: key.Tenant, ID: "none"}
	fill(t, ctx, s, none, 5)
	for _, prev := range []int64{1, 2, 3} {
		err := ss.PutSummary(ctx, none, summaryAt("stale", 4), prev)
		wantErr(t, fmt.Sprintf("PutSummary(prev %d, covers 4) with no summary stored", prev), err, chatmem.ErrConflict)
	}
	wantNoSummary(t, "after conflicts on a conversation without a summary", ss, none)
	wantSummary(t, "other conversation", ss, key, b)
}

// testSummaryInvalid checks that PutSummary wraps ErrInvalid, and changes
// nothing, for an empty Text or a CoversSeq outside prev+1..LastSeq: a
// summary cannot move backwards, stand still, or cover messages that do
// not exist.
func testSummaryInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	ss := as[chatmem.SummaryStore](t, s)
	ctx := t.Context()
	key := randomKey("invalid")
	fill(t, ctx, s, key, 5)

	// Without a summary, prev is 0 and CoversSeq must be in 1..5.
	for _, c := range []struct {
		name string
		s    chatmem.Summary
	}{
		{"covers 0", summaryAt("nothing", 0)},
		{"covers past LastSeq", summaryAt("the future", 6)},
		{"empty text", summaryAt("", 1)},
	} {
		err := ss.PutSummary(ctx, key, c.s, 0)
		wantErr(t, fmt.Sprintf("PutSummary(%s, prev 0) with LastSeq 5", c.name), err, chatmem.ErrInvalid)
	}
	wantNoSummary(t, "after invalid first summaries", ss, key)

	a := summaryAt("first two", 2)
	mustPutSummary(t, ss, key, a, 0)
	for _, c := range []struct {
		name string
		s    chatmem.Summary
	}{
		{"covers prev", summaryAt("standing still", 2)},
		{"covers before prev", summaryAt("backwards", 1)},
		{"covers 0", summaryAt("backwards", 0)},
		{"covers past LastSeq", summaryAt("the future", 6)},
		{"empty text", summaryAt("", 3)},
	} {
		err := ss.PutSummary(ctx, key, c.s, 2)
		wantErr(t, fmt.Sprintf("PutSummary(%s, prev 2) with LastSeq 5", c.name), err, chatmem.ErrInvalid)
	}
	wantSummary(t, "after invalid summaries", ss, key, a)
	mustPutSummary(t, ss, key, summaryAt("all five", 5), 2)
}

// testSummaryRace runs rounds of concurrent PutSummary calls with the same
// prev, half of them through a second store over the same data: in each
// round exactly one wins, the others wrap ErrConflict, and the stored
// summary is the winner's. The first round races to store the first
// summary (prev 0).
func testSummaryRace(t *testing.T, h Harness) {
	const rounds, racers = 4, 8
	s1 := h.New(t)
	s2 := h.reopen(t, s1)
	stores := []chatmem.SummaryStore{as[chatmem.SummaryStore](t, s1), as[chatmem.SummaryStore](t, s2)}
	key := randomKey("race")
	fill(t, t.Context(), s1, key, rounds*racers)

	var prev int64
	for round := range rounds {
		errs := make([]error, racers)
		sums := make([]chatmem.Summary, racers)
		start := make(chan struct{})
		done := make(chan int)
		for i := range racers {
			sums[i] = summaryAt(fmt.Sprintf("round %d, racer %d", round, i), prev+1+int64(i))
			go func() {
				<-start
				errs[i] = stores[i%2].PutSummary(t.Context(), key, sums[i], prev)
				done <- i
			}()
		}
		close(start)
		for range racers {
			<-done
		}
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Errorf("round %d: racers %d and %d both won PutSummary(prev %d)", round, winner, i, prev)
			case err == nil:
				winner = i
			case !errors.Is(err, chatmem.ErrConflict):
				t.Errorf("round %d: racer %d: PutSummary(prev %d) error = %v, want nil or ErrConflict", round, i, prev, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no racer won PutSummary(prev %d)", round, prev)
		}
		wantSummary(t, fmt.Sprintf("round %d", round), stores[0], key, sums[winner])
		wantSummary(t, fmt.Sprintf("round %d, second store", round), stores[1], key, sums[winner])
		prev = sums[winner].CoversSeq
	}
}

// testSummaryTenantIsolation checks that a summary belongs to one
// conversation of one tenant: the same ID in another tenant, and keys that
// would collide if a store joined tenant and ID naively, have their own.
func testSummaryTenantIsolation(t *testing.T, h Harness) {
	s := h.New(t)
	ss := as[chatmem.SummaryStore](t, s)
	ctx := t.Context()
	a, b := randomTenant(), randomTenant()
	aShared := chatmem.Key{Tenant: a, ID: "shared"}
	bShared := chatmem.Key{Tenant: b, ID: "shared"}
	aOnly := chatmem.Key{Tenant: a, ID: "p:q"}
	aColon := chatmem.Key{Tenant: a + ":p", ID: "q"} // joined with ":", the same string as aOnly
	for _, key := range []chatmem.Key{aShared, bShared, aOnly, aColon} {
		fill(t, ctx, s, key, 3)
	}

	sa := summaryAt("tenant a", 2)
	sOnly := summaryAt("tenant a, p:q", 1)
	mustPutSummary(t, ss, aShared, sa, 0)
	mustPutSummary(t, ss, aOnly, sOnly, 0)
	wantNoSummary(t, "same ID in another tenant", ss, bShared)
	wantNoSummary(t, "colliding key", ss, aColon)
	err := ss.PutSummary(ctx, chatmem.Key{Tenant: b, ID: aOnly.ID}, summaryAt("x", 1), 0)
	wantErr(t, "PutSummary to an ID only another tenant has", err, chatmem.ErrNotFound)

	// prev is each conversation's own: 0 here, though tenant a's is at 2.
	sb := summaryAt("tenant b", 3)
	mustPutSummary(t, ss, bShared, sb, 0)
	err = ss.PutSummary(ctx, aShared, summaryAt("x", 3), 0)
	wantErr(t, "PutSummary(prev 0) where only the other tenant's was 0", err, chatmem.ErrConflict)
	wantSummary(t, "tenant a", ss, aShared, sa)
	wantSummary(t, "tenant b", ss, bShared, sb)

	if err := s.Delete(ctx, aShared); err != nil {
		t.Fatalf("Delete(%s) error = %v, want nil", aShared, err)
	}
	wantSummary(t, "tenant b after deleting tenant a's conversation", ss, bShared, sb)
	if err := s.Delete(ctx, aColon); err != nil {
		t.Fatalf("Delete(%s) error = %v, want nil", aColon, err)
	}
	wantSummary(t, "after deleting the colliding key", ss, aOnly, sOnly)
}

// testSummaryEndings checks that a summary ends with its conversation, by
// Delete, expiry, Sweep or PurgeInactive: the ended conversation has no
// summary and takes none, and when its ID comes back the new conversation
// starts without one (its first summary is put with prev 0).
func testSummaryEndings(t *testing.T, h Harness) {
	s := h.New(t)
	ss := as[chatmem.SummaryStore](t, s)
	endings(t, s,
		func(key chatmem.Key) { mustPutSummary(t, ss, key, summaryAt("the old conversation", 2), 0) },
		func(how string, key chatmem.Key) {
			wantNoSummary(t, "after "+how, ss, key)
			err := ss.PutSummary(t.Context(), key, summaryAt("too late", 2), 0)
			wantErr(t, fmt.Sprintf("PutSummary(%s) after %s", key, how), err, chatmem.ErrNotFound)
		},
		func(how string, key chatmem.Key) {
			wantNoSummary(t, "after "+how+" and a new append", ss, key)
			mustPutSummary(t, ss, key, summaryAt("the new conversation", 1), 0)
		})
}

package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// generationTests lists the chatmem.GenerationWriter subtests in the order
// testGenerations runs them.
var generationTests = []subtest{
	{"SameGeneration", testGenerationSame},
	{"OtherGeneration", testGenerationOther},
	{"NotFound", testGenerationNotFound},
	{"Invalid", testGenerationInvalid},
	{"Endings", testGenerationEndings},
	{"Race", testGenerationRace},
}

// testGenerations runs the chatmem.GenerationWriter subtests if the
// harness's stores implement it.
var testGenerations = optional[chatmem.GenerationWriter](generationTests)

// generationStores returns s as the three interfaces the subtests use.
func generationStores(t *testing.T, s chatmem.Store) (chatmem.GenerationWriter, chatmem.SummaryStore, chatmem.FactStore) {
	t.Helper()
	return as[chatmem.GenerationWriter](t, s), as[chatmem.SummaryStore](t, s), as[chatmem.FactStore](t, s)
}

// otherTimes returns times that are not created, each named: later and
// earlier by far, by a microsecond (every store keeps at least that), and
// the zero time (no conversation's CreatedAt).
func otherTimes(created time.Time) []struct {
	name string
	at   time.Time
} {
	return []struct {
		name string
		at   time.Time
	}{
		{"created+1h", created.Add(time.Hour)},
		{"created-1h", created.Add(-time.Hour)},
		{"created+1µs", created.Add(time.Microsecond)},
		{"created-1µs", created.Add(-time.Microsecond)},
		{"zero time", time.Time{}},
	}
}

// testGenerationSame checks that PutSummaryOf and SetFactsOf write, as
// PutSummary and SetFacts would, when created is the conversation's
// CreatedAt as Append returned it or as Conversation returns it, in
// another location or without a monotonic clock reading, and through a
// second store over the same data; and that they change none of the
// conversation's metadata.
func testGenerationSame(t *testing.T, h Harness) {
	s := h.New(t)
	gw, ss, fs := generationStores(t, s)
	ctx := t.Context()
	key := randomKey("same")
	res := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "I am Ada", 3), msg(chatmem.RoleAssistant, "Hi Ada", 2)}, chatmem.AppendOptions{})
	fill(t, ctx, s, key, 6)
	conv := mustConversation(t, s, key)
	if !conv.CreatedAt.Equal(res.Conversation.CreatedAt) {
		t.Fatalf("Conversation(%s).CreatedAt = %v, want %v as Append returned it", key, conv.CreatedAt, res.Conversation.CreatedAt)
	}

	a := summaryAt("Ada introduced herself", 2)
	if err := gw.PutSummaryOf(ctx, key, res.Conversation.CreatedAt, a, 0); err != nil {
		t.Fatalf("PutSummaryOf(%s, CreatedAt from Append, covers 2, prev 0) error = %v, want nil", key, err)
	}
	wantSummary(t, "after PutSummaryOf", ss, key, a)
	name := fact("name", "Ada")
	if err := gw.SetFactsOf(ctx, key, conv.CreatedAt, []chatmem.Fact{name}); err != nil {
		t.Fatalf("SetFactsOf(%s, CreatedAt from Conversation) error = %v, want nil", key, err)
	}
	wantFacts(t, "after SetFactsOf", fs, key, name)

	// The same instant, however it is written.
	b := summaryAt("Ada introduced herself and chatted", 4)
	zone := time.FixedZone("UTC-5", -5*3600)
	if err := gw.PutSummaryOf(ctx, key, conv.CreatedAt.In(zone), b, 2); err != nil {
		t.Errorf("PutSummaryOf(%s, CreatedAt in UTC-5, covers 4, prev 2) error = %v, want nil", key, err)
	}
	city := fact("city", "London")
	if err := gw.SetFactsOf(ctx, key, conv.CreatedAt.Round(0), []chatmem.Fact{city}); err != nil {
		t.Errorf("SetFactsOf(%s, CreatedAt without monotonic reading) error = %v, want nil", key, err)
	}
	if err := gw.SetFactsOf(ctx, key, conv.CreatedAt, nil); err != nil {
		t.Errorf("SetFactsOf(%s, CreatedAt, no facts) error = %v, want nil", key, err)
	}

	// Through a second store, with the first store's CreatedAt.
	gw2, ss2, fs2 := generationStores(t, h.reopen(t, s))
	c := summaryAt("the whole conversation", 8)
	if err := gw2.PutSummaryOf(ctx, key, conv.CreatedAt, c, 4); err != nil {
		t.Errorf("PutSummaryOf(%s, CreatedAt, covers 8, prev 4) through a second store error = %v, want nil", key, err)
	}
	renamed := fact("name", "Ada Lovelace")
	if err := gw2.SetFactsOf(ctx, key, conv.CreatedAt, []chatmem.Fact{renamed}); err != nil {
		t.Errorf("SetFactsOf(%s, CreatedAt) through a second store error = %v, want nil", key, err)
	}
	wantSummary(t, "after PutSummaryOf through a second store", ss, key, c)
	wantSummary(t, "after PutSummaryOf, read through the second store", ss2, key, c)
	wantFacts(t, "after SetFactsOf through a second store", fs, key, city, renamed)
	wantHistory(t, "after SetFactsOf through a second store", fs2, key, "name", name, renamed)
	wantConversation(t, "Conversation after PutSummaryOf and SetFactsOf", mustConversation(t, s, key), conv)
}

// testGenerationOther checks that PutSummaryOf and SetFactsOf wrap
// ErrNotFound, and write nothing, when created is not the conversation's
// CreatedAt: also when prev does not match the stored summary (ErrNotFound
// comes before ErrConflict, as for a missing conversation), for an empty
// batch of facts, and through a second store over the same data.
func testGenerationOther(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	key := randomKey("other")
	fill(t, ctx, s, key, 6)
	conv := mustConversation(t, s, key)
	_, ss, fs := generationStores(t, s)
	a := summaryAt("the first four messages", 4)
	mustPutSummary(t, ss, key, a, 0)
	name := fact("name", "Ada")
	mustSetFacts(t, fs, key, name)

	for _, store := range []struct {
		name string
		s    chatmem.Store
	}{{"", s}, {" through a second store", h.reopen(t, s)}} {
		gw := as[chatmem.GenerationWriter](t, store.s)
		for _, other := range otherTimes(conv.CreatedAt) {
			for _, prev := range []int64{0, 4} {
				err := gw.PutSummaryOf(ctx, key, other.at, summaryAt("stale", 6), prev)
				wantErr(t, fmt.Sprintf("PutSummaryOf(%s, %s, covers 6, prev %d)%s", key, other.name, prev, store.name), err, chatmem.ErrNotFound)
			}
			err := gw.SetFactsOf(ctx, key, other.at, []chatmem.Fact{fact("name", "Grace"), fact("city", "Paris")})
			wantErr(t, fmt.Sprintf("SetFactsOf(%s, %s)%s", key, other.name, store.name), err, chatmem.ErrNotFound)
			err = gw.SetFactsOf(ctx, key, other.at, nil)
			wantErr(t, fmt.Sprintf("SetFactsOf(%s, %s, no facts)%s", key, other.name, store.name), err, chatmem.ErrNotFound)
		}
	}
	wantSummary(t, "after writes for another generation", ss, key, a)
	wantFacts(t, "after writes for another generation", fs, key, name)
	wantHistory(t, "after writes for another generation", fs, key, "name", name)
	wantNoHistory(t, "after writes for another generation", fs, key, "city")
	wantConversation(t, "Conversation after writes for another generation", mustConversation(t, s, key), conv)
}

// testGenerationNotFound checks that PutSummaryOf and SetFactsOf wrap
// ErrNotFound, and create nothing, for a conversation that does not exist,
// also with the CreatedAt of a conversation with the same ID in another
// tenant; and that malformed keys wrap ErrInvalid.
func testGenerationNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	gw, ss, fs := generationStores(t, s)
	ctx := t.Context()
	known := randomKey("known")
	fill(t, ctx, s, known, 2)
	created := mustConversation(t, s, known).CreatedAt
	for _, key := range []chatmem.Key{randomKey("nobody"), randomKey(known.ID), {Tenant: known.Tenant, ID: "other"}} {
		err := gw.PutSummaryOf(ctx, key, created, summaryAt("nothing to summarize", 1), 0)
		wantErr(t, fmt.Sprintf("PutSummaryOf(%s) to a missing conversation", key), err, chatmem.ErrNotFound)
		err = gw.SetFactsOf(ctx, key, created, []chatmem.Fact{fact("name", "Ada")})
		wantErr(t, fmt.Sprintf("SetFactsOf(%s) to a missing conversation", key), err, chatmem.ErrNotFound)
		err = gw.SetFactsOf(ctx, key, created, nil)
		wantErr(t, fmt.Sprintf("SetFactsOf(%s, no facts) to a missing conversation", key), err, chatmem.ErrNotFound)
		wantNotFound(t, s, key)
	}
	wantNoSummary(t, "conversation without a summary, after writes elsewhere", ss, known)
	wantFacts(t, "conversation without facts, after writes elsewhere", fs, known)

	for _, bad := range badIDs {
		for _, key := range []chatmem.Key{{Tenant: bad, ID: "ok"}, {Tenant: known.Tenant, ID: bad}} {
			name := fmt.Sprintf("%.40q/%.40q", key.Tenant, key.ID)
			err := gw.PutSummaryOf(ctx, key, created, summaryAt("x", 1), 0)
			wantErr(t, "PutSummaryOf("+name+")", err, chatmem.ErrInvalid)
			err = gw.SetFactsOf(ctx, key, created, []chatmem.Fact{fact("name", "Ada")})
			wantErr(t, "SetFactsOf("+name+")", err, chatmem.ErrInvalid)
		}
	}
}

// testGenerationInvalid checks that PutSummaryOf and SetFactsOf wrap
// ErrInvalid, and write nothing, for what PutSummary and SetFacts refuse on
// its own (an empty text, a CoversSeq not after prev, a negative prev, an
// invalid fact), whether created is the conversation's CreatedAt or not;
// that with the right CreatedAt a CoversSeq past LastSeq wraps ErrInvalid
// and a prev the stored summary does not cover ErrConflict, as they do for
// PutSummary.
func testGenerationInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	gw, ss, fs := generationStores(t, s)
	ctx := t.Context()
	key := randomKey("invalid")
	fill(t, ctx, s, key, 5)
	created := mustConversation(t, s, key).CreatedAt
	a := summaryAt("first two", 2)
	mustPutSummary(t, ss, key, a, 0)
	name := fact("name", "Ada")
	mustSetFacts(t, fs, key, name)

	badSummaries := []struct {
		name string
		s    chatmem.Summary
		prev int64
	}{
		{"empty text", summaryAt("", 3), 2},
		{"covers prev", summaryAt("standing still", 2), 2},
		{"covers before prev", summaryAt("backwards", 1), 2},
		{"negative prev", summaryAt("from before the start", 3), -1},
	}
	badFact := fact("name", "Grace")
	badFact.Confidence = 2
	for _, at := range []struct {
		name string
		at   time.Time
	}{{"CreatedAt", created}, {"created+1h", created.Add(time.Hour)}} {
		for _, c := range badSummaries {
			err := gw.PutSummaryOf(ctx, key, at.at, c.s, c.prev)
			wantErr(t, fmt.Sprintf("PutSummaryOf(%s, %s, prev %d)", at.name, c.name, c.prev), err, chatmem.ErrInvalid)
		}
		err := gw.SetFactsOf(ctx, key, at.at, []chatmem.Fact{fact("city", "Paris"), badFact})
		wantErr(t, fmt.Sprintf("SetFactsOf(%s, a fact of confidence 2)", at.name), err, chatmem.ErrInvalid)
	}
	err := gw.PutSummaryOf(ctx, key, created, summaryAt("the future", 6), 2)
	wantErr(t, "PutSummaryOf(CreatedAt, covers 6, prev 2) with LastSeq 5", err, chatmem.ErrInvalid)
	err = gw.PutSummaryOf(ctx, key, created, summaryAt("stale", 4), 0)
	wantErr(t, "PutSummaryOf(CreatedAt, covers 4, prev 0) with the summary at 2", err, chatmem.ErrConflict)

	wantSummary(t, "after refused summaries", ss, key, a)
	wantFacts(t, "after refused facts", fs, key, name)
	wantHistory(t, "after refused facts", fs, key, "name", name)
	wantNoHistory(t, "after refused facts", fs, key, "city")
}

// testGenerationEndings ends conversations in every way (see endings) after
// PutSummaryOf and SetFactsOf wrote to them, and checks that with the old
// CreatedAt both wrap ErrNotFound once the conversation has ended and
// still once its ID is back, through a second store over the same data
// too, leaving the new conversation without a summary or facts; and that
// the new conversation's own CreatedAt, which differs, writes.
func testGenerationEndings(t *testing.T, h Harness) {
	s := h.New(t)
	gw, ss, fs := generationStores(t, s)
	gw2 := as[chatmem.GenerationWriter](t, h.reopen(t, s))
	ctx := t.Context()
	created := make(map[chatmem.Key]time.Time)
	late := func(how string, key chatmem.Key) {
		t.Helper()
		for i, w := range []chatmem.GenerationWriter{gw, gw2} {
			through := []string{"", " through a second store"}[i]
			err := w.PutSummaryOf(ctx, key, created[key], summaryAt("the old conversation", 1), 0)
			wantErr(t, fmt.Sprintf("PutSummaryOf(%s, old CreatedAt, prev 0) after %s%s", key, how, through), err, chatmem.ErrNotFound)
			err = w.PutSummaryOf(ctx, key, created[key], summaryAt("the old conversation", 2), 1)
			wantErr(t, fmt.Sprintf("PutSummaryOf(%s, old CreatedAt, prev 1) after %s%s", key, how, through), err, chatmem.ErrNotFound)
			err = w.SetFactsOf(ctx, key, created[key], []chatmem.Fact{fact("name", "old"), fact("email", "old@example.com")})
			wantErr(t, fmt.Sprintf("SetFactsOf(%s, old CreatedAt) after %s%s", key, how, through), err, chatmem.ErrNotFound)
		}
	}
	endings(t, s,
		func(key chatmem.Key) {
			created[key] = mustConversation(t, s, key).CreatedAt
			if err := gw.PutSummaryOf(ctx, key, created[key], summaryAt("the old conversation", 1), 0); err != nil {
				t.Fatalf("PutSummaryOf(%s, CreatedAt) error = %v, want nil", key, err)
			}
			if err := gw.SetFactsOf(ctx, key, created[key], []chatmem.Fact{fact("name", "old")}); err != nil {
				t.Fatalf("SetFactsOf(%s, CreatedAt) error = %v, want nil", key, err)
			}
		},
		late,
		func(how string, key chatmem.Key) {
			now := mustConversation(t, s, key).CreatedAt
			if now.Equal(created[key]) {
				t.Fatalf("after %s and a new append, Conversation(%s).CreatedAt = %v, the old conversation's", how, key, now)
			}
			late(how+" and a new append", key)
			wantNoSummary(t, "after "+how+" and a new append", ss, key)
			wantFacts(t, "after "+how+" and a new append", fs, key)
			for _, name := range []string{"name", "email"} {
				wantNoHistory(t, "after "+how+" and a new append", fs, key, name)
			}
			b := summaryAt("the new conversation", 2)
			if err := gw2.PutSummaryOf(ctx, key, now, b, 0); err != nil {
				t.Errorf("PutSummaryOf(%s, new CreatedAt) after %s error = %v, want nil", key, how, err)
			}
			n := fact("name", "new")
			if err := gw2.SetFactsOf(ctx, key, now, []chatmem.Fact{n}); err != nil {
				t.Errorf("SetFactsOf(%s, new CreatedAt) after %s error = %v, want nil", key, how, err)
			}
			wantSummary(t, "after "+how+" and a new append", ss, key, b)
			wantHistory(t, "after "+how+" and a new append", fs, key, "name", n)
		})
}

// testGenerationRace races, round after round, PutSummaryOf and SetFactsOf
// with a conversation's CreatedAt against a Delete and an append that
// brings its ID back, through two stores over the same data: each write
// lands in the old conversation (and is deleted with it) or wraps
// ErrNotFound, and the new conversation never has a summary or facts.
func testGenerationRace(t *testing.T, h Harness) {
	const rounds = 20
	s1 := h.New(t)
	s2 := h.reopen(t, s1)
	gw := as[chatmem.GenerationWriter](t, s2)
	_, ss, fs := generationStores(t, s1)
	ctx := t.Context()
	key := randomKey("race")
	two := []chatmem.Message{msg(chatmem.RoleUser, "hello", 1), msg(chatmem.RoleAssistant, "hi", 1)}
	created := mustAppend(t, s1, key, two, chatmem.AppendOptions{}).Conversation.CreatedAt
	for round := range rounds {
		var wg sync.WaitGroup
		var sumErr, factErr error
		wg.Go(func() {
			sumErr = gw.PutSummaryOf(ctx, key, created, summaryAt("the old conversation", 1), 0)
		})
		wg.Go(func() {
			factErr = gw.SetFactsOf(ctx, key, created, []chatmem.Fact{fact("name", "old")})
		})
		if err := s1.Delete(ctx, key); err != nil {
			t.Fatalf("round %d: Delete(%s) error = %v, want nil", round, key, err)
		}
		next := mustAppend(t, s1, key, two, chatmem.AppendOptions{}).Conversation.CreatedAt
		wg.Wait()
		for _, c := range []struct {
			what string
			err  error
		}{{"PutSummaryOf", sumErr}, {"SetFactsOf", factErr}} {
			if c.err != nil {
				wantErr(t, fmt.Sprintf("round %d: %s(%s, old CreatedAt)", round, c.what, key), c.err, chatmem.ErrNotFound)
			}
		}
		wantNoSummary(t, fmt.Sprintf("round %d: the new conversation", round), ss, key)
		wantFacts(t, fmt.Sprintf("round %d: the new conversation", round), fs, key)
		if t.Failed() {
			return
		}
		created = next
	}
}

package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// factTests lists the chatmem.FactStore subtests in the order testFacts
// runs them.
var factTests = []subtest{
	{"NotFound", testFactsNotFound},
	{"Invalid", testFactsInvalid},
	{"Current", testFactsCurrent},
	{"History", testFactHistory},
	{"DeleteFact", testDeleteFact},
	{"Content", testFactsContent},
	{"TenantIsolation", testFactsTenantIsolation},
	{"Endings", testFactsEndings},
}

// testFacts runs the chatmem.FactStore subtests if the harness's stores implement it.
var testFacts = optional[chatmem.FactStore](factTests)

// factTime is when the suite's facts were set, with microseconds.
var factTime = time.Date(2025, 2, 3, 4, 5, 6, 789012000, time.UTC)

// fact returns a fact set by the app with confidence 1 at factTime.
func fact(key, value string) chatmem.Fact {
	return chatmem.Fact{Key: key, Value: value, SetBy: "app", Confidence: 1, CreatedAt: factTime}
}

// diffFact describes the first difference between got and want, or returns
// "". Times compare with Equal (stores may change the location).
func diffFact(got, want chatmem.Fact) string {
	switch {
	case got.Key != want.Key:
		return fmt.Sprintf("Key = %q, want %q", got.Key, want.Key)
	case got.Value != want.Value:
		return fmt.Sprintf("Value = %q, want %q", got.Value, want.Value)
	case got.SourceSeq != want.SourceSeq:
		return fmt.Sprintf("SourceSeq = %d, want %d", got.SourceSeq, want.SourceSeq)
	case got.SetBy != want.SetBy:
		return fmt.Sprintf("SetBy = %q, want %q", got.SetBy, want.SetBy)
	case got.Confidence != want.Confidence:
		return fmt.Sprintf("Confidence = %v, want %v", got.Confidence, want.Confidence)
	case !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Sprintf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	return ""
}

// factKeys returns "key=value" for each fact, for failure messages.
func factKeys(facts []chatmem.Fact) []string {
	out := make([]string, len(facts))
	for i, f := range facts {
		out[i] = f.Key + "=" + f.Value
	}
	return out
}

// wantFactList fails the test unless got equals want fact by fact.
func wantFactList(t *testing.T, what string, got, want []chatmem.Fact) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %q, want %q", what, factKeys(got), factKeys(want))
		return
	}
	for i := range got {
		if d := diffFact(got[i], want[i]); d != "" {
			t.Errorf("%s fact %d (%s): %s", what, i, want[i].Key, d)
		}
	}
}

// wantFacts fails the test unless key's current facts are want.
func wantFacts(t *testing.T, what string, fs chatmem.FactStore, key chatmem.Key, want ...chatmem.Fact) {
	t.Helper()
	got, err := fs.Facts(t.Context(), key)
	if err != nil {
		t.Errorf("%s: Facts(%s) error = %v, want nil", what, key, err)
		return
	}
	wantFactList(t, fmt.Sprintf("%s: Facts(%s)", what, key), got, want)
}

// wantHistory fails the test unless the history of key's fact name is want.
func wantHistory(t *testing.T, what string, fs chatmem.FactStore, key chatmem.Key, name string, want ...chatmem.Fact) {
	t.Helper()
	got, err := fs.FactHistory(t.Context(), key, name)
	if err != nil {
		t.Errorf("%s: FactHistory(%s, %s) error = %v, want nil", what, key, name, err)
		return
	}
	wantFactList(t, fmt.Sprintf("%s: FactHistory(%s, %s)", what, key, name), got, want)
}

// wantNoHistory fails the test unless FactHistory(key, name) wraps
// ErrNotFound.
func wantNoHistory(t *testing.T, what string, fs chatmem.FactStore, key chatmem.Key, name string) {
	t.Helper()
	got, err := fs.FactHistory(t.Context(), key, name)
	if !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("%s: FactHistory(%s, %s) = %q, %v; want ErrNotFound", what, key, name, factKeys(got), err)
	}
}

// mustSetFacts records facts and fails the test on an error.
func mustSetFacts(t *testing.T, fs chatmem.FactStore, key chatmem.Key, facts ...chatmem.Fact) {
	t.Helper()
	if err := fs.SetFacts(t.Context(), key, facts); err != nil {
		t.Fatalf("SetFacts(%s, %q) error = %v, want nil", key, factKeys(facts), err)
	}
}

// testFactsNotFound checks the errors for a conversation that does not
// exist (every method wraps ErrNotFound, and SetFacts creates nothing) and
// for one without facts (no facts and no error from Facts, ErrNotFound for
// a fact's history and its deletion), that an empty SetFacts writes
// nothing, and that malformed keys and fact names wrap ErrInvalid.
func testFactsNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	fs := as[chatmem.FactStore](t, s)
	ctx := t.Context()
	known := randomKey("known")
	fill(t, ctx, s, known, 2)

	for _, key := range []chatmem.Key{randomKey("nobody"), {Tenant: known.Tenant, ID: "other"}} {
		_, err := fs.Facts(ctx, key)
		wantErr(t, fmt.Sprintf("Facts(%s)", key), err, chatmem.ErrNotFound)
		_, err = fs.FactHistory(ctx, key, "name")
		wantErr(t, fmt.Sprintf("FactHistory(%s, name)", key), err, chatmem.ErrNotFound)
		err = fs.SetFacts(ctx, key, []chatmem.Fact{fact("name", "Ada")})
		wantErr(t, fmt.Sprintf("SetFacts(%s)", key), err, chatmem.ErrNotFound)
		err = fs.SetFacts(ctx, key, nil)
		wantErr(t, fmt.Sprintf("SetFacts(%s, no facts)", key), err, chatmem.ErrNotFound)
		err = fs.DeleteFact(ctx, key, "name")
		wantErr(t, fmt.Sprintf("DeleteFact(%s, name)", key), err, chatmem.ErrNotFound)
		wantNotFound(t, s, key)
	}

	got, err := fs.Facts(ctx, known)
	if err != nil || len(got) != 0 {
		t.Errorf("Facts(conversation without facts) = %q, %v; want none, nil", factKeys(got), err)
	}
	wantNoHistory(t, "conversation without facts", fs, known, "name")
	wantErr(t, "DeleteFact(conversation without facts)", fs.DeleteFact(ctx, known, "name"), chatmem.ErrNotFound)
	for _, empty := range [][]chatmem.Fact{nil, {}} {
		if err := fs.SetFacts(ctx, known, empty); err != nil {
			t.Errorf("SetFacts(%#v) error = %v, want nil", empty, err)
		}
	}
	wantFacts(t, "after empty SetFacts", fs, known)

	for _, bad := range badIDs {
		for _, key := range []chatmem.Key{{Tenant: bad, ID: "ok"}, {Tenant: known.Tenant, ID: bad}} {
			name := fmt.Sprintf("%.40q/%.40q", key.Tenant, key.ID)
			_, err := fs.Facts(ctx, key)
			wantErr(t, "Facts("+name+")", err, chatmem.ErrInvalid)
			_, err = fs.FactHistory(ctx, key, "name")
			wantErr(t, "FactHistory("+name+")", err, chatmem.ErrInvalid)
			err = fs.SetFacts(ctx, key, []chatmem.Fact{fact("name", "Ada")})
			wantErr(t, "SetFacts("+name+")", err, chatmem.ErrInvalid)
			wantErr(t, "DeleteFact("+name+")", fs.DeleteFact(ctx, key, "name"), chatmem.ErrInvalid)
		}
	}
	for _, name := range []string{"", "Name", "1st", "a b", "a/b", strings.Repeat("k", 65)} {
		_, err := fs.FactHistory(ctx, known, name)
		wantErr(t, fmt.Sprintf("FactHistory(%q)", name), err, chatmem.ErrInvalid)
		wantErr(t, fmt.Sprintf("DeleteFact(%q)", name), fs.DeleteFact(ctx, known, name), chatmem.ErrInvalid)
	}
}

// testFactsInvalid checks that SetFacts refuses, with ErrInvalid, every
// fact that fails Fact.Validate, and writes nothing of its batch: neither
// the facts before the bad one nor a new value of a key it already has.
func testFactsInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	fs := as[chatmem.FactStore](t, s)
	ctx := t.Context()
	key := randomKey("invalid")
	fill(t, ctx, s, key, 2)
	name, city := fact("name", "Ada"), fact("city", "Paris")
	mustSetFacts(t, fs, key, name, city)

	with := func(f func(*chatmem.Fact)) chatmem.Fact {
		x := fact("order_id", "A-17")
		f(&x)
		return x
	}
	bad := []struct {
		name string
		f    chatmem.Fact
	}{
		{"empty key", with(func(f *chatmem.Fact) { f.Key = "" })},
		{"upper-case key", with(func(f *chatmem.Fact) { f.Key = "Name" })},
		{"key starting with a digit", with(func(f *chatmem.Fact) { f.Key = "1st" })},
		{"key with a space", with(func(f *chatmem.Fact) { f.Key = "order id" })},
		{"key of 65 characters", with(func(f *chatmem.Fact) { f.Key = strings.Repeat("k", 65) })},
		{"empty value", with(func(f *chatmem.Fact) { f.Value = "" })},
		{"value over MaxFactValueLen", with(func(f *chatmem.Fact) { f.Value = strings.Repeat("x", chatmem.MaxFactValueLen+1) })},
		{"NUL in value", with(func(f *chatmem.Fact) { f.Value = "A\x0017" })},
		{"invalid UTF-8 value", with(func(f *chatmem.Fact) { f.Value = "A-\xff" })},
		{"no set_by", with(func(f *chatmem.Fact) { f.SetBy = "" })},
		{"confidence 2", with(func(f *chatmem.Fact) { f.Confidence = 2 })},
		{"negative confidence", with(func(f *chatmem.Fact) { f.Confidence = -0.1 })},
		{"negative source_seq", with(func(f *chatmem.Fact) { f.SourceSeq = -1 })},
	}
	update := fact("name", "Grace")
	added := fact("email", "ada@example.com")
	for _, c := range bad {
		if c.f.Validate() == nil {
			t.Fatalf("%s: Fact.Validate accepts %+v; the case is not invalid", c.name, c.f)
		}
		for _, batch := range [][]chatmem.Fact{{c.f}, {update, c.f}, {added, c.f, update}} {
			err := fs.SetFacts(ctx, key, batch)
			wantErr(t, fmt.Sprintf("SetFacts(%s at %d of %d)", c.name, indexOf(batch, c.f), len(batch)), err, chatmem.ErrInvalid)
		}
	}
	wantFacts(t, "after refused batches", fs, key, city, name)
	wantHistory(t, "after refused batches", fs, key, "name", name)
	wantNoHistory(t, "after refused batches", fs, key, "email")
	wantNoHistory(t, "after refused batches", fs, key, "order_id")
}

// indexOf returns the position of f in facts, counting from 1.
func indexOf(facts []chatmem.Fact, f chatmem.Fact) int {
	for i, g := range facts {
		if g == f {
			return i + 1
		}
	}
	return 0
}

// testFactsCurrent checks that Facts returns the current value of every
// key in byte order of key, that within one batch the last fact for a key
// becomes current (its place in the batch decides, not its CreatedAt), that
// a later batch replaces earlier values, and that facts change none of the
// conversation's metadata.
func testFactsCurrent(t *testing.T, h Harness) {
	s := h.New(t)
	fs := as[chatmem.FactStore](t, s)
	key := randomKey("current")
	fill(t, t.Context(), s, key, 4)
	conv := mustConversation(t, s, key)

	orderOld := fact("order_id", "SE-1")
	orderNew := fact("order_id", "SE-10423")
	orderNew.CreatedAt = factTime.Add(-time.Hour) // older, but later in the batch
	name := fact("name", "Kavya")
	// Byte order: '-' < '.' < digits < '_' < letters, which a locale's
	// collation would not keep.
	ab, aDash, aDot, a0, aUnder := fact("ab", "5"), fact("a-b", "1"), fact("a.b", "2"), fact("a0", "3"), fact("a_b", "4")
	mustSetFacts(t, fs, key, orderOld, name, ab, aUnder, a0, aDot, aDash, orderNew)
	wantFacts(t, "after batch 1", fs, key, aDash, aDot, a0, aUnder, ab, name, orderNew)
	wantHistory(t, "after batch 1", fs, key, "order_id", orderOld, orderNew)

	name2 := fact("name", "Kavya R.")
	city := fact("city", "Pune")
	mustSetFacts(t, fs, key, name2, city)
	wantFacts(t, "after batch 2", fs, key, aDash, aDot, a0, aUnder, ab, city, name2, orderNew)

	order3 := fact("order_id", "SE-2")
	order3.SetBy, order3.Confidence, order3.SourceSeq = "rules", 0.5, 3
	mustSetFacts(t, fs, key, order3)
	wantFacts(t, "after batch 3", fs, key, aDash, aDot, a0, aUnder, ab, city, name2, order3)
	wantConversation(t, "Conversation after SetFacts", mustConversation(t, s, key), conv)
}

// testFactHistory checks that FactHistory returns every value a fact has
// had, oldest (first recorded) first, each with its provenance: SourceSeq,
// SetBy, Confidence (0 included) and CreatedAt to the microsecond, a zero
// CreatedAt meaning the store's clock; also through a second store over
// the same data.
func testFactHistory(t *testing.T, h Harness) {
	s := h.New(t)
	fs := as[chatmem.FactStore](t, s)
	key := randomKey("history")
	fill(t, t.Context(), s, key, 5)

	v1 := chatmem.Fact{Key: "name", Value: "Kavya", SourceSeq: 1, SetBy: "rules", Confidence: 0.6,
		CreatedAt: time.Date(2025, 1, 1, 9, 0, 0, 1000, time.UTC)}
	v2 := chatmem.Fact{Key: "name", Value: "Kavya Rao", SourceSeq: 3, SetBy: "openai:gpt-4o-mini", Confidence: 0.85,
		CreatedAt: time.Date(2025, 1, 1, 9, 5, 0, 999999000, time.FixedZone("UTC+5:30", 19800))}
	order := chatmem.Fact{Key: "order_id", Value: "SE-10423", SourceSeq: 3, SetBy: "rules", Confidence: 0,
		CreatedAt: time.Date(2025, 1, 1, 9, 5, 0, 0, time.UTC)}
	v3 := chatmem.Fact{Key: "name", Value: "Kavya R.", SetBy: "app", Confidence: 1}
	mustSetFacts(t, fs, key, v1)
	before := time.Now()
	mustSetFacts(t, fs, key, v2, order, v3)
	after := time.Now()

	got, err := fs.FactHistory(t.Context(), key, "name")
	if err != nil || len(got) != 3 {
		t.Fatalf("FactHistory(name) = %q, %v; want 3 values, nil", factKeys(got), err)
	}
	if c := got[2].CreatedAt; c.Before(before.Add(-time.Second)) || c.After(after.Add(time.Second)) {
		t.Errorf("CreatedAt of a fact set with zero CreatedAt = %v, want between %v and %v", c, before, after)
	}
	v3.CreatedAt = got[2].CreatedAt
	wantFactList(t, "FactHistory(name)", got, []chatmem.Fact{v1, v2, v3})
	wantHistory(t, "history of a fact set once", fs, key, "order_id", order)
	wantFacts(t, "current facts", fs, key, v3, order)

	s2 := as[chatmem.FactStore](t, h.reopen(t, s))
	wantHistory(t, "second store", s2, key, "name", v1, v2, v3)
	wantFacts(t, "second store", s2, key, v3, order)
}

// testDeleteFact checks that DeleteFact removes a fact's current value and
// its history and leaves the other facts alone, that a second DeleteFact
// wraps ErrNotFound, and that the key set again starts a new history.
func testDeleteFact(t *testing.T, h Harness) {
	s := h.New(t)
	fs := as[chatmem.FactStore](t, s)
	ctx := t.Context()
	key := randomKey("delete-fact")
	fill(t, ctx, s, key, 2)
	n1, n2, city := fact("name", "Ada"), fact("name", "Ada L."), fact("city", "London")
	mustSetFacts(t, fs, key, n1, city)
	mustSetFacts(t, fs, key, n2)

	if err := fs.DeleteFact(ctx, key, "name"); err != nil {
		t.Fatalf("DeleteFact(name) error = %v, want nil", err)
	}
	wantFacts(t, "after DeleteFact(name)", fs, key, city)
	wantNoHistory(t, "after DeleteFact(name)", fs, key, "name")
	wantHistory(t, "after DeleteFact(name)", fs, key, "city", city)
	wantErr(t, "second DeleteFact(name)", fs.DeleteFact(ctx, key, "name"), chatmem.ErrNotFound)
	wantErr(t, "DeleteFact(never set)", fs.DeleteFact(ctx, key, "email"), chatmem.ErrNotFound)

	n3 := fact("name", "Ada Lovelace")
	mustSetFacts(t, fs, key, n3)
	wantHistory(t, "name set again after DeleteFact", fs, key, "name", n3)
	wantFacts(t, "name set again after DeleteFact", fs, key, city, n3)

	if err := fs.DeleteFact(ctx, key, "city"); err != nil {
		t.Fatalf("DeleteFact(city) error = %v, want nil", err)
	}
	if err := fs.DeleteFact(ctx, key, "name"); err != nil {
		t.Fatalf("DeleteFact(name) error = %v, want nil", err)
	}
	got, err := fs.Facts(ctx, key)
	if err != nil || len(got) != 0 {
		t.Errorf("Facts after deleting every fact = %q, %v; want none, nil", factKeys(got), err)
	}
	mustConversation(t, s, key)
}

// testFactsContent checks that values beyond ASCII (emoji, CJK, combining
// marks, right-to-left text, separators, quotes) and a value of exactly
// MaxFactValueLen bytes are stored exactly, and so is SetBy.
func testFactsContent(t *testing.T, h Harness) {
	s := h.New(t)
	fs := as[chatmem.FactStore](t, s)
	key := randomKey("unicode")
	fill(t, t.Context(), s, key, 1)
	longest := strings.Repeat("日", chatmem.MaxFactValueLen/3) + strings.Repeat("x", chatmem.MaxFactValueLen%3)
	if len(longest) != chatmem.MaxFactValueLen {
		t.Fatalf("test value is %d bytes, want %d", len(longest), chatmem.MaxFactValueLen)
	}
	facts := []chatmem.Fact{
		fact("combining", "cafe\u0301 vs café, Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇"),
		fact("emoji", "👋🏽 👨‍👩‍👧 🇯🇵"),
		fact("longest", longest),
		fact("name", "Zoë 陈"),
		fact("quotes", `'; DROP TABLE facts; -- "\u0000" \\ %s {x} * $1`),
		fact("rtl", "مرحبا بالعالم שלום"),
		fact("separators", "line\u2028para\u2029tab\tcr\r\nbom\ufeffend"),
		fact("shipping.city", "東京"),
	}
	facts[1].SetBy = "extractor:ü"
	mustSetFacts(t, fs, key, facts...)
	wantFacts(t, "Unicode values", fs, key, facts...)
	for _, f := range facts {
		wantHistory(t, "Unicode values", fs, key, f.Key, f)
	}
}

// testFactsTenantIsolation checks that facts belong to one conversation of
// one tenant: the same ID in another tenant, and keys that would collide if
// a store joined tenant and ID naively, have their own, and neither
// DeleteFact nor Delete of one reaches another's.
func testFactsTenantIsolation(t *testing.T, h Harness) {
	s := h.New(t)
	fs := as[chatmem.FactStore](t, s)
	ctx := t.Context()
	a, b := randomTenant(), randomTenant()
	aShared := chatmem.Key{Tenant: a, ID: "shared"}
	bShared := chatmem.Key{Tenant: b, ID: "shared"}
	aOnly := chatmem.Key{Tenant: a, ID: "p:q"}
	aColon := chatmem.Key{Tenant: a + ":p", ID: "q"} // joined with ":", the same string as aOnly
	for _, key := range []chatmem.Key{aShared, bShared, aOnly, aColon} {
		fill(t, ctx, s, key, 1)
	}

	na, nb, nOnly := fact("name", "Ada"), fact("name", "Bob"), fact("name", "Only")
	ca := fact("city", "Paris")
	mustSetFacts(t, fs, aShared, na, ca)
	mustSetFacts(t, fs, aOnly, nOnly)
	wantFacts(t, "same ID in another tenant", fs, bShared)
	wantFacts(t, "colliding key", fs, aColon)
	wantNoHistory(t, "same ID in another tenant", fs, bShared, "name")
	wantErr(t, "DeleteFact in another tenant", fs.DeleteFact(ctx, bShared, "name"), chatmem.ErrNotFound)
	wantErr(t, "SetFacts to an ID only another tenant has",
		fs.SetFacts(ctx, chatmem.Key{Tenant: b, ID: aOnly.ID}, []chatmem.Fact{nb}), chatmem.ErrNotFound)

	mustSetFacts(t, fs, bShared, nb)
	wantFacts(t, "tenant a", fs, aShared, ca, na)
	wantHistory(t, "tenant a", fs, aShared, "name", na)
	wantFacts(t, "tenant b", fs, bShared, nb)
	if err := fs.DeleteFact(ctx, bShared, "name"); err != nil {
		t.Fatalf("DeleteFact(%s, name) error = %v, want nil", bShared, err)
	}
	wantFacts(t, "tenant a after tenant b's DeleteFact", fs, aShared, ca, na)
	mustSetFacts(t, fs, bShared, nb)

	if err := s.Delete(ctx, aShared); err != nil {
		t.Fatalf("Delete(%s) error = %v, want nil", aShared, err)
	}
	wantFacts(t, "tenant b after deleting tenant a's conversation", fs, bShared, nb)
	if err := s.Delete(ctx, aColon); err != nil {
		t.Fatalf("Delete(%s) error = %v, want nil", aColon, err)
	}
	wantFacts(t, "after deleting the colliding key", fs, aOnly, nOnly)
}

// testFactsEndings checks that facts end with their conversation, by
// Delete, expiry, Sweep or PurgeInactive: the ended conversation's facts
// are not found and it takes none, and when its ID comes back the new
// conversation starts without facts or history.
func testFactsEndings(t *testing.T, h Harness) {
	s := h.New(t)
	fs := as[chatmem.FactStore](t, s)
	ctx := t.Context()
	endings(t, s,
		func(key chatmem.Key) {
			mustSetFacts(t, fs, key, fact("name", "old"), fact("name", "older"), fact("city", "old"))
		},
		func(how string, key chatmem.Key) {
			_, err := fs.Facts(ctx, key)
			wantErr(t, fmt.Sprintf("Facts(%s) after %s", key, how), err, chatmem.ErrNotFound)
			_, err = fs.FactHistory(ctx, key, "name")
			wantErr(t, fmt.Sprintf("FactHistory(%s, name) after %s", key, how), err, chatmem.ErrNotFound)
			err = fs.SetFacts(ctx, key, []chatmem.Fact{fact("email", "late@example.com")})
			wantErr(t, fmt.Sprintf("SetFacts(%s) after %s", key, how), err, chatmem.ErrNotFound)
			err = fs.DeleteFact(ctx, key, "name")
			wantErr(t, fmt.Sprintf("DeleteFact(%s, name) after %s", key, how), err, chatmem.ErrNotFound)
		},
		func(how string, key chatmem.Key) {
			wantFacts(t, "after "+how+" and a new append", fs, key)
			for _, name := range []string{"name", "city", "email"} {
				wantNoHistory(t, "after "+how+" and a new append", fs, key, name)
			}
			n := fact("name", "new")
			mustSetFacts(t, fs, key, n)
			wantHistory(t, "after "+how+" and a new append", fs, key, "name", n)
		})
}

package storetest

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// usageTests are the subtests of chatmem.UsageStore, the cost ledger.
var usageTests = []subtest{
	{"Group", testUsageGroup},
	{"Sums", testUsageSums},
	{"Invalid", testUsageInvalid},
	{"Concurrent", testUsageConcurrent},
	{"Anonymize", testUsageAnonymize},
}

// usageHour is the hour the usage subtests count in.
var usageHour = time.Date(2026, 3, 14, 15, 0, 0, 0, time.UTC)

// usageRec returns a record of hour usageHour+h.
func usageRec(tenant, user, conv, model, kind string, h int, calls, in, cached, out, reasoning, emb int64) chatmem.UsageRecord {
	return chatmem.UsageRecord{Hour: usageHour.Add(time.Duration(h) * time.Hour), Usage: chatmem.Usage{
		Tenant: tenant, User: user, Conversation: conv, Model: model, Kind: kind, Calls: calls,
		Tokens: chatmem.Tokens{Input: in, CachedInput: cached, Output: out, Reasoning: reasoning, EmbeddingInput: emb},
	}}
}

// wantUsage fails the test unless the store's answer to q is what
// chatmem.GroupUsage makes of recs.
func wantUsage(t *testing.T, us chatmem.UsageStore, q chatmem.UsageQuery, recs []chatmem.UsageRecord) {
	t.Helper()
	got, err := us.Usage(context.WithoutCancel(t.Context()), q)
	if err != nil {
		t.Fatalf("Usage(%+v): %v", q, err)
	}
	want := chatmem.GroupUsage(recs, q)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Usage(group_by=%s, tenant=%q, %s..%s) =\n%+v\nwant\n%+v", q.GroupBy, q.Tenant, q.From.Format(time.RFC3339), q.To.Format(time.RFC3339), got, want)
	}
}

func testUsageGroup(t *testing.T, h Harness) {
	ctx := context.WithoutCancel(t.Context())
	s := h.New(t)
	us := as[chatmem.UsageStore](t, s)
	a, b := randomTenant(), randomTenant()
	recs := []chatmem.UsageRecord{
		usageRec(a, "u-1", "c1", "gpt-4o", chatmem.CallChat, 0, 1, 1000, 600, 50, 0, 0),
		usageRec(a, "u-1", "c1", "gpt-4o", chatmem.CallChat, 0, 2, 2000, 0, 70, 20, 0),
		usageRec(a, "u-1", "c1", "mini", chatmem.CallSummarize, 0, 1, 300, 0, 40, 0, 0),
		usageRec(a, "u-2", "c2", "mini", chatmem.CallExtract, 1, 1, 200, 0, 10, 0, 0),
		usageRec(a, "", "", "emb", chatmem.CallEmbed, 1, 3, 0, 0, 0, 0, 900),
		usageRec(a, "u-2", "c3", "gpt-4o", chatmem.CallResponses, 26, 1, 10, 0, 5, 0, 0), // the next day
		usageRec(b, "u-1", "c1", "gpt-4o", chatmem.CallChat, 0, 1, 7, 0, 3, 0, 0),
	}
	if err := us.AddUsage(ctx, recs); err != nil {
		t.Fatalf("AddUsage: %v", err)
	}
	for _, g := range chatmem.UsageGroups {
		for _, tenant := range []string{a, b} {
			wantUsage(t, us, chatmem.UsageQuery{Tenant: tenant, From: usageHour, To: usageHour.Add(48 * time.Hour), GroupBy: g}, recs)
			// From is in the range, To is not.
			wantUsage(t, us, chatmem.UsageQuery{Tenant: tenant, From: usageHour.Add(time.Hour), To: usageHour.Add(26 * time.Hour), GroupBy: g}, recs)
		}
	}
	// Every tenant: this store's are a and b alone (a fresh store).
	wantUsage(t, us, chatmem.UsageQuery{From: usageHour.Add(-72 * time.Hour), To: usageHour.Add(72 * time.Hour), GroupBy: chatmem.GroupByTenant}, recs)
	// Another process sees them.
	wantUsage(t, as[chatmem.UsageStore](t, h.reopen(t, s)), chatmem.UsageQuery{Tenant: a, From: usageHour, To: usageHour.Add(time.Hour), GroupBy: chatmem.GroupByModel}, recs)
	// A range with nothing is empty, not an error.
	got, err := us.Usage(ctx, chatmem.UsageQuery{Tenant: a, From: usageHour.Add(-5 * time.Hour), To: usageHour, GroupBy: chatmem.GroupByUser})
	if err != nil || len(got) != 0 {
		t.Errorf("Usage before any usage = %v, %v; want none", got, err)
	}
}

// testUsageSums adds to one bucket in one batch and across batches.
func testUsageSums(t *testing.T, h Harness) {
	ctx := context.WithoutCancel(t.Context())
	us := as[chatmem.UsageStore](t, h.New(t))
	a := randomTenant()
	r := usageRec(a, "u-1", "c1", "gpt-4o", chatmem.CallChat, 0, 1, 100, 10, 20, 5, 0)
	var all []chatmem.UsageRecord
	for i := range 3 {
		batch := []chatmem.UsageRecord{r, r}
		if err := us.AddUsage(ctx, batch); err != nil {
			t.Fatalf("AddUsage %d: %v", i, err)
		}
		all = append(all, batch...)
	}
	if err := us.AddUsage(ctx, nil); err != nil {
		t.Errorf("AddUsage(nil) = %v, want nil", err)
	}
	q := chatmem.UsageQuery{Tenant: a, From: usageHour, To: usageHour.Add(time.Hour), GroupBy: chatmem.GroupByConversation}
	wantUsage(t, us, q, all)
	got, _ := us.Usage(ctx, q)
	if len(got) != 1 || got[0].Calls != 6 || got[0].Input != 600 || got[0].CachedInput != 60 || got[0].Reasoning != 30 {
		t.Errorf("six adds of one bucket = %+v, want 6 calls, 600 input, 60 cached, 30 reasoning", got)
	}
}

func testUsageInvalid(t *testing.T, h Harness) {
	ctx := context.WithoutCancel(t.Context())
	us := as[chatmem.UsageStore](t, h.New(t))
	a := randomTenant()
	good := usageRec(a, "u-1", "c1", "gpt-4o", chatmem.CallChat, 0, 1, 100, 0, 20, 0, 0)
	bad := map[string]chatmem.UsageRecord{
		"tenant":        usageRec("", "u-1", "c1", "m", chatmem.CallChat, 0, 1, 1, 0, 1, 0, 0),
		"user":          usageRec(a, "u/1", "c1", "m", chatmem.CallChat, 0, 1, 1, 0, 1, 0, 0),
		"conversation":  usageRec(a, "u-1", "c 1", "m", chatmem.CallChat, 0, 1, 1, 0, 1, 0, 0),
		"model":         usageRec(a, "u-1", "c1", "a|b", chatmem.CallChat, 0, 1, 1, 0, 1, 0, 0),
		"empty model":   usageRec(a, "u-1", "c1", "", chatmem.CallChat, 0, 1, 1, 0, 1, 0, 0),
		"kind":          usageRec(a, "u-1", "c1", "m", "dream", 0, 1, 1, 0, 1, 0, 0),
		"negative":      usageRec(a, "u-1", "c1", "m", chatmem.CallChat, 0, 1, -1, 0, 1, 0, 0),
		"cached > in":   usageRec(a, "u-1", "c1", "m", chatmem.CallChat, 0, 1, 1, 2, 1, 0, 0),
		"reason > out":  usageRec(a, "u-1", "c1", "m", chatmem.CallChat, 0, 1, 1, 0, 1, 2, 0),
		"off the hour":  {Hour: usageHour.Add(time.Minute), Usage: good.Usage},
		"no hour":       {Usage: good.Usage},
		"negative call": usageRec(a, "u-1", "c1", "m", chatmem.CallChat, 0, -1, 1, 0, 1, 0, 0),
	}
	for name, r := range bad {
		if err := us.AddUsage(ctx, []chatmem.UsageRecord{good, r}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("AddUsage with a bad %s = %v, want ErrInvalid", name, err)
		}
	}
	q := chatmem.UsageQuery{Tenant: a, From: usageHour, To: usageHour.Add(time.Hour), GroupBy: chatmem.GroupByTenant}
	wantUsage(t, us, q, nil) // nothing added, the good record neither
	for name, q := range map[string]chatmem.UsageQuery{
		"group":        {Tenant: a, From: usageHour, To: usageHour.Add(time.Hour), GroupBy: "kind"},
		"empty range":  {Tenant: a, From: usageHour, To: usageHour, GroupBy: chatmem.GroupByUser},
		"off the hour": {Tenant: a, From: usageHour.Add(time.Second), To: usageHour.Add(time.Hour), GroupBy: chatmem.GroupByUser},
		"tenant":       {Tenant: "a/b", From: usageHour, To: usageHour.Add(time.Hour), GroupBy: chatmem.GroupByUser},
	} {
		if _, err := us.Usage(ctx, q); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Usage with a bad %s = %v, want ErrInvalid", name, err)
		}
	}
	if err := us.AnonymizeUsage(ctx, chatmem.Key{Tenant: a, ID: ""}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("AnonymizeUsage of an empty user = %v, want ErrInvalid", err)
	}
}

// testUsageConcurrent adds to one bucket from many goroutines (and a
// second process where the store has one): every add counts.
func testUsageConcurrent(t *testing.T, h Harness) {
	ctx := context.WithoutCancel(t.Context())
	s := h.New(t)
	stores := []chatmem.UsageStore{as[chatmem.UsageStore](t, s), as[chatmem.UsageStore](t, h.reopen(t, s))}
	a := randomTenant()
	r := usageRec(a, "u-1", "c1", "gpt-4o", chatmem.CallChat, 0, 1, 10, 0, 1, 0, 0)
	const writers, adds = 8, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for range adds {
				if err := stores[w%2].AddUsage(ctx, []chatmem.UsageRecord{r}); err != nil {
					t.Errorf("AddUsage: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, err := stores[0].Usage(ctx, chatmem.UsageQuery{Tenant: a, From: usageHour, To: usageHour.Add(time.Hour), GroupBy: chatmem.GroupByTenant})
	if err != nil || len(got) != 1 || got[0].Calls != writers*adds || got[0].Input != 10*writers*adds {
		t.Errorf("after %d concurrent adds Usage = %+v, %v; want %d calls", writers*adds, got, err, writers*adds)
	}
}

// testUsageAnonymize erases a user from the ledger: the tenant's sums
// stay, nothing names the user or their conversations.
func testUsageAnonymize(t *testing.T, h Harness) {
	ctx := context.WithoutCancel(t.Context())
	us := as[chatmem.UsageStore](t, h.New(t))
	a, b := randomTenant(), randomTenant()
	recs := []chatmem.UsageRecord{
		usageRec(a, "ana", "c1", "gpt-4o", chatmem.CallChat, 0, 1, 1000, 100, 50, 0, 0),
		usageRec(a, "ana", "c2", "gpt-4o", chatmem.CallChat, 0, 1, 500, 0, 25, 0, 0),
		usageRec(a, "ana", "c1", "mini", chatmem.CallSummarize, 30, 1, 300, 0, 40, 0, 0),
		usageRec(a, "", "", "gpt-4o", chatmem.CallChat, 0, 1, 1, 0, 1, 0, 0), // merges with ana's
		usageRec(a, "bob", "c3", "gpt-4o", chatmem.CallChat, 0, 1, 7, 0, 7, 0, 0),
		usageRec(b, "ana", "c1", "gpt-4o", chatmem.CallChat, 0, 1, 9, 0, 9, 0, 0), // another tenant's ana
	}
	if err := us.AddUsage(ctx, recs); err != nil {
		t.Fatalf("AddUsage: %v", err)
	}
	if err := us.AnonymizeUsage(ctx, chatmem.Key{Tenant: a, ID: "ana"}); err != nil {
		t.Fatalf("AnonymizeUsage: %v", err)
	}
	after := make([]chatmem.UsageRecord, len(recs))
	for i, r := range recs {
		if r.Tenant == a && r.User == "ana" {
			r.User, r.Conversation = "", ""
		}
		after[i] = r
	}
	from, to := usageHour.Add(-24*time.Hour), usageHour.Add(72*time.Hour)
	for _, g := range chatmem.UsageGroups {
		for _, tenant := range []string{a, b} {
			wantUsage(t, us, chatmem.UsageQuery{Tenant: tenant, From: from, To: to, GroupBy: g}, after)
		}
	}
	// Again: nothing left to move, and no error.
	if err := us.AnonymizeUsage(ctx, chatmem.Key{Tenant: a, ID: "ana"}); err != nil {
		t.Errorf("AnonymizeUsage again: %v", err)
	}
	if err := us.AnonymizeUsage(ctx, chatmem.Key{Tenant: a, ID: "nobody"}); err != nil {
		t.Errorf("AnonymizeUsage of a user with no usage: %v", err)
	}
	wantUsage(t, us, chatmem.UsageQuery{Tenant: a, From: from, To: to, GroupBy: chatmem.GroupByUser}, after)
}

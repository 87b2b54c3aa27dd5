package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// listIDs returns the IDs of every conversation of tenant, following pages
// of limit.
func listIDs(t *testing.T, s chatmem.Store, tenant string, limit int) []string {
	t.Helper()
	var ids []string
	req := chatmem.PageRequest{Limit: limit}
	for range 1000 {
		page, err := s.List(t.Context(), tenant, req)
		if err != nil {
			t.Fatalf("List(%s, %+v) error = %v, want nil", tenant, req, err)
		}
		for _, c := range page.Conversations {
			if c.Key.Tenant != tenant {
				t.Errorf("List(%s) returned a conversation of tenant %q", tenant, c.Key.Tenant)
			}
			ids = append(ids, c.Key.ID)
		}
		if page.Next == "" {
			return ids
		}
		req.After = page.Next
	}
	t.Fatalf("List(%s) did not end after 1000 pages", tenant)
	return nil
}

// testTenantIsolation checks that the same ID in two tenants names two
// conversations, and that no read, listing or delete of one tenant reaches
// the other's, including tenants and IDs that would collide if a store
// joined them naively ("a" + ":" + "b:c" and "a:b" + ":" + "c").
func testTenantIsolation(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	a := randomTenant()
	b := randomTenant()
	aShared := chatmem.Key{Tenant: a, ID: "shared"}
	bShared := chatmem.Key{Tenant: b, ID: "shared"}
	aOnly := chatmem.Key{Tenant: a, ID: "p:q"}
	aColon := chatmem.Key{Tenant: a + ":p", ID: "q"} // joined with ":", the same string as aOnly

	mustAppend(t, s, aShared, []chatmem.Message{msg(chatmem.RoleUser, "a1", 1), msg(chatmem.RoleAssistant, "a2", 1)}, chatmem.AppendOptions{})
	mustAppend(t, s, bShared, []chatmem.Message{msg(chatmem.RoleSystem, "b1", 1), msg(chatmem.RoleUser, "b2", 1), msg(chatmem.RoleAssistant, "b3", 1)}, chatmem.AppendOptions{})
	mustAppend(t, s, aOnly, []chatmem.Message{msg(chatmem.RoleUser, "a-only", 1)}, chatmem.AppendOptions{})
	mustAppend(t, s, aColon, []chatmem.Message{msg(chatmem.RoleUser, "a-colon 1", 1), msg(chatmem.RoleUser, "a-colon 2", 1)}, chatmem.AppendOptions{})

	contents := func(key chatmem.Key) string {
		var out []string
		for _, m := range mustRange(t, s, key, 0, 0) {
			out = append(out, m.Content)
		}
		return strings.Join(out, ",")
	}
	for key, want := range map[chatmem.Key]string{aShared: "a1,a2", bShared: "b1,b2,b3", aOnly: "a-only", aColon: "a-colon 1,a-colon 2"} {
		if got := contents(key); got != want {
			t.Errorf("Range(%s) contents = %s, want %s", key, got, want)
		}
	}
	if got := mustConversation(t, s, aShared).LastSeq; got != 2 {
		t.Errorf("Conversation(%s).LastSeq = %d, want 2", aShared, got)
	}
	if got := mustConversation(t, s, bShared).LastSeq; got != 3 {
		t.Errorf("Conversation(%s).LastSeq = %d, want 3", bShared, got)
	}
	if sys, err := s.System(ctx, aShared); err != nil || len(sys) != 0 {
		t.Errorf("System(%s) = seqs %v, %v; want none, nil (the system message is tenant %s's)", aShared, seqs(sys), err, b)
	}

	bOnly := chatmem.Key{Tenant: b, ID: aOnly.ID}
	wantNotFound(t, s, bOnly)
	wantErr(t, fmt.Sprintf("Delete(%s)", bOnly), s.Delete(ctx, bOnly), chatmem.ErrNotFound)

	if got, want := listIDs(t, s, a, 0), []string{"p:q", "shared"}; !slices.Equal(got, want) {
		t.Errorf("List(%s) = %q, want %q", a, got, want)
	}
	if got, want := listIDs(t, s, b, 0), []string{"shared"}; !slices.Equal(got, want) {
		t.Errorf("List(%s) = %q, want %q", b, got, want)
	}
	if got, want := listIDs(t, s, a+":p", 0), []string{"q"}; !slices.Equal(got, want) {
		t.Errorf("List(%s) = %q, want %q", a+":p", got, want)
	}

	if err := s.Delete(ctx, aShared); err != nil {
		t.Fatalf("Delete(%s) error = %v, want nil", aShared, err)
	}
	wantNotFound(t, s, aShared)
	if got := contents(bShared); got != "b1,b2,b3" {
		t.Errorf("Range(%s) after deleting %s = %s, want b1,b2,b3", bShared, aShared, got)
	}
	if err := s.Delete(ctx, aColon); err != nil {
		t.Fatalf("Delete(%s) error = %v, want nil", aColon, err)
	}
	if got := contents(aOnly); got != "a-only" {
		t.Errorf("Range(%s) after deleting %s = %s, want a-only", aOnly, aColon, got)
	}
}

// testDelete checks that Delete removes the messages and the idempotency
// keys, that the ID can be used again from seq 1, and that a second Delete
// wraps ErrNotFound.
func testDelete(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	key := randomKey("gone")
	keep := chatmem.Key{Tenant: key.Tenant, ID: "kept"}
	mustAppend(t, s, keep, []chatmem.Message{msg(chatmem.RoleUser, "stay", 1)}, chatmem.AppendOptions{})
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleSystem, "old system", 4), msg(chatmem.RoleUser, "old", 3)},
		chatmem.AppendOptions{IdempotencyKey: "req-1", Tokenizer: "old-tokenizer", TTL: time.Hour})
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleAssistant, "old reply", 5)}, chatmem.AppendOptions{IdempotencyKey: "req-2"})

	if err := s.Delete(ctx, key); err != nil {
		t.Fatalf("Delete error = %v, want nil", err)
	}
	wantNotFound(t, s, key)
	wantErr(t, "second Delete", s.Delete(ctx, key), chatmem.ErrNotFound)
	if got, want := listIDs(t, s, key.Tenant, 0), []string{"kept"}; !slices.Equal(got, want) {
		t.Errorf("List after Delete = %q, want %q", got, want)
	}

	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	res := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "new", 2)},
		chatmem.AppendOptions{IdempotencyKey: "req-1", Tokenizer: "new-tokenizer", Now: now})
	if res.Replayed {
		t.Errorf("Append(req-1) after Delete: Replayed = true, want false (keys are deleted with the conversation)")
	}
	wantSeqs(t, "Append after Delete", res.Messages, 1)
	wantConversation(t, "Conversation after Delete and Append", mustConversation(t, s, key), chatmem.Conversation{
		Key: key, Tokenizer: "new-tokenizer", LastSeq: 1, Tokens: 2, Turns: 1, CreatedAt: now, UpdatedAt: now})
	if got := mustRange(t, s, key, 0, 0); len(got) != 1 || got[0].Content != "new" {
		t.Errorf("Range after Delete and Append = %d messages, want only %q", len(got), "new")
	}
	if sys, err := s.System(ctx, key); err != nil || len(sys) != 0 {
		t.Errorf("System after Delete and Append = seqs %v, %v; want none, nil", seqs(sys), err)
	}
	res = mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "newer", 2)}, chatmem.AppendOptions{IdempotencyKey: "req-2"})
	if res.Replayed {
		t.Errorf("Append(req-2) after Delete: Replayed = true, want false")
	}
	wantSeqs(t, "second Append after Delete", res.Messages, 2)
}

// testTTL checks expiry: an expired conversation is not found (swept or
// not), each append with a TTL pushes the expiry forward, appending to an
// expired ID starts a fresh conversation, and a Sweeper deletes expired
// conversations and only those.
func testTTL(t *testing.T, h Harness) {
	// Long enough that the appends and reads before the wait finish
	// within it on a loaded machine (100 ms was not, under -race).
	const ttl = time.Second
	s := h.New(t)
	ctx := t.Context()
	tenant := randomTenant()
	swept := chatmem.Key{Tenant: tenant, ID: "swept"}
	reused := chatmem.Key{Tenant: tenant, ID: "reused"}
	forever := chatmem.Key{Tenant: tenant, ID: "forever"}
	one := func(text string) []chatmem.Message { return []chatmem.Message{msg(chatmem.RoleUser, text, 1)} }

	start := time.Now()
	mustAppend(t, s, swept, one("s"), chatmem.AppendOptions{TTL: ttl})
	res := mustAppend(t, s, reused, one("r1"), chatmem.AppendOptions{TTL: ttl, IdempotencyKey: "req-1"})
	first := res.Conversation.ExpiresAt
	if first.Before(start.Add(ttl-time.Millisecond)) || first.After(time.Now().Add(ttl+time.Second)) {
		t.Errorf("ExpiresAt after Append(TTL=%v) = %v, want about %v", ttl, first, start.Add(ttl))
	}
	time.Sleep(5 * time.Millisecond) // past the precision of a store that keeps milliseconds
	res = mustAppend(t, s, reused, one("r2"), chatmem.AppendOptions{TTL: ttl})
	if !res.Conversation.ExpiresAt.After(first) {
		t.Errorf("ExpiresAt after a second Append(TTL) = %v, want after %v", res.Conversation.ExpiresAt, first)
	}
	mustAppend(t, s, forever, one("f"), chatmem.AppendOptions{})
	if got := mustConversation(t, s, forever).ExpiresAt; !got.IsZero() {
		t.Errorf("ExpiresAt without a TTL = %v, want zero", got)
	}
	if c := mustConversation(t, s, swept); c.ExpiresAt.IsZero() {
		t.Errorf("Conversation(%s).ExpiresAt = zero right after Append(TTL), want set", swept)
	}

	time.Sleep(time.Until(res.Conversation.ExpiresAt) + 50*time.Millisecond)
	wantNotFound(t, s, swept)
	wantNotFound(t, s, reused)
	wantErr(t, "Delete(expired)", s.Delete(ctx, swept), chatmem.ErrNotFound)
	if got, want := listIDs(t, s, tenant, 0), []string{"forever"}; !slices.Equal(got, want) {
		t.Errorf("List after expiry = %q, want %q", got, want)
	}

	// An expired conversation is gone even before any sweep: its ID starts
	// afresh, without its messages or idempotency keys.
	res = mustAppend(t, s, reused, one("fresh"), chatmem.AppendOptions{IdempotencyKey: "req-1"})
	if res.Replayed {
		t.Errorf("Append(req-1) to an expired conversation: Replayed = true, want false")
	}
	wantSeqs(t, "Append to an expired conversation", res.Messages, 1)
	if c := mustConversation(t, s, reused); c.LastSeq != 1 || c.Tokens != 1 || !c.ExpiresAt.IsZero() {
		t.Errorf("Conversation after Append to an expired ID = LastSeq %d, Tokens %d, ExpiresAt %v; want 1, 1, zero", c.LastSeq, c.Tokens, c.ExpiresAt)
	}

	sw, ok := s.(chatmem.Sweeper)
	if !ok {
		t.Log("store is not a Sweeper: expiry is the backend's")
		return
	}
	n, err := sw.Sweep(ctx, time.Now())
	if err != nil || n < 1 {
		t.Errorf("Sweep = %d, %v; want >= 1, nil", n, err)
	}
	if n, err := sw.Sweep(ctx, time.Now()); err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want 0, nil", n, err)
	}
	wantNotFound(t, s, swept)
	if got := mustRange(t, s, reused, 0, 0); len(got) != 1 || got[0].Content != "fresh" {
		t.Errorf("Range(%s) after Sweep = %d messages, want only %q (the new conversation is not expired)", reused, len(got), "fresh")
	}
	mustConversation(t, s, forever)
	res = mustAppend(t, s, swept, one("after sweep"), chatmem.AppendOptions{})
	wantSeqs(t, "Append to a swept conversation", res.Messages, 1)
}

// testPurgeInactive checks that a Purger deletes the conversations not
// updated since a time, in one tenant or (empty tenant) in all.
func testPurgeInactive(t *testing.T, h Harness) {
	s := h.New(t)
	p, ok := s.(chatmem.Purger)
	if !ok {
		t.Skip("store is not a Purger")
	}
	ctx := t.Context()
	now := time.Now()
	old := now.Add(-48 * time.Hour)
	cutoff := now.Add(-24 * time.Hour)
	t1, t2 := randomTenant(), randomTenant()
	one := func(text string) []chatmem.Message { return []chatmem.Message{msg(chatmem.RoleUser, text, 1)} }

	mustAppend(t, s, chatmem.Key{Tenant: t1, ID: "old-1"}, one("x"), chatmem.AppendOptions{Now: old})
	mustAppend(t, s, chatmem.Key{Tenant: t1, ID: "old-2"}, one("x"), chatmem.AppendOptions{Now: old.Add(time.Hour)})
	mustAppend(t, s, chatmem.Key{Tenant: t1, ID: "revived"}, one("x"), chatmem.AppendOptions{Now: old})
	mustAppend(t, s, chatmem.Key{Tenant: t1, ID: "revived"}, one("y"), chatmem.AppendOptions{Now: now})
	mustAppend(t, s, chatmem.Key{Tenant: t1, ID: "new"}, one("x"), chatmem.AppendOptions{Now: now})
	mustAppend(t, s, chatmem.Key{Tenant: t2, ID: "old-1"}, one("x"), chatmem.AppendOptions{Now: old})
	mustAppend(t, s, chatmem.Key{Tenant: t2, ID: "new"}, one("x"), chatmem.AppendOptions{Now: now})

	n, err := p.PurgeInactive(ctx, t1, cutoff)
	if err != nil || n != 2 {
		t.Errorf("PurgeInactive(%s) = %d, %v; want 2, nil", t1, n, err)
	}
	if got, want := listIDs(t, s, t1, 0), []string{"new", "revived"}; !slices.Equal(got, want) {
		t.Errorf("List(%s) after purge = %q, want %q", t1, got, want)
	}
	if got, want := listIDs(t, s, t2, 0), []string{"new", "old-1"}; !slices.Equal(got, want) {
		t.Errorf("List(%s) after purging %s = %q, want %q", t2, t1, got, want)
	}
	wantNotFound(t, s, chatmem.Key{Tenant: t1, ID: "old-1"})
	res := mustAppend(t, s, chatmem.Key{Tenant: t1, ID: "old-1"}, one("again"), chatmem.AppendOptions{})
	wantSeqs(t, "Append to a purged conversation", res.Messages, 1)

	n, err = p.PurgeInactive(ctx, "", cutoff)
	if err != nil || n < 1 {
		t.Errorf("PurgeInactive(all tenants) = %d, %v; want >= 1, nil", n, err)
	}
	if got, want := listIDs(t, s, t2, 0), []string{"new"}; !slices.Equal(got, want) {
		t.Errorf("List(%s) after purging all tenants = %q, want %q", t2, got, want)
	}
	if got, want := listIDs(t, s, t1, 0), []string{"new", "old-1", "revived"}; !slices.Equal(got, want) {
		t.Errorf("List(%s) after purging all tenants = %q, want %q", t1, got, want)
	}
}

// testList checks pagination: pages in ID order (byte order, as Go compares
// strings), Next empty on the last page, the default and maximum limits,
// and an empty list for an unknown tenant.
func testList(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	tenant := randomTenant()
	// Byte order, not a locale's collation: digits, then upper case, then
	// lower case.
	ids := []string{"conv-b", "Conv-a", "conv-a.1", "9", "conv-a"}
	for i, id := range ids {
		mustAppend(t, s, chatmem.Key{Tenant: tenant, ID: id}, []chatmem.Message{msg(chatmem.RoleUser, "x", 1)},
			chatmem.AppendOptions{Now: time.Date(2025, 1, 1, 0, i, 0, 0, time.UTC)})
	}
	want := slices.Sorted(slices.Values(ids))

	var got []string
	req := chatmem.PageRequest{Limit: 2}
	for pages := 1; ; pages++ {
		page, err := s.List(ctx, tenant, req)
		if err != nil {
			t.Fatalf("List(%+v) error = %v, want nil", req, err)
		}
		if len(page.Conversations) > 2 {
			t.Errorf("List(%+v) = %d conversations, want at most 2", req, len(page.Conversations))
		}
		for _, c := range page.Conversations {
			got = append(got, c.Key.ID)
			if c.LastSeq != 1 || c.Key.Tenant != tenant {
				t.Errorf("List: conversation %s has Tenant %q, LastSeq %d; want %q, 1", c.Key.ID, c.Key.Tenant, c.LastSeq, tenant)
			}
		}
		if page.Next == "" {
			if pages != 3 {
				t.Errorf("List(Limit=2) over 5 conversations ended after %d pages, want 3", pages)
			}
			break
		}
		if pages == 10 {
			t.Fatalf("List(Limit=2) over 5 conversations has not ended after %d pages", pages)
		}
		req.After = page.Next
	}
	if !slices.Equal(got, want) {
		t.Errorf("List(Limit=2) pages = %q, want %q", got, want)
	}
	if got := listIDs(t, s, tenant, 0); !slices.Equal(got, want) {
		t.Errorf("List(Limit=0) = %q, want %q", got, want)
	}
	if got := listIDs(t, s, tenant, 1000); !slices.Equal(got, want) {
		t.Errorf("List(Limit=1000) = %q, want %q", got, want)
	}
	page, err := s.List(ctx, tenant, chatmem.PageRequest{After: "conv-a"})
	if err != nil {
		t.Fatalf("List(After=conv-a) error = %v", err)
	}
	if got := pageIDs(page); !slices.Equal(got, []string{"conv-a.1", "conv-b"}) || page.Next != "" {
		t.Errorf("List(After=conv-a) = %q, Next %q; want [conv-a.1 conv-b], \"\"", got, page.Next)
	}

	for _, limit := range []int{-1, 1001} {
		_, err := s.List(ctx, tenant, chatmem.PageRequest{Limit: limit})
		wantErr(t, fmt.Sprintf("List(Limit=%d)", limit), err, chatmem.ErrInvalid)
	}
	page, err = s.List(ctx, randomTenant(), chatmem.PageRequest{})
	if err != nil || len(page.Conversations) != 0 || page.Next != "" {
		t.Errorf("List(unknown tenant) = %d conversations, Next %q, %v; want 0, \"\", nil", len(page.Conversations), page.Next, err)
	}

	// Limit 0 means 50.
	many := randomTenant()
	for i := range 51 {
		mustAppend(t, s, chatmem.Key{Tenant: many, ID: fmt.Sprintf("c%03d", i)}, []chatmem.Message{msg(chatmem.RoleUser, "x", 1)}, chatmem.AppendOptions{})
	}
	page, err = s.List(ctx, many, chatmem.PageRequest{})
	if err != nil || len(page.Conversations) != 50 || page.Next == "" {
		t.Fatalf("List(Limit=0) over 51 conversations = %d, Next %q, %v; want 50, non-empty, nil", len(page.Conversations), page.Next, err)
	}
	page, err = s.List(ctx, many, chatmem.PageRequest{After: page.Next})
	if got := pageIDs(page); err != nil || !slices.Equal(got, []string{"c050"}) || page.Next != "" {
		t.Errorf("List(second page) = %q, Next %q, %v; want [c050], \"\", nil", got, page.Next, err)
	}
}

// pageIDs returns the conversation IDs of page.
func pageIDs(page chatmem.Page) []string {
	var ids []string
	for _, c := range page.Conversations {
		ids = append(ids, c.Key.ID)
	}
	return ids
}

// testPing checks that a reachable store answers Ping.
func testPing(t *testing.T, h Harness) {
	s := h.New(t)
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping error = %v, want nil", err)
	}
}

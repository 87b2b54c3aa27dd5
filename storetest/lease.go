package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// leaseTests lists the chatmem.Leaser subtests in the order testLeases
// runs them.
var leaseTests = []subtest{
	{"Exclusive", testLeaseExclusive},
	{"Wanted", testLeaseWanted},
	{"Expiry", testLeaseExpiry},
	{"Invalid", testLeaseInvalid},
	{"Race", testLeaseRace},
	{"Deleted", testLeaseDeleted},
}

// testLeases runs the chatmem.Leaser subtests if the harness's stores
// implement it.
var testLeases = optional[chatmem.Leaser](leaseTests)

// mustLease calls Lease and fails the test on an error.
func mustLease(t *testing.T, l chatmem.Leaser, key chatmem.Key, kind, holder string, ttl time.Duration) bool {
	t.Helper()
	ok, err := l.Lease(t.Context(), key, kind, holder, ttl)
	if err != nil {
		t.Fatalf("Lease(%s, %s, %s) error = %v, want nil", key, kind, holder, err)
	}
	return ok
}

// mustRelease calls Release and fails the test on an error.
func mustRelease(t *testing.T, l chatmem.Leaser, key chatmem.Key, kind, holder string) bool {
	t.Helper()
	wanted, err := l.Release(t.Context(), key, kind, holder)
	if err != nil {
		t.Fatalf("Release(%s, %s, %s) error = %v, want nil", key, kind, holder, err)
	}
	return wanted
}

// testLeaseExclusive: one holder at a time per conversation and kind, seen
// through a second store over the same data; the holder extends its own;
// other kinds, conversations and tenants are apart; a release frees it,
// and a release by another holder does not.
func testLeaseExclusive(t *testing.T, h Harness) {
	s := h.New(t)
	a, b := as[chatmem.Leaser](t, s), as[chatmem.Leaser](t, h.reopen(t, s))
	key := randomKey("c1")
	const ttl = time.Minute
	if !mustLease(t, a, key, "summary", "A", ttl) {
		t.Fatal("Lease(A) on a free lease = false, want true")
	}
	if mustLease(t, b, key, "summary", "B", ttl) {
		t.Fatal("Lease(B) while A holds it = true, want false")
	}
	if !mustLease(t, a, key, "summary", "A", ttl) {
		t.Error("Lease(A) again by its holder = false, want true (extended)")
	}
	for _, other := range []struct {
		what string
		key  chatmem.Key
		kind string
	}{
		{"another kind", key, "facts"},
		{"another conversation", chatmem.Key{Tenant: key.Tenant, ID: "c2"}, "summary"},
		{"another tenant", chatmem.Key{Tenant: randomTenant(), ID: key.ID}, "summary"},
	} {
		if !mustLease(t, b, other.key, other.kind, "B", ttl) {
			t.Errorf("Lease(B) on %s = false, want true: leases are per conversation and kind", other.what)
		}
	}
	if mustRelease(t, b, key, "summary", "B") {
		t.Error("Release by B, which does not hold it = wanted, want false")
	}
	if mustLease(t, b, key, "summary", "C", ttl) {
		t.Error("Lease(C) after B's release of A's lease = true, want false: only the holder releases")
	}
	mustRelease(t, a, key, "summary", "A")
	if !mustLease(t, b, key, "summary", "B", ttl) {
		t.Error("Lease(B) after A released = false, want true")
	}
}

// testLeaseWanted: Release reports a refused Lease since the grant, and
// only since the grant.
func testLeaseWanted(t *testing.T, h Harness) {
	s := h.New(t)
	l := as[chatmem.Leaser](t, s)
	key := randomKey("c1")
	mustLease(t, l, key, "facts", "A", time.Minute)
	if mustRelease(t, l, key, "facts", "A") {
		t.Error("Release with no one refused = wanted, want false")
	}
	mustLease(t, l, key, "facts", "A", time.Minute)
	mustLease(t, l, key, "facts", "B", time.Minute)
	mustLease(t, l, key, "facts", "A", time.Minute) // extending keeps it wanted
	if !mustRelease(t, l, key, "facts", "A") {
		t.Error("Release after B was refused = not wanted, want wanted")
	}
	if !mustLease(t, l, key, "facts", "B", time.Minute) {
		t.Fatal("Lease(B) after release = false, want true")
	}
	if mustRelease(t, l, key, "facts", "B") {
		t.Error("Release of a lease granted after the refusal = wanted, want false")
	}
}

// testLeaseExpiry: an expired lease goes to the next holder that asks,
// not wanted; its old holder's release then does nothing.
func testLeaseExpiry(t *testing.T, h Harness) {
	s := h.New(t)
	l := as[chatmem.Leaser](t, s)
	key := randomKey("c1")
	mustLease(t, l, key, "summary", "A", time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for !mustLease(t, l, key, "summary", "B", time.Minute) {
		if time.Now().After(deadline) {
			t.Fatal("a 1ms lease still held after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if mustRelease(t, l, key, "summary", "A") {
		t.Error("Release by the expired holder = wanted, want false")
	}
	if mustLease(t, l, key, "summary", "A", time.Minute) {
		t.Error("Lease(A) after its expired release = true, want false: B holds it")
	}
	if !mustRelease(t, l, key, "summary", "B") {
		t.Error("Release by B after A was refused = not wanted, want wanted")
	}
}

// testLeaseInvalid: bad keys, kinds, holders and ttls wrap ErrInvalid.
func testLeaseInvalid(t *testing.T, h Harness) {
	l := as[chatmem.Leaser](t, h.New(t))
	key := randomKey("c1")
	for _, tc := range []struct {
		what         string
		key          chatmem.Key
		kind, holder string
		ttl          time.Duration
	}{
		{"empty tenant", chatmem.Key{ID: "c1"}, "facts", "A", time.Minute},
		{"bad id", chatmem.Key{Tenant: key.Tenant, ID: "bad id"}, "facts", "A", time.Minute},
		{"empty kind", key, "", "A", time.Minute},
		{"bad kind", key, "Facts!", "A", time.Minute},
		{"empty holder", key, "facts", "", time.Minute},
		{"long holder", key, "facts", string(make([]byte, 65)), time.Minute},
		{"zero ttl", key, "facts", "A", 0},
		{"long ttl", key, "facts", "A", chatmem.MaxLeaseTTL + time.Second},
	} {
		if _, err := l.Lease(t.Context(), tc.key, tc.kind, tc.holder, tc.ttl); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Lease with %s: error = %v, want ErrInvalid", tc.what, err)
		}
		if tc.ttl > 0 && tc.ttl <= chatmem.MaxLeaseTTL {
			if _, err := l.Release(t.Context(), tc.key, tc.kind, tc.holder); !errors.Is(err, chatmem.ErrInvalid) {
				t.Errorf("Release with %s: error = %v, want ErrInvalid", tc.what, err)
			}
		}
	}
	if !mustLease(t, l, key, "facts", "A", time.Minute) {
		t.Error("Lease after refused calls = false, want true: they changed nothing")
	}
}

// testLeaseRace: of holders asking at once, through two stores over the
// same data, exactly one is granted, and its release reports the others.
func testLeaseRace(t *testing.T, h Harness) {
	s := h.New(t)
	ls := []chatmem.Leaser{as[chatmem.Leaser](t, s), as[chatmem.Leaser](t, h.reopen(t, s))}
	key := randomKey("c1")
	const n = 16
	granted := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ok, err := ls[i%2].Lease(t.Context(), key, "facts", string(rune('A'+i)), time.Minute)
			if err != nil {
				t.Errorf("Lease(%c) error = %v", 'A'+i, err)
			}
			granted[i] = ok
		})
	}
	wg.Wait()
	winner := -1
	for i, ok := range granted {
		if ok {
			if winner >= 0 {
				t.Fatalf("Lease granted to %c and %c at once", 'A'+winner, 'A'+i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("Lease granted to none of the holders asking at once")
	}
	if !mustRelease(t, ls[0], key, "facts", string(rune('A'+winner))) {
		t.Error("Release by the winner = not wanted, want wanted: others were refused")
	}
}

// testLeaseDeleted: a conversation's leases go with it, so nothing of a
// deleted conversation stays behind in a lease, and the work of a new
// conversation under the same ID is not held up by the old one's holder.
func testLeaseDeleted(t *testing.T, h Harness) {
	s := h.New(t)
	l := as[chatmem.Leaser](t, s)
	key := randomKey("c1")
	mustAppend(t, s, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello", Tokens: 1}}, chatmem.AppendOptions{})
	const ttl = time.Minute
	for _, kind := range []string{chatmem.LeaseSummary, chatmem.LeaseFacts} {
		if !mustLease(t, l, key, kind, "A", ttl) {
			t.Fatalf("Lease(A, %s) on a free lease = false, want true", kind)
		}
	}
	if err := s.Delete(t.Context(), key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, kind := range []string{chatmem.LeaseSummary, chatmem.LeaseFacts} {
		if !mustLease(t, l, key, kind, "B", ttl) {
			t.Errorf("Lease(B, %s) after the conversation was deleted = false, want true: its leases go with it", kind)
		}
		if mustRelease(t, l, key, kind, "A") {
			t.Errorf("Release(A, %s) of a lease dropped with its conversation = wanted, want false", kind)
		}
	}
}

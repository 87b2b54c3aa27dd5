package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// erasureTests are the subtests of erasure fenced against the writers in
// flight (chatmem.UserStore.DeleteUser, SetDerivedUserFacts,
// AppendOptions.Started).
var erasureTests = []subtest{
	{"DerivedFacts", testDerivedUserFacts},
	{"DerivedFactsInvalid", testDerivedUserFactsInvalid},
	{"DerivedFactsStarted", testDerivedUserFactsStarted},
	{"Fence", testErasureFence},
	{"FenceExpired", testErasureFenceExpired},
	{"ConcurrentCreate", testEraseConcurrentCreate},
	{"Race", testEraseRace},
}

// email is the fact the erasure subtests write for a user.
var email = chatmem.Fact{Key: "email", Value: "ana@example.com", SetBy: "test", Confidence: 1}

// wantErased fails the test unless nothing of user is left: no facts, no
// live conversation, not listed, and none of keys found.
func wantErased(t *testing.T, s chatmem.Store, user chatmem.Key, keys ...chatmem.Key) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	us := as[chatmem.UserStore](t, s)
	if facts, err := us.UserFacts(ctx, user); err != nil || len(facts) != 0 {
		t.Errorf("UserFacts(%s) after the erasure = %v, %v; want none", user.ID, facts, err)
	}
	if p, err := us.UserConversations(ctx, user, chatmem.PageRequest{}); err != nil || len(p.Conversations) != 0 {
		t.Errorf("UserConversations(%s) after the erasure = %v, %v; want none", user.ID, conversationIDs(p), err)
	}
	if ul, ok := s.(chatmem.UserLister); ok {
		p, err := ul.Users(ctx, user.Tenant, chatmem.PageRequest{Limit: 1000})
		if err != nil || slices.Contains(p.Users, user.ID) {
			t.Errorf("Users(%s) after the erasure = %v, %v; want no %s", user.Tenant, p.Users, err, user.ID)
		}
	}
	for _, key := range keys {
		if c, err := s.Conversation(ctx, key); err == nil {
			t.Errorf("Conversation(%s) after the erasure = user %q, %d messages; want ErrNotFound", key, c.User, c.LastSeq)
		} else {
			wantErr(t, fmt.Sprintf("Conversation(%s) after the erasure", key), err, chatmem.ErrNotFound)
		}
	}
}

// testDerivedUserFacts: SetDerivedUserFacts writes while the conversation
// it names is live, created at Created and bound to the user, and fails
// with ErrNotFound, writing nothing, once it was deleted, re-created or
// re-created for another user, or erased with the user.
func testDerivedUserFacts(t *testing.T, h Harness) {
	s := h.New(t)
	us := as[chatmem.UserStore](t, s)
	ctx := t.Context()
	u := chatmem.Key{Tenant: randomTenant(), ID: "u1"}
	key := chatmem.Key{Tenant: u.Tenant, ID: "c1"}
	add := func(user string) time.Time {
		t.Helper()
		return mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "my email is ana@example.com", 5)},
			chatmem.AppendOptions{User: user}).Conversation.CreatedAt
	}
	created := add("u1")
	from := func(created time.Time, f chatmem.Fact) chatmem.DerivedUserFacts {
		f.Conversation = key.ID
		return chatmem.DerivedUserFacts{User: u, Conversation: key.ID, Created: created, Facts: []chatmem.Fact{f}}
	}
	if err := us.SetDerivedUserFacts(ctx, from(created, email)); err != nil {
		t.Fatalf("SetDerivedUserFacts(live conversation) = %v, want nil", err)
	}
	if facts, err := us.UserFacts(ctx, u); err != nil || len(facts) != 1 || facts[0].Value != email.Value || facts[0].Conversation != key.ID {
		t.Fatalf("UserFacts = %+v, %v; want the email from %s", facts, err, key.ID)
	}
	second := email
	second.Value = "second@example.com"
	wantFacts := func(what string) {
		t.Helper()
		if facts, err := us.UserFacts(ctx, u); err != nil || len(facts) != 1 || facts[0].Value != email.Value {
			t.Errorf("UserFacts after %s = %+v, %v; want the first email only", what, facts, err)
		}
	}
	err := us.SetDerivedUserFacts(ctx, from(created.Add(time.Microsecond), second))
	wantErr(t, "SetDerivedUserFacts(another CreatedAt)", err, chatmem.ErrNotFound)
	wantFacts("another CreatedAt")

	other := userOf(u, "u2")
	otherKey := chatmem.Key{Tenant: u.Tenant, ID: "c2"}
	mustAppend(t, s, otherKey, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}, chatmem.AppendOptions{User: other.ID})
	p := from(created, second)
	p.Conversation = otherKey.ID
	p.Created = mustConversation(t, s, otherKey).CreatedAt
	wantErr(t, "SetDerivedUserFacts(another user's conversation)", us.SetDerivedUserFacts(ctx, p), chatmem.ErrNotFound)
	wantFacts("another user's conversation")

	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SetDerivedUserFacts(deleted)", us.SetDerivedUserFacts(ctx, from(created, second)), chatmem.ErrNotFound)
	wantFacts("Delete")

	time.Sleep(time.Millisecond) // another CreatedAt
	recreated := add("u1")
	wantErr(t, "SetDerivedUserFacts(re-created)", us.SetDerivedUserFacts(ctx, from(created, second)), chatmem.ErrNotFound)
	wantFacts("re-creation")

	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	rebound := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}, chatmem.AppendOptions{User: other.ID}).Conversation.CreatedAt
	wantErr(t, "SetDerivedUserFacts(re-created for another user)", us.SetDerivedUserFacts(ctx, from(recreated, second)), chatmem.ErrNotFound)
	wantErr(t, "SetDerivedUserFacts(re-created for another user, its CreatedAt)", us.SetDerivedUserFacts(ctx, from(rebound, second)), chatmem.ErrNotFound)
	wantFacts("re-creation for another user")
	if facts, err := us.UserFacts(ctx, other); err != nil || len(facts) != 0 {
		t.Errorf("UserFacts(other user) = %+v, %v; want none", facts, err)
	}

	// Erased with the user: the conversation is gone, and so is the fact.
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	created = add("u1")
	if _, err := us.DeleteUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SetDerivedUserFacts(erased)", us.SetDerivedUserFacts(ctx, from(created, second)), chatmem.ErrNotFound)
	wantErased(t, s, u, key)
}

// testDerivedUserFactsInvalid: bad input wraps ErrInvalid and writes
// nothing.
func testDerivedUserFactsInvalid(t *testing.T, h Harness) {
	s := h.New(t)
	us := as[chatmem.UserStore](t, s)
	u := chatmem.Key{Tenant: randomTenant(), ID: "u1"}
	key := chatmem.Key{Tenant: u.Tenant, ID: "c1"}
	created := mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}, chatmem.AppendOptions{User: u.ID}).Conversation.CreatedAt
	for name, p := range map[string]chatmem.DerivedUserFacts{
		"no conversation":            {User: u, Created: created, Facts: []chatmem.Fact{email}},
		"conversation and start":     {User: u, Conversation: key.ID, Created: created, Started: time.Now(), Facts: []chatmem.Fact{email}},
		"replace with none":          {User: u, Conversation: key.ID, Created: created, Replace: true},
		"replace with none, a start": {User: u, Started: time.Now(), Replace: true},
		"bad user, a start":          {User: chatmem.Key{Tenant: u.Tenant, ID: "a/b"}, Started: time.Now(), Facts: []chatmem.Fact{email}},
		"bad fact, a start":          {User: u, Started: time.Now(), Facts: []chatmem.Fact{email, {Key: "", Value: "x"}}},
		"bad user":                   {User: chatmem.Key{Tenant: u.Tenant, ID: "a/b"}, Conversation: key.ID, Created: created, Facts: []chatmem.Fact{email}},
		"bad fact":                   {User: u, Conversation: key.ID, Created: created, Facts: []chatmem.Fact{email, {Key: "", Value: "x"}}},
	} {
		wantErr(t, "SetDerivedUserFacts("+name+")", us.SetDerivedUserFacts(t.Context(), p), chatmem.ErrInvalid)
	}
	if facts, err := us.UserFacts(t.Context(), u); err != nil || len(facts) != 0 {
		t.Errorf("UserFacts after invalid writes = %+v, %v; want none", facts, err)
	}
}

// testDerivedUserFactsStarted: SetDerivedUserFacts with Started (work
// that names the user alone, such as an import) writes unless an erasure
// of the user completed at or after Started: then it fails with ErrErased
// (an ErrConflict) and writes nothing, not even the user's listing. With
// Replace it replaces all the user's facts and their history, and writing
// the same facts again changes nothing the user sees.
func testDerivedUserFactsStarted(t *testing.T, h Harness) {
	s := h.New(t)
	us := as[chatmem.UserStore](t, s)
	ctx := t.Context()
	u := chatmem.Key{Tenant: randomTenant(), ID: "u1"}
	name := chatmem.Fact{Key: "name", Value: "Ana", SetBy: "import", Confidence: 1}
	wantFacts := func(what string, want ...string) {
		t.Helper()
		facts, err := us.UserFacts(ctx, u)
		var got []string
		for _, f := range facts {
			got = append(got, f.Key+"="+f.Value)
		}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("UserFacts %s = %v, %v; want %v", what, got, err, want)
		}
	}
	before := time.Now()
	if err := us.SetUserFacts(ctx, u, []chatmem.Fact{email}); err != nil {
		t.Fatal(err)
	}
	add := chatmem.DerivedUserFacts{User: u, Started: before, Facts: []chatmem.Fact{name}}
	if err := us.SetDerivedUserFacts(ctx, add); err != nil {
		t.Fatalf("SetDerivedUserFacts(started, no erasure) = %v, want nil", err)
	}
	wantFacts("after an added fact", "email="+email.Value, "name=Ana")
	renamed := name
	renamed.Value = "Ana Lima"
	replace := chatmem.DerivedUserFacts{User: u, Started: before, Replace: true, Facts: []chatmem.Fact{renamed}}
	for i := range 2 { // the second is a rerun: the same facts
		if err := us.SetDerivedUserFacts(ctx, replace); err != nil {
			t.Fatalf("SetDerivedUserFacts(started, replace) #%d = %v, want nil", i+1, err)
		}
		wantFacts("after a replace", "name=Ana Lima")
	}
	_, err := us.UserFactHistory(ctx, u, email.Key)
	wantErr(t, "UserFactHistory(email) after a replace", err, chatmem.ErrNotFound)
	if h, err := us.UserFactHistory(ctx, u, name.Key); err != nil || len(h) != 1 {
		t.Errorf("UserFactHistory(name) after a replace = %d values, %v; want 1", len(h), err)
	}

	if _, err := us.DeleteUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	// Work started before the erasure: refused, whatever it writes.
	for what, p := range map[string]chatmem.DerivedUserFacts{
		"add": add, "replace": replace, "check alone": {User: u, Started: before},
		"started later, still before": {User: u, Started: before.Add(time.Nanosecond), Facts: []chatmem.Fact{name}},
	} {
		err := us.SetDerivedUserFacts(ctx, p)
		wantErr(t, "SetDerivedUserFacts("+what+", started before the erasure)", err, chatmem.ErrErased)
		wantErr(t, "SetDerivedUserFacts("+what+", started before the erasure)", err, chatmem.ErrConflict)
	}
	wantErased(t, s, u)
	// Another user, or the user in another tenant: not fenced.
	for _, other := range []chatmem.Key{{Tenant: u.Tenant, ID: "u2"}, {Tenant: randomTenant(), ID: u.ID}} {
		p := add
		p.User = other
		if err := us.SetDerivedUserFacts(ctx, p); err != nil {
			t.Errorf("SetDerivedUserFacts(%s, started before another's erasure) = %v, want nil", other, err)
		}
	}
	// Work started after the erasure completed: the user starts afresh.
	time.Sleep(time.Millisecond)
	after := chatmem.DerivedUserFacts{User: u, Started: time.Now(), Replace: true, Facts: []chatmem.Fact{name}}
	if err := us.SetDerivedUserFacts(ctx, after); err != nil {
		t.Fatalf("SetDerivedUserFacts(started after the erasure) = %v, want nil", err)
	}
	wantFacts("after new work", "name=Ana")
}

// testErasureFence: after DeleteUser, an append that would create a
// conversation bound to the user fails with ErrErased (which is an
// ErrConflict) and writes nothing if its work started before the erasure
// completed; work started after it, or an append without Started, creates
// it. Appends bound to no user, or to another user, are not fenced.
func testErasureFence(t *testing.T, h Harness) {
	s := h.New(t)
	us := as[chatmem.UserStore](t, s)
	ctx := t.Context()
	u := chatmem.Key{Tenant: randomTenant(), ID: "u1"}
	key := chatmem.Key{Tenant: u.Tenant, ID: "c1"}
	before := time.Now()
	hi := []chatmem.Message{msg(chatmem.RoleUser, "my email is ana@example.com", 5)}
	mustAppend(t, s, key, hi, chatmem.AppendOptions{User: u.ID, Started: before})
	if _, err := us.DeleteUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	// The reply of a turn that started before the erasure, and a new
	// conversation of work that did: both refused.
	reply := []chatmem.Message{msg(chatmem.RoleAssistant, "noted, ana@example.com", 5)}
	for _, k := range []chatmem.Key{key, {Tenant: u.Tenant, ID: "c2"}} {
		_, err := s.Append(ctx, k, reply, chatmem.AppendOptions{User: u.ID, Started: before})
		wantErr(t, fmt.Sprintf("Append(%s) for work started before the erasure", k.ID), err, chatmem.ErrErased)
		wantErr(t, fmt.Sprintf("Append(%s) for work started before the erasure", k.ID), err, chatmem.ErrConflict)
		if tas, ok := s.(chatmem.TailAppender); ok {
			_, _, err := tas.AppendTail(ctx, k, reply, chatmem.AppendOptions{User: u.ID, Started: before}, chatmem.TailQuery{Turns: 1})
			wantErr(t, fmt.Sprintf("AppendTail(%s) for work started before the erasure", k.ID), err, chatmem.ErrErased)
		}
	}
	wantErased(t, s, u, key, chatmem.Key{Tenant: u.Tenant, ID: "c2"})

	// Not fenced: no user, another user, another tenant.
	mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "c3"}, hi, chatmem.AppendOptions{Started: before})
	mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "c4"}, hi, chatmem.AppendOptions{User: "u2", Started: before})
	mustAppend(t, s, chatmem.Key{Tenant: randomTenant(), ID: "c1"}, hi, chatmem.AppendOptions{User: u.ID, Started: before})

	// Work that started after the erasure completed, or an append
	// without Started: the user starts afresh.
	time.Sleep(time.Millisecond)
	res := mustAppend(t, s, key, hi, chatmem.AppendOptions{User: u.ID, Started: time.Now()})
	if res.Conversation.User != u.ID || res.Conversation.LastSeq != 1 {
		t.Errorf("Append after the erasure = %+v; want a new conversation of %s", res.Conversation, u.ID)
	}
	mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "c5"}, hi, chatmem.AppendOptions{User: u.ID})
	// An append to the live conversation is not a creation.
	mustAppend(t, s, key, reply, chatmem.AppendOptions{User: u.ID, Started: time.Now()})
	if p, err := us.UserConversations(ctx, u, chatmem.PageRequest{}); err != nil || !slices.Equal(conversationIDs(p), []string{"c1", "c5"}) {
		t.Errorf("UserConversations after new work = %v, %v; want c1 c5", conversationIDs(p), err)
	}
}

// testErasureFenceExpired: an expired conversation of an erased user is
// not started afresh for work that began before the erasure.
func testErasureFenceExpired(t *testing.T, h Harness) {
	s := h.New(t)
	us := as[chatmem.UserStore](t, s)
	u := chatmem.Key{Tenant: randomTenant(), ID: "u1"}
	key := chatmem.Key{Tenant: u.Tenant, ID: "c1"}
	before := time.Now()
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)},
		chatmem.AppendOptions{User: u.ID, TTL: time.Minute, Now: before.Add(-time.Hour)})
	if _, err := us.DeleteUser(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(t.Context(), key, []chatmem.Message{msg(chatmem.RoleUser, "again", 1)}, chatmem.AppendOptions{User: u.ID, Started: before})
	wantErr(t, "Append(expired conversation of an erased user)", err, chatmem.ErrErased)
	wantErased(t, s, u, key)
}

// testEraseConcurrentCreate: conversations bound to the user while
// DeleteUser runs, by work that started before it, do not survive it.
func testEraseConcurrentCreate(t *testing.T, h Harness) {
	s := h.New(t)
	us := as[chatmem.UserStore](t, s)
	ctx := t.Context()
	u := chatmem.Key{Tenant: randomTenant(), ID: "u1"}
	before := time.Now()
	var keys []chatmem.Key
	for i := range 3 {
		key := chatmem.Key{Tenant: u.Tenant, ID: fmt.Sprintf("old-%d", i)}
		keys = append(keys, key)
		mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}, chatmem.AppendOptions{User: u.ID})
	}
	const writers = 4
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		done    = make(chan struct{})
		created []chatmem.Key
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := chatmem.Key{Tenant: u.Tenant, ID: fmt.Sprintf("new-%d-%d", w, i)}
				_, err := s.Append(ctx, key, []chatmem.Message{msg(chatmem.RoleUser, "my email is ana@example.com", 5)},
					chatmem.AppendOptions{User: u.ID, Started: before})
				mu.Lock()
				created = append(created, key)
				mu.Unlock()
				if err != nil && !errors.Is(err, chatmem.ErrErased) {
					t.Errorf("Append(%s) during the erasure = %v; want nil or ErrErased", key, err)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	time.Sleep(5 * time.Millisecond) // let some land before the erasure
	_, err := us.DeleteUser(ctx, u)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	wantErased(t, s, u, append(keys, created...)...)
}

// EraseIterations is the environment variable that sets how many cases
// the erasure race subtest runs (0 or unset: each case once).
const EraseIterations = "CHATMEM_ERASE_ITERATIONS"

// testEraseRace runs each writer that may be in flight when a user is
// erased (an extraction's user facts, a conversation's facts, a summary,
// vectors and index postings, a proxy turn, an MCP append, an import)
// against DeleteUser, with the writer's remaining store calls made at each
// step of the erasure (Harness.EraseSteps: before it, between each of its
// steps, after it) after each prefix of them. Every case then finds
// nothing of the user: the fences hold at every interleaving of store
// calls. The interleavings are made by hooks in one goroutine, so each
// case is cheap and the run deterministic.
func testEraseRace(t *testing.T, h Harness) {
	s := h.New(t)
	us := as[chatmem.UserStore](t, s)
	n := 0
	if v := os.Getenv(EraseIterations); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("%s=%q: %v", EraseIterations, v, err)
		}
	}
	// Count the erasure's steps once: a case runs the writer's rest at
	// step 0 (before it), 1..steps (inside it) or steps+1 (after it).
	steps := 0
	if h.EraseSteps != nil {
		h.EraseSteps(s, func() { steps++ })
		u := chatmem.Key{Tenant: randomTenant(), ID: "u-count"}
		mustAppend(t, s, chatmem.Key{Tenant: u.Tenant, ID: "c"}, []chatmem.Message{msg(chatmem.RoleUser, "hi", 1)}, chatmem.AppendOptions{User: u.ID})
		if _, err := us.DeleteUser(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		h.EraseSteps(s, nil)
	}
	type raceCase struct {
		writer   int
		split    int // the writer's calls made before the erasure
		at       int // where in the erasure the rest are made
		wSteps   int
		writerID string
	}
	var cases []raceCase
	for wi, w := range eraseWriters {
		for split := 0; split <= len(w.steps); split++ {
			for at := 0; at <= steps+1; at++ {
				if split == len(w.steps) && at > 0 {
					continue // nothing left to make
				}
				cases = append(cases, raceCase{writer: wi, split: split, at: at, wSteps: len(w.steps), writerID: w.name})
			}
		}
	}
	if n == 0 {
		n = len(cases)
	}
	start := time.Now()
	for i := range n {
		c := cases[i%len(cases)]
		if !t.Run(fmt.Sprintf("%s/split=%d/at=%d", c.writerID, c.split, c.at), func(t *testing.T) {
			eraseRaceCase(t, h, s, eraseWriters[c.writer], c.split, c.at)
		}) {
			t.Fatalf("case %d failed", i)
		}
	}
	t.Logf("%d erasure race cases (%d distinct, %d erasure steps) in %v", n, len(cases), steps, time.Since(start))
}

// eraseRaceCase runs one case of testEraseRace.
func eraseRaceCase(t *testing.T, h Harness, s chatmem.Store, w eraseWriter, split, at int) {
	ctx := context.WithoutCancel(t.Context())
	us := s.(chatmem.UserStore)
	u := chatmem.Key{Tenant: randomTenant(), ID: "u1"}
	started := time.Now() // the writer's work began before the erasure
	st := &eraseState{s: s, user: u, started: started, main: chatmem.Key{Tenant: u.Tenant, ID: "main"}}
	res := mustAppend(t, s, st.main, []chatmem.Message{
		msg(chatmem.RoleUser, "my email is ana@example.com", 5),
		msg(chatmem.RoleAssistant, "noted", 1),
	}, chatmem.AppendOptions{User: u.ID, Started: started})
	st.created = res.Conversation.CreatedAt
	if err := us.SetUserFacts(ctx, u, []chatmem.Fact{{Key: "name", Value: "Ana", SetBy: "app", Confidence: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, step := range w.steps[:split] {
		step(ctx, st)
	}
	rest := func() {
		for _, step := range w.steps[split:] {
			step(ctx, st) // errors are the fences at work
		}
	}
	step := 0
	if at == 0 {
		rest()
	}
	if h.EraseSteps != nil {
		h.EraseSteps(s, func() {
			step++
			if step == at {
				rest()
			}
		})
		defer h.EraseSteps(s, nil)
	}
	if _, err := us.DeleteUser(ctx, u); err != nil {
		t.Fatalf("DeleteUser = %v", err)
	}
	if h.EraseSteps != nil {
		h.EraseSteps(s, nil)
	}
	if at > step {
		rest() // after the erasure (or at a step this erasure did not take)
	}
	wantErased(t, s, u, append([]chatmem.Key{st.main}, st.keys...)...)
}

// eraseState is what a writer of the erasure race works on.
type eraseState struct {
	s       chatmem.Store
	user    chatmem.Key
	started time.Time
	main    chatmem.Key // the user's conversation, created before the writer
	created time.Time   // main's CreatedAt as the writer read it
	keys    []chatmem.Key
}

// key returns the key id in the user's tenant, remembered for the check.
func (st *eraseState) key(id string) chatmem.Key {
	k := chatmem.Key{Tenant: st.user.Tenant, ID: id}
	if !slices.Contains(st.keys, k) {
		st.keys = append(st.keys, k)
	}
	return k
}

// eraseWriter is a writer in flight: its store calls, in order.
type eraseWriter struct {
	name  string
	steps []func(context.Context, *eraseState)
}

// readMain is a writer's first call: it reads the conversation it works
// on (the worker's job carries its CreatedAt).
func readMain(ctx context.Context, st *eraseState) {
	if c, err := st.s.Conversation(ctx, st.main); err == nil {
		st.created = c.CreatedAt
	}
}

var eraseWriters = []eraseWriter{
	{"UserFacts", []func(context.Context, *eraseState){readMain, func(ctx context.Context, st *eraseState) {
		f := email
		f.Conversation = st.main.ID
		st.s.(chatmem.UserStore).SetDerivedUserFacts(ctx, chatmem.DerivedUserFacts{
			User: st.user, Conversation: st.main.ID, Created: st.created, Facts: []chatmem.Fact{f}})
	}}},
	{"ConversationFacts", []func(context.Context, *eraseState){readMain, func(ctx context.Context, st *eraseState) {
		if gw, ok := st.s.(chatmem.GenerationWriter); ok {
			gw.SetFactsOf(ctx, st.main, st.created, []chatmem.Fact{email})
		}
		if fm, ok := st.s.(chatmem.FactMarker); ok {
			fm.SetFactsThrough(ctx, st.main, st.created, []chatmem.Fact{email}, 0, 1)
		}
	}}},
	{"Summary", []func(context.Context, *eraseState){readMain, func(ctx context.Context, st *eraseState) {
		if gw, ok := st.s.(chatmem.GenerationWriter); ok {
			gw.PutSummaryOf(ctx, st.main, st.created, chatmem.Summary{Text: "Ana's email is ana@example.com", CoversSeq: 1, Tokens: 5, Summarizer: "test"}, 0)
		}
	}}},
	{"Index", []func(context.Context, *eraseState){readMain, func(ctx context.Context, st *eraseState) {
		if vs, ok := st.s.(chatmem.VectorStore); ok {
			vs.PutVectors(ctx, st.main, "test", []int64{1}, [][]float32{{1, 0}})
		}
		if ic, ok := st.s.(chatmem.IndexCatcher); ok {
			ic.IndexPending(ctx, st.main)
		}
	}}},
	{"ProxyTurn", []func(context.Context, *eraseState){
		func(ctx context.Context, st *eraseState) {
			st.s.Append(ctx, st.key("turn"), []chatmem.Message{msg(chatmem.RoleUser, "I am ana@example.com", 5)},
				chatmem.AppendOptions{User: st.user.ID, Started: st.started})
		},
		func(ctx context.Context, st *eraseState) { // the reply, once the upstream answered
			st.s.Append(ctx, st.key("turn"), []chatmem.Message{msg(chatmem.RoleAssistant, "hello ana@example.com", 5)},
				chatmem.AppendOptions{User: st.user.ID, Started: st.started})
		},
		func(ctx context.Context, st *eraseState) { // the reply on the conversation of before
			if tas, ok := st.s.(chatmem.TailAppender); ok {
				tas.AppendTail(ctx, st.main, []chatmem.Message{msg(chatmem.RoleAssistant, "hello again", 2)},
					chatmem.AppendOptions{User: st.user.ID, Started: st.started}, chatmem.TailQuery{Turns: 1})
			}
		},
	}},
	{"MCPAppend", []func(context.Context, *eraseState){func(ctx context.Context, st *eraseState) {
		st.s.Append(ctx, st.key("mcp"), []chatmem.Message{msg(chatmem.RoleUser, "remember ana@example.com", 5)},
			chatmem.AppendOptions{User: st.user.ID, Started: st.started, IdempotencyKey: "mcp-1"})
	}}},
	{"Import", []func(context.Context, *eraseState){
		func(ctx context.Context, st *eraseState) {
			expect := int64(0)
			st.s.Append(ctx, st.key("imported"), []chatmem.Message{msg(chatmem.RoleUser, "ana@example.com", 5)},
				chatmem.AppendOptions{User: st.user.ID, Started: st.started, ExpectedLastSeq: &expect, Now: st.started.Add(-24 * time.Hour)})
		},
		func(ctx context.Context, st *eraseState) {
			if fs, ok := st.s.(chatmem.FactStore); ok {
				fs.SetFacts(ctx, st.key("imported"), []chatmem.Fact{email})
			}
			if ss, ok := st.s.(chatmem.SummaryStore); ok {
				ss.PutSummary(ctx, st.key("imported"), chatmem.Summary{Text: "ana", CoversSeq: 1, Tokens: 1, Summarizer: "test"}, 0)
			}
		},
		func(ctx context.Context, st *eraseState) { // the user's record
			st.s.(chatmem.UserStore).SetDerivedUserFacts(ctx, chatmem.DerivedUserFacts{
				User: st.user, Started: st.started, Facts: []chatmem.Fact{email}})
		},
		func(ctx context.Context, st *eraseState) { // the user's record, replace policy
			st.s.(chatmem.UserStore).SetDerivedUserFacts(ctx, chatmem.DerivedUserFacts{
				User: st.user, Started: st.started, Replace: true, Facts: []chatmem.Fact{email}})
		},
	}},
}

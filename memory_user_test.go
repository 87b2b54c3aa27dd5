package chatmem_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// noUsers is a store without chatmem.UserStore.
type noUsers struct{ chatmem.Store }

// TestAppendUser: an append naming a malformed user is invalid, and one
// naming a user on a store that keeps no users is refused; neither writes.
func TestAppendUser(t *testing.T) {
	key := chatmem.Key{Tenant: "t", ID: "c"}
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi"}}
	mem := newMemory(t)
	if _, err := mem.Append(t.Context(), key, msgs, chatmem.AppendOptions{User: "u/1"}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Append(User u/1) error = %v, want ErrInvalid", err)
	}
	store := memstore.New()
	plain, err := chatmem.New(noUsers{store}, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Append(t.Context(), key, msgs, chatmem.AppendOptions{User: "u1"}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("Append(User) on a store without users error = %v, want ErrInvalid", err)
	}
	if _, err := store.Conversation(t.Context(), key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("after refused appends Conversation error = %v, want ErrNotFound", err)
	}
	res, err := mem.Append(t.Context(), key, msgs, chatmem.AppendOptions{User: "u1"})
	if err != nil || res.Conversation.User != "u1" {
		t.Fatalf("Append(User u1) = %q, %v", res.Conversation.User, err)
	}
	_, err = mem.Append(t.Context(), key, msgs, chatmem.AppendOptions{User: "u2"})
	if !errors.Is(err, chatmem.ErrConflict) {
		t.Errorf("Append(User u2) error = %v, want ErrConflict", err)
	}
}

// TestFactsAcrossConversations: a user's facts reach every conversation
// of theirs, in VisibleFacts and in the context's facts message; the
// conversation's own value wins on the same key; a conversation without a
// user sees only its own.
func TestFactsAcrossConversations(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	user := chatmem.Key{Tenant: "t", ID: "kavya"}
	first := chatmem.Key{Tenant: "t", ID: "monday"}
	next := chatmem.Key{Tenant: "t", ID: "friday"}
	other := chatmem.Key{Tenant: "t", ID: "stranger"}
	hi := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello"}}
	for _, k := range []chatmem.Key{first, next} {
		if _, err := mem.Append(ctx, k, hi, chatmem.AppendOptions{User: user.ID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mem.Append(ctx, other, hi, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	err := mem.SetUserFacts(ctx, user, []chatmem.Fact{
		{Key: "name", Value: "Kavya", SetBy: "app", Confidence: 1, Conversation: first.ID, SourceSeq: 1},
		{Key: "language", Value: "hi", SetBy: "app", Confidence: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.SetFacts(ctx, next, []chatmem.Fact{
		{Key: "language", Value: "en", SetBy: "app", Confidence: 1},
		{Key: "order_id", Value: "A-17", SetBy: "app", Confidence: 1},
	}); err != nil {
		t.Fatal(err)
	}
	facts, err := mem.VisibleFacts(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(facts))
	for i, f := range facts {
		got[i] = f.Key + "=" + f.Value + "@" + f.Scope
	}
	want := "language=en@conversation name=Kavya@user order_id=A-17@conversation"
	if strings.Join(got, " ") != want {
		t.Errorf("VisibleFacts(friday) = %v, want %s", got, want)
	}
	w, err := mem.Context(ctx, first, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 200, Facts: true}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Messages) == 0 || !strings.Contains(w.Messages[0].Content, "language=Hindi (hi); name=Kavya") || w.Parts.Facts == 0 {
		t.Errorf("Context(monday, facts) = %+v, want the user's facts pinned and counted", w.Messages)
	}
	if facts, err := mem.VisibleFacts(ctx, other); err != nil || len(facts) != 0 {
		t.Errorf("VisibleFacts(stranger) = %v, %v; want none", facts, err)
	}
}

// TestFactHistoryValidity: a superseded value gets valid_to and the
// message that superseded it; the history of every key comes oldest
// first; the current value has no valid_to.
func TestFactHistoryValidity(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	user := chatmem.Key{Tenant: "t", ID: "u"}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	err := mem.SetUserFacts(ctx, user, []chatmem.Fact{
		{Key: "language", Value: "hi", SetBy: "rules", Confidence: 1, Conversation: "c1", SourceSeq: 3, CreatedAt: t0},
		{Key: "name", Value: "Kavya", SetBy: "rules", Confidence: 1, Conversation: "c1", SourceSeq: 1, CreatedAt: t0.Add(time.Minute)},
		{Key: "language", Value: "en", SetBy: "rules", Confidence: 1, Conversation: "c2", SourceSeq: 8, CreatedAt: t0.Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := mem.UserFactHistory(ctx, user, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 {
		t.Fatalf("UserFactHistory = %d facts, want 3: %+v", len(hist), hist)
	}
	if h := hist[0]; h.Value != "hi" || !h.ValidFrom.Equal(t0) || !h.ValidTo.Equal(t0.Add(time.Hour)) ||
		h.SupersededBy == nil || *h.SupersededBy != (chatmem.FactRef{Conversation: "c2", Seq: 8}) || h.Scope != chatmem.ScopeUser {
		t.Errorf("history[0] = %+v, want hi valid to %v, superseded by c2#8", h, t0.Add(time.Hour))
	}
	if h := hist[1]; h.Value != "Kavya" || !h.ValidTo.IsZero() || h.SupersededBy != nil {
		t.Errorf("history[1] = %+v, want the current name", h)
	}
	if h := hist[2]; h.Value != "en" || !h.ValidTo.IsZero() {
		t.Errorf("history[2] = %+v, want the current language", h)
	}
	// A conversation's history names the conversation itself.
	key := chatmem.Key{Tenant: "t", ID: "c9"}
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "x"}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mem.SetFacts(ctx, key, []chatmem.Fact{
		{Key: "order_id", Value: "A1", SetBy: "app", Confidence: 1, CreatedAt: t0},
		{Key: "order_id", Value: "A2", SetBy: "app", Confidence: 1, SourceSeq: 1, CreatedAt: t0.Add(time.Second)},
	}); err != nil {
		t.Fatal(err)
	}
	hist, err = mem.FactHistory(ctx, key, "order_id")
	if err != nil || len(hist) != 2 || hist[0].SupersededBy == nil || *hist[0].SupersededBy != (chatmem.FactRef{Conversation: "c9", Seq: 1}) {
		t.Errorf("FactHistory(order_id) = %+v, %v; want A1 superseded by c9#1", hist, err)
	}
	if _, err := mem.UserFactHistory(ctx, user, "email"); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("UserFactHistory(email) error = %v, want ErrNotFound", err)
	}
}

// TestExtractedUserFacts: facts an extractor finds go to the user when
// their key is of ScopeUser and the conversation has a user, and stay
// with the conversation otherwise; a restated value is not written again.
func TestExtractedUserFacts(t *testing.T) {
	ctx := t.Context()
	mem, say := newKeyValueMemory(t)
	user := chatmem.Key{Tenant: "t", ID: "u1"}
	a := chatmem.Key{Tenant: "t", ID: "a"}
	say(a, "u1", "name=Kavya order_id=A-1")
	say(a, "u1", "name=Kavya")
	facts, err := mem.UserFacts(ctx, user)
	if err != nil || len(facts) != 1 || facts[0].Key != "name" || facts[0].Conversation != "a" || facts[0].SourceSeq != 1 {
		t.Errorf("UserFacts = %+v, %v; want name from a#1", facts, err)
	}
	if h, err := mem.UserFactHistory(ctx, user, "name"); err != nil || len(h) != 1 {
		t.Errorf("UserFactHistory(name) = %d values, %v; want 1 (a restated value is not written)", len(h), err)
	}
	own, err := mem.Facts(ctx, a)
	if err != nil || len(own) != 1 || own[0].Key != "order_id" {
		t.Errorf("Facts(a) = %+v, %v; want order_id only", own, err)
	}
	// A new conversation of the user sees the name; one without a user
	// keeps its name itself.
	b := chatmem.Key{Tenant: "t", ID: "b"}
	say(b, "u1", "language=hi")
	if v, _ := mem.VisibleFacts(ctx, b); len(v) != 2 {
		t.Errorf("VisibleFacts(b) = %+v, want language and name", v)
	}
	c := chatmem.Key{Tenant: "t", ID: "c"}
	say(c, "", "name=Ravi")
	if own, _ := mem.Facts(ctx, c); len(own) != 1 || own[0].Value != "Ravi" {
		t.Errorf("Facts(c) = %+v, want its own name", own)
	}
	if facts, _ := mem.UserFacts(ctx, user); len(facts) != 2 {
		t.Errorf("UserFacts after b and c = %+v, want name and language", facts)
	}
}

// newKeyValueMemory returns a Memory over the memory store that extracts
// key=value facts in the append (Sync), and say, which appends a user
// message to a conversation of user u ("": none).
func newKeyValueMemory(t *testing.T) (*chatmem.Memory, func(key chatmem.Key, u, text string)) {
	mem, err := chatmem.New(memstore.New(), chatmem.Options{
		Counter:    tokenizer.Estimate{},
		Extractors: []chatmem.Extractor{keyValueExtractor{}},
		Sync:       true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mem, func(key chatmem.Key, u, text string) {
		t.Helper()
		if _, err := mem.Append(t.Context(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text}}, chatmem.AppendOptions{User: u}); err != nil {
			t.Fatal(err)
		}
	}
}

// keyValueExtractor finds key=value pairs in user messages.
type keyValueExtractor struct{}

func (keyValueExtractor) Name() string { return "kv" }

func (keyValueExtractor) Extract(_ context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	var out []chatmem.Fact
	for _, m := range msgs {
		if m.Role != chatmem.RoleUser {
			continue
		}
		for _, w := range strings.Fields(m.Content) {
			if k, v, ok := strings.Cut(w, "="); ok {
				out = append(out, chatmem.Fact{Key: k, Value: v, SourceSeq: m.Seq, Confidence: 1})
			}
		}
	}
	return out, nil
}

func TestScopeOf(t *testing.T) {
	for key, want := range map[string]string{
		"name": chatmem.ScopeUser, "email": chatmem.ScopeUser, "phone": chatmem.ScopeUser, "language": chatmem.ScopeUser,
		"address": chatmem.ScopeUser, "location": chatmem.ScopeUser, "preferred_seat": chatmem.ScopeUser,
		"shipping.city": chatmem.ScopeUser, "order_id": chatmem.ScopeConversation, "ticket_id": chatmem.ScopeConversation,
		"issue": chatmem.ScopeConversation,
	} {
		if got := chatmem.ScopeOf(key); got != want {
			t.Errorf("ScopeOf(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestDeleteUserForgetsCache: after DeleteUser, a conversation created
// again at an erased conversation's ID holds only its own messages, though
// this Memory had the old ones cached from the turns before.
func TestDeleteUserForgetsCache(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "c"}
	user := chatmem.Key{Tenant: "t", ID: "u"}
	for _, text := range []string{"my secret is plum", "and pear"} {
		if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text}}, chatmem.AppendOptions{User: "u"}); err != nil {
			t.Fatal(err)
		}
		if _, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 100}, chatmem.ContextOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := mem.DeleteUser(ctx, user); err != nil || n != 1 {
		t.Fatalf("DeleteUser = %d, %v; want 1", n, err)
	}
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "fresh start"}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 100}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Messages) != 1 || w.Messages[0].Content != "fresh start" {
		t.Errorf("Context after erasure = %+v, want only the new message", w.Messages)
	}
}

// A user fact the application sets is seen by the next extraction of any
// of the user's conversations, though the values the last extraction saw
// are cached: a user restating the old value after it supersedes the
// app's, it is not taken for a value already stored.
func TestExtractionSeesUserFactsTheAppSet(t *testing.T) {
	ctx := t.Context()
	mem, say := newKeyValueMemory(t)
	user := chatmem.Key{Tenant: "t", ID: "u1"}
	a := chatmem.Key{Tenant: "t", ID: "a"}
	say(a, "u1", "name=Kavya")
	if err := mem.SetUserFacts(ctx, user, []chatmem.Fact{{Key: "name", Value: "K. Rao"}}); err != nil {
		t.Fatal(err)
	}
	say(a, "u1", "name=Kavya")
	facts, err := mem.UserFacts(ctx, user)
	if err != nil || len(facts) != 1 || facts[0].Value != "Kavya" || facts[0].SetBy != "kv" || facts[0].SourceSeq != 2 {
		t.Errorf("UserFacts = %+v, %v; want name=Kavya from message 2, superseding the app's", facts, err)
	}
}

package chatmem_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// userRecallFixture stores, in tenant t: conversation monday of user kavya
// (an order number among small talk), conversation tuesday of kavya (a hamster's
// name said long ago, then small talk), conversation other of user ravi
// (ravi's own secret words), and in tenant t2 a conversation of a user also
// named kavya (another person: other secret words).
func userRecallFixture(t *testing.T, mem *chatmem.Memory) {
	t.Helper()
	ctx := t.Context()
	add := func(tenant, id, user string, msgs ...[]chatmem.Message) {
		t.Helper()
		var all []chatmem.Message
		for _, m := range msgs {
			all = append(all, m...)
		}
		key := chatmem.Key{Tenant: tenant, ID: id}
		if _, err := mem.Append(ctx, key, all, chatmem.AppendOptions{User: user}); err != nil {
			t.Fatal(err)
		}
	}
	pair := func(q, a string) []chatmem.Message {
		return []chatmem.Message{{Role: chatmem.RoleUser, Content: q}, {Role: chatmem.RoleAssistant, Content: a}}
	}
	add("t", "monday", "kavya", filler(40, 1),
		pair("My order is SE-10423, a blue kettle.", "Thanks, I noted order SE-10423."), filler(40, 2))
	add("t", "tuesday", "kavya", pair("My hamster is named Biscuit.", "Biscuit is a lovely name."), filler(200, 3))
	add("t", "other", "ravi", filler(20, 4), pair("The plum umbrella kettle is mine.", "Noted, the plum umbrella."), filler(20, 5))
	add("t2", "monday", "kavya", filler(20, 6), pair("The kiwi lantern kettle is mine.", "Noted, the kiwi lantern."), filler(20, 7))
}

// recalled returns the recalled messages of w.
func recalled(w chatmem.Window) []chatmem.Message {
	var out []chatmem.Message
	for _, m := range w.Messages {
		if m.Metadata[chatmem.MetaKey] == chatmem.MetaRecalled {
			out = append(out, m)
		}
	}
	return out
}

// TestRecallAcrossUser: a turn said in one of a user's conversations is
// recalled in a new conversation of the user under scope user, marked with
// its conversation and date and counted in the budget; an older turn of the
// current conversation is recalled too. Nothing of another user's or
// tenant's conversations comes, and conversation scope sees none of the
// other conversations.
func TestRecallAcrossUser(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	userRecallFixture(t, mem)
	friday := chatmem.Key{Tenant: "t", ID: "friday"}
	if _, err := mem.Append(ctx, friday, append(filler(6, 8), chatmem.Message{Role: chatmem.RoleUser,
		Content: "Which order number did I give for the kettle? And what about the plum umbrella or the kiwi lantern?"}),
		chatmem.AppendOptions{User: "kavya"}); err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 256, Scope: chatmem.ScopeUser}
	w, err := mem.Context(ctx, friday, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A recalled run starts with a full marker; the messages after it in
	// the same minute carry their seq only.
	full := regexp.MustCompile(`^\[(monday|tuesday|friday) #\d+ \d{4}-\d\d-\d\d \d\d:\d\d\] `)
	short := regexp.MustCompile(`^\[#(41|42)\] `)
	found := false
	sum, own := 0, 0
	for i, m := range w.Messages {
		sum += m.Tokens
		if m.Seq > 0 {
			own++
		}
		if strings.Contains(m.Content, "plum") || strings.Contains(m.Content, "kiwi") {
			if m.Metadata[chatmem.MetaKey] == chatmem.MetaRecalled {
				t.Errorf("recalled another user's or tenant's message: %q (%v)", m.Content, m.Metadata)
			}
		}
		if m.Metadata[chatmem.MetaKey] != chatmem.MetaRecalled {
			continue
		}
		switch conv := m.Metadata[chatmem.MetaConversation]; {
		case conv != "monday" && conv != "tuesday" && conv != "friday":
			t.Errorf("recalled %q from conversation %q, want one of kavya's", m.Content, conv)
		case conv != "friday" && m.Seq != 0:
			t.Errorf("message of another conversation has Seq %d in the window, want 0", m.Seq)
		case conv == "friday" && strconv.FormatInt(m.Seq, 10) != m.Metadata[chatmem.MetaSeq]:
			t.Errorf("message of the current conversation has Seq %d in the window, metadata %s", m.Seq, m.Metadata[chatmem.MetaSeq])
		}
		if strings.Contains(m.Content, "SE-10423") {
			found = true
			if m.Metadata[chatmem.MetaConversation] != "monday" || m.Metadata[chatmem.MetaSeq] != "41" && m.Metadata[chatmem.MetaSeq] != "42" {
				t.Errorf("recalled order = %q %v, want monday's #41 or #42", m.Content, m.Metadata)
			}
			if !strings.HasPrefix(m.Content, "[monday #4") && !(short.MatchString(m.Content) && i > 0 &&
				recalled(chatmem.Window{Messages: w.Messages[i-1 : i]}) != nil) {
				t.Errorf("recalled order = %q, want marked [monday #41|42 date], or [#41|42] after a recalled message", m.Content)
			}
		}
		if i == 0 || w.Messages[i-1].Metadata[chatmem.MetaConversation] != m.Metadata[chatmem.MetaConversation] {
			if !full.MatchString(m.Content) {
				t.Errorf("first recalled message of a run = %q, want marked [conversation #seq date]", m.Content)
			}
		}
	}
	if !found {
		t.Errorf("scope user: order SE-10423 of conversation monday not recalled in friday: %v", contentsOf(w))
	}
	if sum+w.Parts.Overhead != w.Tokens || w.Tokens > p.Budget {
		t.Errorf("Tokens = %d (messages %d + overhead %d), budget %d", w.Tokens, sum, w.Parts.Overhead, p.Budget)
	}
	if w.Dropped != 7-own {
		t.Errorf("Dropped = %d, want %d: friday has 7 messages and %d are sent", w.Dropped, 7-own, own)
	}

	p.Scope = ""
	w, err = mem.Context(ctx, friday, p, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := recalled(w); len(got) > 0 {
		t.Errorf("conversation scope recalled %d messages into a conversation of 7: %v", len(got), msgText(got))
	}

	// The current conversation's own older turns come too, with their Seq.
	tuesday := chatmem.Key{Tenant: "t", ID: "tuesday"}
	if _, err := mem.Append(ctx, tuesday, []chatmem.Message{{Role: chatmem.RoleUser, Content: "What is my hamster named again?"}},
		chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	p.Scope = chatmem.ScopeUser
	if w, err = mem.Context(ctx, tuesday, p, chatmem.ContextOptions{}); err != nil {
		t.Fatal(err)
	}
	found = false
	for _, m := range recalled(w) {
		if strings.Contains(m.Content, "Biscuit") && m.Metadata[chatmem.MetaConversation] == "tuesday" && m.Seq >= 1 && m.Seq <= 2 &&
			strings.HasPrefix(m.Content, "[tuesday #") {
			found = true
		}
	}
	if !found {
		t.Errorf("scope user: tuesday's own cat not recalled at its turn 203: %v", msgText(recalled(w)))
	}
}

// TestRecallUserScopeWithoutUser: scope user in a conversation without a
// user recalls from the conversation alone, as conversation scope does.
func TestRecallUserScopeWithoutUser(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	userRecallFixture(t, mem)
	key := chatmem.Key{Tenant: "t", ID: "lonely"}
	msgs := append(filler(4, 9), chatmem.Message{Role: chatmem.RoleUser, Content: "My bike is a green Brompton."},
		chatmem.Message{Role: chatmem.RoleAssistant, Content: "A green Brompton, noted."})
	msgs = append(msgs, filler(200, 10)...)
	msgs = append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: "Which bike do I have, and what is my order number for the kettle?"})
	if _, err := mem.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	var windows [2]chatmem.Window
	for i, scope := range []string{chatmem.ScopeUser, ""} {
		w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 256, Scope: scope}, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		windows[i] = w
	}
	if a, b := contentsOf(windows[0]), contentsOf(windows[1]); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("without a user, scope user = %v\nwant conversation scope's %v", a, b)
	}
	if !strings.Contains(strings.Join(contentsOf(windows[0]), "\n"), "Brompton") {
		t.Errorf("scope user without a user did not recall the conversation's own bike: %v", contentsOf(windows[0]))
	}
}

// TestPolicyScope: a scope is checked, and only policies that recall take
// scope user.
func TestPolicyScope(t *testing.T) {
	for _, p := range []chatmem.Policy{
		{Kind: chatmem.PolicyRecall, Budget: 100, Scope: "team"},
		{Kind: chatmem.PolicyTokenBudget, Budget: 100, Scope: chatmem.ScopeUser},
		{Kind: chatmem.PolicySummaryBuffer, Budget: 100, Scope: chatmem.ScopeUser},
	} {
		if err := p.Validate(); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalid", p, err)
		}
	}
	for _, p := range []chatmem.Policy{
		{Kind: chatmem.PolicyRecall, Budget: 100, Scope: chatmem.ScopeUser},
		{Kind: chatmem.PolicyRecall, Budget: 100, Scope: chatmem.ScopeConversation},
		{Kind: chatmem.PolicySummaryBuffer, Budget: 100, Recall: true, Scope: chatmem.ScopeUser},
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v.Validate() = %v, want nil", p, err)
		}
	}
}

// TestSearchUser: SearchUser finds a message of any of the user's
// conversations, naming it, and nothing of another user's or tenant's.
func TestSearchUser(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	userRecallFixture(t, mem)
	hits, err := mem.SearchUser(ctx, chatmem.Key{Tenant: "t", ID: "kavya"}, "SE-10423 kettle plum kiwi Biscuit", 10)
	if err != nil {
		t.Fatal(err)
	}
	convs := map[string]bool{}
	for _, h := range hits {
		convs[h.Conversation] = true
		if strings.Contains(h.Message.Content, "plum") || strings.Contains(h.Message.Content, "kiwi") {
			t.Errorf("SearchUser(kavya) found %s: %q, another user's", h.Conversation, h.Message.Content)
		}
	}
	if !convs["monday"] || !convs["tuesday"] || len(convs) != 2 {
		t.Errorf("SearchUser(kavya) hit conversations %v, want monday and tuesday", convs)
	}
	if len(hits) == 0 || !strings.Contains(hits[0].Message.Content, "SE-10423") {
		t.Errorf("SearchUser(kavya) first hit = %+v, want the order", hits)
	}
	if hits, err := mem.SearchUser(ctx, chatmem.Key{Tenant: "t", ID: "nobody"}, "kettle", 10); err != nil || len(hits) != 0 {
		t.Errorf("SearchUser(nobody) = %v, %v, want no hits", hits, err)
	}
	if _, err := mem.SearchUser(ctx, chatmem.Key{Tenant: "t", ID: "kavya"}, "kettle", 0); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("SearchUser(limit 0) error = %v, want ErrInvalid", err)
	}
}

func msgText(msgs []chatmem.Message) []string {
	s := make([]string, len(msgs))
	for i, m := range msgs {
		s[i] = m.Content
	}
	return s
}

// TestRecallUserReceipt: a receipt of a user-scope recall names where each
// recalled message came from: its conversation and seq there.
func TestRecallUserReceipt(t *testing.T) {
	ctx := t.Context()
	mem := newMemory(t)
	userRecallFixture(t, mem)
	friday := chatmem.Key{Tenant: "t", ID: "friday"}
	if _, err := mem.Append(ctx, friday, append(filler(6, 8), chatmem.Message{Role: chatmem.RoleUser,
		Content: "Which order number did I give for the kettle?"}), chatmem.AppendOptions{User: "kavya"}); err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 256, Scope: chatmem.ScopeUser}
	w, err := mem.Context(ctx, friday, p, chatmem.ContextOptions{Receipt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, m := range w.Messages {
		if m.Metadata[chatmem.MetaKey] == chatmem.MetaRecalled && m.Seq == 0 {
			want[m.Metadata[chatmem.MetaConversation]+"#"+m.Metadata[chatmem.MetaSeq]] = true
		}
	}
	if len(want) == 0 {
		t.Fatal("nothing recalled from another conversation")
	}
	got := map[string]bool{}
	for _, r := range w.Receipt.Recalled {
		if r.Conversation != "" {
			got[r.Conversation+"#"+strconv.FormatInt(r.Seq, 10)] = true
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("receipt's recalled turns %+v miss %s", w.Receipt.Recalled, k)
		}
	}
}

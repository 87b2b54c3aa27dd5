package httpapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

// TestUsers drives the user routes through the Client, against a real
// loopback server, over every store: binding, listing, user facts with
// their history reaching the user's other conversations, tenancy, export
// and erasure.
func TestUsers(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ts := newTestServer(t, newMemory(t, b.open(t), nil), Options{Limits: testLimits})
			testUsers(t, ts)
		})
	}
}

func testUsers(t *testing.T, ts *testServer) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	say := func(id, user, text string) AppendResponse {
		t.Helper()
		res, err := c.Append(ctx, id, []chatmem.Message{{Role: chatmem.RoleUser, Content: text}}, client.AppendOptions{User: user})
		must(t, "Append("+id+")", err)
		return res
	}
	if res := say("mon", "kavya", "hi, I am Kavya"); res.Conversation.User != "kavya" {
		t.Errorf("Append(mon, user kavya).Conversation.User = %q, want kavya", res.Conversation.User)
	}
	say("fri", "kavya", "about my order")
	say("other", "ravi", "hello")
	say("mon", "", "no user named: fine")
	_, err := c.Append(ctx, "mon", []chatmem.Message{{Role: chatmem.RoleUser, Content: "x"}}, client.AppendOptions{User: "ravi"})
	wantAPIError(t, "Append(mon, user ravi)", err, 409, "conflict")
	_, err = c.Append(ctx, "mon", []chatmem.Message{{Role: chatmem.RoleUser, Content: "x"}}, client.AppendOptions{User: "a b"})
	wantAPIError(t, "Append(user a b)", err, 400, "invalid_request")
	if conv, err := c.Conversation(ctx, "mon"); err != nil || conv.User != "kavya" || conv.LastSeq != 2 {
		t.Errorf("Conversation(mon) = %q at %d, %v; want kavya at 2", conv.User, conv.LastSeq, err)
	}
	page, err := c.UserConversations(ctx, "kavya", "", 0)
	must(t, "UserConversations", err)
	var ids []string
	for _, conv := range page.Conversations {
		ids = append(ids, conv.ID)
	}
	if !slices.Equal(ids, []string{"fri", "mon"}) {
		t.Errorf("UserConversations(kavya) = %v, want [fri mon]", ids)
	}

	_, err = c.PatchUserFacts(ctx, "kavya", []FactInput{{Key: "name", Value: "Kavya"}, {Key: "language", Value: "hi"}})
	must(t, "PatchUserFacts", err)
	_, err = c.PatchFacts(ctx, "fri", []FactInput{{Key: "language", Value: "en"}, {Key: "order_id", Value: "A-1"}})
	must(t, "PatchFacts(fri)", err)
	w, err := c.Context(ctx, "fri", client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 500, Facts: true})
	must(t, "Context(fri, facts)", err)
	var seen []string
	for _, f := range w.Facts {
		seen = append(seen, f.Key+"="+f.Value+"@"+f.Scope)
	}
	if want := []string{"language=en@conversation", "name=Kavya@user", "order_id=A-1@conversation"}; !slices.Equal(seen, want) {
		t.Errorf("Context(fri).Facts = %v, want %v", seen, want)
	}
	if len(w.Messages) == 0 || !strings.Contains(w.Messages[0].Content, "name=Kavya") || w.Parts.Facts == 0 {
		t.Errorf("Context(fri) messages %v parts %+v: want the facts pinned first and counted", w.Messages, w.Parts)
	}

	_, err = c.PatchUserFacts(ctx, "kavya", []FactInput{{Key: "language", Value: "es"}})
	must(t, "PatchUserFacts(language es)", err)
	hist, err := c.UserFactHistory(ctx, "kavya", "")
	must(t, "UserFacts(history)", err)
	var values []string
	for _, f := range hist {
		values = append(values, f.Key+"="+f.Value)
	}
	if want := []string{"language=hi", "name=Kavya", "language=es"}; !slices.Equal(values, want) {
		t.Errorf("UserFacts(history) = %v, want %v", values, want)
	} else if hist[0].ValidTo.IsZero() || hist[0].SupersededBy == nil || !hist[2].ValidTo.IsZero() {
		t.Errorf("UserFacts(history)[0] = %+v: want valid_to and superseded_by set, and none on the current value", hist[0])
	}
	if h, err := c.FactHistory(ctx, "fri", ""); err != nil || len(h) != 2 {
		t.Errorf("FactHistory(fri) = %v, %v; want 2 values", h, err)
	}
	facts, err := c.PutUserFacts(ctx, "kavya", []FactInput{{Key: "name", Value: "Kavya R"}})
	if err != nil || len(facts) != 1 || facts[0].Value != "Kavya R" || facts[0].Confidence != 1 || facts[0].SetBy != "app" {
		t.Errorf("PutUserFacts = %v, %v; want name only", facts, err)
	}
	wantAPIError(t, "DeleteUserFact(language)", c.DeleteUserFact(ctx, "kavya", "language"), 404, "not_found")

	// Another tenant's user of the same ID is another user.
	g := ts.client(globexKey)
	if facts, err := g.UserFacts(ctx, "kavya"); err != nil || len(facts) != 0 {
		t.Errorf("globex UserFacts(kavya) = %v, %v; want none", facts, err)
	}
	if page, err := g.UserConversations(ctx, "kavya", "", 0); err != nil || len(page.Conversations) != 0 {
		t.Errorf("globex UserConversations(kavya) = %v, %v; want none", page.Conversations, err)
	}
	if n, err := g.DeleteUser(ctx, "kavya"); err != nil || n != 0 {
		t.Errorf("globex DeleteUser(kavya) = %d, %v; want 0", n, err)
	}

	lines, err := c.ExportUser(ctx, "kavya")
	must(t, "ExportUser", err)
	if len(lines) != 3 || lines[0].Type != "user" || len(lines[0].Facts) != 2 ||
		lines[1].Conversation == nil || lines[1].Conversation.ID != "fri" || len(lines[1].Messages) != 1 || len(lines[1].Facts) != 2 ||
		lines[2].Conversation == nil || lines[2].Conversation.ID != "mon" || len(lines[2].Messages) != 2 {
		t.Errorf("ExportUser = %+v, want the user's facts, then fri and mon with their messages", lines)
	}

	if n, err := c.DeleteUser(ctx, "kavya"); err != nil || n != 2 {
		t.Errorf("DeleteUser(kavya) = %d, %v; want 2", n, err)
	}
	_, err = c.Conversation(ctx, "mon")
	wantAPIError(t, "Conversation(mon) after DeleteUser", err, 404, "not_found")
	if facts, err := c.UserFactHistory(ctx, "kavya", ""); err != nil || len(facts) != 0 {
		t.Errorf("UserFacts after DeleteUser = %v, %v; want none", facts, err)
	}
	if n, err := c.DeleteUser(ctx, "kavya"); err != nil || n != 0 {
		t.Errorf("DeleteUser(again) = %d, %v; want 0", n, err)
	}
	if _, err := c.Conversation(ctx, "other"); err != nil {
		t.Errorf("Conversation(other) after DeleteUser(kavya): %v", err)
	}
	_, err = c.UserFacts(ctx, "bad*id")
	wantAPIError(t, "UserFacts(bad*id)", err, 400, "invalid_request")
	_, err = c.UserConversations(ctx, "bad*id", "", 0)
	wantAPIError(t, "UserConversations(bad*id)", err, 400, "invalid_request")
}

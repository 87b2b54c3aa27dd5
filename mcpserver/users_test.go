package mcpserver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/mcpserver"
)

// hello is a one-message append_messages argument, of user if not empty.
func hello(conv, user string) map[string]any {
	args := map[string]any{"conversation": conv, "messages": []any{map[string]any{"role": "user", "content": "hello again"}}}
	if user != "" {
		args["user"] = user
	}
	return args
}

// factsByKey is "key=value/scope" for each fact, in order.
func factsByKey(fs []mcpserver.Fact) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Key + "=" + f.Value + "/" + f.Scope
	}
	return out
}

func conversationIDs(l mcpserver.ListOutput) []string {
	out := []string{}
	for _, c := range l.Conversations {
		out = append(out, c.ID)
	}
	return out
}

// TestUsers: append_messages binds a new conversation to its user and
// refuses another; a user's facts, set once, are seen from each of the
// user's conversations, beside the conversation's own; list_conversations
// lists a user's conversations.
func TestUsers(t *testing.T) {
	mem := newMemory(t)
	cs := connectInMemory(t, mem, "acme")

	args := seedArgs("kavya-1")
	args["user"] = "u-kavya"
	var app mcpserver.AppendOutput
	res := mustOK(t, cs, "append_messages", args, &app)
	if app.User != "u-kavya" || app.LastSeq != 5 {
		t.Fatalf("append_messages with user = %+v, want user u-kavya, 5 messages", app)
	}
	if got := text(res); !strings.Contains(got, "kavya-1 (user u-kavya)") {
		t.Errorf("append_messages text = %q, want it to name the user", got)
	}
	// Later appends may repeat the user or leave it out.
	mustOK(t, cs, "append_messages", hello("kavya-1", "u-kavya"), &app)
	mustOK(t, cs, "append_messages", hello("kavya-1", ""), &app)
	if app.User != "u-kavya" || app.LastSeq != 7 {
		t.Errorf("append_messages without user to a bound conversation = %+v, want user u-kavya, seq 7", app)
	}
	mustOK(t, cs, "append_messages", hello("anon-1", ""), nil)

	// Another user, or a user for a conversation created without one, is
	// refused and writes nothing.
	before := state(t, mem, "acme", "u-other")
	mustFail(t, cs, "append_messages", hello("kavya-1", "u-other"), `conversation "kavya-1" belongs to user "u-kavya", not "u-other"`)
	mustFail(t, cs, "append_messages", hello("anon-1", "u-other"), `conversation "anon-1" belongs to no user, not "u-other"`)
	if after := state(t, mem, "acme", "u-other"); after != before {
		t.Fatalf("a refused user changed the store:\n%s\nwant\n%s", after, before)
	}

	// A user fact set once is seen from another conversation of the user,
	// beside that conversation's own; the conversation's wins on a key.
	var set mcpserver.SetFactOutput
	res = mustOK(t, cs, "set_fact", map[string]any{"user": "u-kavya", "key": "name", "value": "Kavya"}, &set)
	if set.User != "u-kavya" || set.Conversation != "" || set.Fact.Scope != chatmem.ScopeUser || set.Fact.Value != "Kavya" || set.Fact.Time.IsZero() {
		t.Errorf("set_fact(user) = %+v", set)
	}
	if got := text(res); !strings.Contains(got, "user u-kavya") {
		t.Errorf("set_fact(user) text = %q", got)
	}
	mustOK(t, cs, "set_fact", map[string]any{"user": "u-kavya", "key": "language", "value": "Tamil"}, nil)
	mustOK(t, cs, "append_messages", hello("kavya-2", "u-kavya"), nil)
	set = mcpserver.SetFactOutput{}
	mustOK(t, cs, "set_fact", map[string]any{"conversation": "kavya-2", "key": "order_id", "value": "SE-20001"}, &set)
	if set.Conversation != "kavya-2" || set.User != "" || set.Fact.Scope != chatmem.ScopeConversation {
		t.Errorf("set_fact(conversation) = %+v", set)
	}
	mustOK(t, cs, "set_fact", map[string]any{"conversation": "kavya-2", "key": "language", "value": "English"}, nil)

	var facts mcpserver.FactsOutput
	res = mustOK(t, cs, "get_facts", map[string]any{"conversation": "kavya-2"}, &facts)
	want := []string{"language=English/conversation", "name=Kavya/user", "order_id=SE-20001/conversation"}
	if got := factsByKey(facts.Facts); !slices.Equal(got, want) || facts.Conversation != "kavya-2" || facts.User != "" {
		t.Errorf("get_facts(kavya-2) = %v (%+v), want %v", got, facts, want)
	}
	if got := text(res); !strings.Contains(got, "name: Kavya (set by app; the user's)") {
		t.Errorf("get_facts(kavya-2) text = %q, want the user's fact marked", got)
	}
	mustOK(t, cs, "get_facts", map[string]any{"conversation": "kavya-1"}, &facts)
	want = []string{"language=Tamil/user", "name=Kavya/user"}
	if got := factsByKey(facts.Facts); !slices.Equal(got, want) {
		t.Errorf("get_facts(kavya-1) = %v, want %v", got, want)
	}
	mustOK(t, cs, "get_facts", map[string]any{"conversation": "anon-1"}, &facts)
	if len(facts.Facts) != 0 {
		t.Errorf("get_facts(anon-1) = %v, want none (no user)", facts.Facts)
	}
	facts = mcpserver.FactsOutput{}
	mustOK(t, cs, "get_facts", map[string]any{"user": "u-kavya"}, &facts)
	want = []string{"language=Tamil/user", "name=Kavya/user"}
	if got := factsByKey(facts.Facts); !slices.Equal(got, want) || facts.User != "u-kavya" || facts.Conversation != "" {
		t.Errorf("get_facts(user) = %v (%+v), want %v", got, facts, want)
	}
	// get_context sends the same facts get_facts shows.
	var w mcpserver.ContextOutput
	mustOK(t, cs, "get_context", map[string]any{"conversation": "kavya-2", "facts": true}, &w)
	if got := factsByKey(w.Facts); !slices.Equal(got, []string{"language=English/conversation", "name=Kavya/user", "order_id=SE-20001/conversation"}) {
		t.Errorf("get_context(kavya-2, facts) facts = %v", got)
	}

	// list_conversations by user.
	var list mcpserver.ListOutput
	res = mustOK(t, cs, "list_conversations", map[string]any{"user": "u-kavya"}, &list)
	if got := conversationIDs(list); !slices.Equal(got, []string{"kavya-1", "kavya-2"}) || list.Conversations[0].User != "u-kavya" {
		t.Errorf("list_conversations(user) = %+v, want kavya-1 and kavya-2", list)
	}
	if got := text(res); !strings.HasPrefix(got, "2 conversation(s) of user u-kavya.") {
		t.Errorf("list_conversations(user) text = %q", got)
	}
	mustOK(t, cs, "list_conversations", map[string]any{"user": "u-kavya", "limit": 1}, &list)
	if got := conversationIDs(list); !slices.Equal(got, []string{"kavya-1"}) || list.NextCursor != "kavya-1" {
		t.Errorf("list_conversations(user, limit 1) = %+v", list)
	}
	cursor := list.NextCursor
	list = mcpserver.ListOutput{}
	mustOK(t, cs, "list_conversations", map[string]any{"user": "u-kavya", "cursor": cursor}, &list)
	if got := conversationIDs(list); !slices.Equal(got, []string{"kavya-2"}) || list.NextCursor != "" {
		t.Errorf("list_conversations(user, second page) = %+v", list)
	}
	mustOK(t, cs, "list_conversations", map[string]any{"user": "u-nobody"}, &list)
	if len(list.Conversations) != 0 {
		t.Errorf("list_conversations(unknown user) = %+v, want none", list)
	}
	mustOK(t, cs, "list_conversations", map[string]any{}, &list)
	if got := conversationIDs(list); !slices.Equal(got, []string{"anon-1", "kavya-1", "kavya-2"}) {
		t.Errorf("list_conversations = %v, want every conversation", got)
	}

	// delete_fact of the user: gone from each of their conversations.
	var df mcpserver.DeleteFactOutput
	mustOK(t, cs, "delete_fact", map[string]any{"user": "u-kavya", "key": "name"}, &df)
	if df.User != "u-kavya" || df.Conversation != "" || !df.Deleted {
		t.Errorf("delete_fact(user) = %+v", df)
	}
	mustFail(t, cs, "delete_fact", map[string]any{"user": "u-kavya", "key": "name"}, `user "u-kavya" has no fact "name"`)
	// A conversation's delete_fact does not reach its user's facts.
	mustFail(t, cs, "delete_fact", map[string]any{"conversation": "kavya-1", "key": "language"}, `conversation "kavya-1" has no fact "language"`)
	mustOK(t, cs, "get_facts", map[string]any{"conversation": "kavya-1"}, &facts)
	if got := factsByKey(facts.Facts); !slices.Equal(got, []string{"language=Tamil/user"}) {
		t.Errorf("get_facts(kavya-1) after delete_fact(user, name) = %v", got)
	}
}

// TestUserBadInput: the fact tools take exactly one of conversation and
// user, and a user ID follows the conversation ID rules; each bad call is a
// tool error that writes nothing.
func TestUserBadInput(t *testing.T) {
	mem := newMemory(t)
	cs := connectInMemory(t, mem, "acme")
	mustOK(t, cs, "append_messages", hello("c1", "u1"), nil)
	mustOK(t, cs, "set_fact", map[string]any{"user": "u1", "key": "name", "value": "Kavya"}, nil)
	before := state(t, mem, "acme", "u1", "u2")

	cases := []struct {
		tool string
		args any
		want string
	}{
		{"get_facts", map[string]any{}, "give conversation or user"},
		{"get_facts", map[string]any{"conversation": "c1", "user": "u1"}, "not both"},
		{"get_facts", map[string]any{"user": "../u1"}, "user"},
		{"set_fact", map[string]any{"key": "name", "value": "x"}, "give conversation or user"},
		{"set_fact", map[string]any{"conversation": "c1", "user": "u1", "key": "name", "value": "x"}, "not both"},
		{"set_fact", map[string]any{"user": "u 1", "key": "name", "value": "x"}, "user"},
		{"set_fact", map[string]any{"user": "u2", "key": "Name!", "value": "x"}, "fact key"},
		{"set_fact", map[string]any{"user": "u2", "key": "name", "value": ""}, "empty value"},
		{"delete_fact", map[string]any{"key": "name"}, "give conversation or user"},
		{"delete_fact", map[string]any{"conversation": "c1", "user": "u1", "key": "name"}, "not both"},
		{"delete_fact", map[string]any{"user": "u2", "key": "name"}, `user "u2" has no fact "name"`},
		{"append_messages", hello("c2", "-u"), "user"},
		{"append_messages", hello("c1", "u2"), `belongs to user "u1"`},
		{"list_conversations", map[string]any{"user": "a/b"}, "user"},
	}
	for _, c := range cases {
		mustFail(t, cs, c.tool, c.args, c.want)
		if after := state(t, mem, "acme", "u1", "u2"); after != before {
			t.Fatalf("%s(%v) failed but changed the store:\n%s\nwant\n%s", c.tool, c.args, after, before)
		}
	}
}

// TestUserTenantIsolation: over HTTP, a user ID of one tenant is another
// user in another tenant: globex sees none of acme's user's conversations
// or facts, changes none, and its own user of the same ID is its own.
func TestUserTenantIsolation(t *testing.T) {
	env := newHTTPEnv(t, httpapi.Options{})
	acme := env.connect(t, acmeKey)
	globex := env.connect(t, globexKey)
	mustOK(t, acme, "append_messages", hello("c1", "u1"), nil)
	mustOK(t, acme, "set_fact", map[string]any{"user": "u1", "key": "name", "value": "Kavya"}, nil)
	before := state(t, env.mem, "acme", "u1")

	var list mcpserver.ListOutput
	mustOK(t, globex, "list_conversations", map[string]any{"user": "u1"}, &list)
	if len(list.Conversations) != 0 {
		t.Errorf("globex list_conversations(u1) = %+v, want none", list.Conversations)
	}
	var facts mcpserver.FactsOutput
	mustOK(t, globex, "get_facts", map[string]any{"user": "u1"}, &facts)
	if len(facts.Facts) != 0 {
		t.Errorf("globex get_facts(u1) = %+v, want none", facts.Facts)
	}
	mustFail(t, globex, "delete_fact", map[string]any{"user": "u1", "key": "name"}, "no fact")
	mustFail(t, globex, "get_facts", map[string]any{"conversation": "c1"}, "does not exist")

	// Globex's u1 is its own: its conversation c1 and its facts.
	var app mcpserver.AppendOutput
	mustOK(t, globex, "append_messages", hello("c1", "u1"), &app)
	if app.LastSeq != 1 || app.User != "u1" {
		t.Errorf("globex append to its own c1 of u1 = %+v", app)
	}
	mustOK(t, globex, "set_fact", map[string]any{"user": "u1", "key": "name", "value": "Mallory"}, nil)
	mustOK(t, globex, "get_facts", map[string]any{"conversation": "c1"}, &facts)
	if got := factsByKey(facts.Facts); !slices.Equal(got, []string{"name=Mallory/user"}) {
		t.Errorf("globex get_facts(c1) = %v, want its own user's fact", got)
	}
	if after := state(t, env.mem, "acme", "u1"); after != before {
		t.Errorf("globex's calls changed acme's data:\n%s\nwant\n%s", after, before)
	}
	mustOK(t, acme, "get_facts", map[string]any{"conversation": "c1"}, &facts)
	if got := factsByKey(facts.Facts); !slices.Equal(got, []string{"name=Kavya/user"}) {
		t.Errorf("acme get_facts(c1) = %v, want Kavya", got)
	}
}

// TestUserToolSchemas: the inputs of the fact tools and search_memory
// require neither conversation nor user (the tool checks that exactly one
// is given).
func TestUserToolSchemas(t *testing.T) {
	cs := connectInMemory(t, newMemory(t), "acme")
	required := map[string][]string{}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		schema, ok := tool.InputSchema.(map[string]any)
		if !ok {
			t.Fatalf("%s: input schema %T", tool.Name, tool.InputSchema)
		}
		props, _ := schema["properties"].(map[string]any)
		if tool.Name != "get_context" && tool.Name != "delete_conversation" && props["user"] == nil {
			t.Errorf("%s: no user input", tool.Name)
		}
		req, _ := schema["required"].([]any)
		for _, r := range req {
			required[tool.Name] = append(required[tool.Name], r.(string))
		}
	}
	for _, tool := range []string{"get_facts", "set_fact", "delete_fact", "search_memory"} {
		if slices.Contains(required[tool], "conversation") || slices.Contains(required[tool], "user") {
			t.Errorf("%s requires %v", tool, required[tool])
		}
	}
}

// TestSearchUser: search_memory with user searches all of the user's
// conversations, each hit naming its own, and nothing of another user's;
// get_context with scope user recalls the user's other conversation into
// a new one; conversation and user together is a tool error.
func TestSearchUser(t *testing.T) {
	mem := newMemory(t)
	cs := connectInMemory(t, mem, "acme")
	say := func(conv, user string, texts ...string) {
		t.Helper()
		var msgs []any
		for i, s := range texts {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			msgs = append(msgs, map[string]any{"role": role, "content": s})
		}
		var out mcpserver.AppendOutput
		mustOK(t, cs, "append_messages", map[string]any{"conversation": conv, "user": user, "messages": msgs}, &out)
	}
	var talk []string
	for i := range 16 {
		talk = append(talk, []string{"nice weather for a walk today", "the garden looks lovely in the rain", "coffee and a book this weekend"}[i%3])
	}
	say("mon", "kavya", append([]string{"My order is SE-10423, a blue kettle.", "Noted: order SE-10423."}, talk...)...)
	say("tue", "kavya", "Also the kettle lid is cracked.", "Sorry about the kettle lid.")
	say("other", "ravi", "My kettle order is ZZ-999.", "Noted: ZZ-999.")

	var found mcpserver.SearchOutput
	res := mustOK(t, cs, "search_memory", map[string]any{"user": "kavya", "query": "kettle order SE-10423"}, &found)
	convs := map[string]bool{}
	for _, h := range found.Hits {
		convs[h.Conversation] = true
		if strings.Contains(h.Text, "ZZ-999") {
			t.Errorf("search_memory(user kavya) found ravi's %q", h.Text)
		}
	}
	if !convs["mon"] || !convs["tue"] || len(convs) != 2 || !strings.Contains(found.Hits[0].Text, "SE-10423") {
		t.Errorf("search_memory(user kavya) = %+v, want hits of mon (the order first) and tue", found.Hits)
	}
	if got := text(res); !strings.Contains(got, "user kavya") || !strings.Contains(got, "mon #1") {
		t.Errorf("search_memory(user kavya) text = %q, want it to name the user and each hit's conversation", got)
	}
	mustFail(t, cs, "search_memory", map[string]any{"user": "kavya", "conversation": "mon", "query": "kettle"}, "not both")

	say("fri", "kavya", "What was my order number for the kettle?")
	var w mcpserver.ContextOutput
	mustOK(t, cs, "get_context", map[string]any{"conversation": "fri", "policy": "recall", "budget": 120, "scope": "user"}, &w)
	var sent []string
	for _, m := range w.Messages {
		sent = append(sent, m.Content)
	}
	if all := strings.Join(sent, "\n"); !strings.Contains(all, "SE-10423") || !strings.Contains(all, "[mon #") {
		t.Errorf("get_context(fri, recall, scope user) = %q, want mon's order recalled", sent)
	}
	mustFail(t, cs, "get_context", map[string]any{"conversation": "fri", "scope": "user"}, "scope")
}

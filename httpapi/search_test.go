package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
)

// TestSearchRoutes drives POST /v1/conversations/{id}/search, POST
// /v1/users/{user}/search and GET /v1/users through the Client, on every
// store: the hits are the library's (same order, scores and texts), each
// names its conversation, the tenant bounds them, and bad input is a 400.
func TestSearchRoutes(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			mem := newMemory(t, b.open(t), nil)
			ts := newTestServer(t, mem, Options{Limits: testLimits})
			testSearchRoutes(t, ts, mem)
		})
	}
}

func testSearchRoutes(t *testing.T, ts *testServer, mem *chatmem.Memory) {
	ctx := t.Context()
	c := ts.client(acmeKey)
	say := func(c *client.Client, id, user string, texts ...string) {
		t.Helper()
		msgs := make([]chatmem.Message, len(texts))
		for i, text := range texts {
			msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: text}
			if i%2 == 1 {
				msgs[i].Role = chatmem.RoleAssistant
			}
		}
		_, err := c.Append(ctx, id, msgs, client.AppendOptions{User: user})
		must(t, "Append("+id+")", err)
	}
	say(c, "mon", "kavya", "Hi, I'm Kavya. My order SE-10423 hasn't arrived.", "Sorry Kavya! It is out for delivery.", "Do you have running socks?")
	say(c, "fri", "kavya", "My order SE-10423 came, but the socks are too small.", "We can exchange them.")
	say(c, "lone", "", "A question about an order with no user.")
	say(ts.client(globexKey), "mon", "kavya", "globex's own order SE-10423")

	res, err := c.Search(ctx, "mon", "order SE-10423", 0)
	must(t, "Search(mon)", err)
	want, err := mem.Search(ctx, chatmem.Key{Tenant: "acme", ID: "mon"}, "order SE-10423", chatmem.DefaultSearchLimit)
	must(t, "Memory.Search(mon)", err)
	if len(res.Hits) == 0 || len(res.Hits) != len(want) {
		t.Fatalf("Search(mon) = %d hits, want %d (the library's), at least 1", len(res.Hits), len(want))
	}
	for i, h := range res.Hits {
		w := want[i]
		if h.Conversation != "mon" || h.Seq != w.Message.Seq || h.Text != w.Message.Content || h.Score != w.Score || h.Role != "user" || h.Time.IsZero() {
			t.Errorf("Search(mon) hit %d = %+v, want conversation mon, seq %d, score %v, text %q, a time", i, h, w.Message.Seq, w.Score, w.Message.Content)
		}
	}

	// A user's search reaches both of the user's conversations, and
	// neither another tenant's nor a conversation of no user.
	for _, search := range []struct {
		name string
		do   func() (SearchResponse, error)
	}{
		{"SearchUser(kavya)", func() (SearchResponse, error) { return c.SearchUser(ctx, "kavya", "order SE-10423", 5) }},
		{"scope user from fri", func() (SearchResponse, error) {
			r := ts.raw(t, "POST", convPath("fri", "search"), acmeKey, nil, `{"query":"order SE-10423","limit":5,"scope":"user"}`)
			var out SearchResponse
			if r.status != http.StatusOK {
				return out, r.apiError()
			}
			return out, json.Unmarshal(r.body, &out)
		}},
	} {
		res, err := search.do()
		must(t, search.name, err)
		var convs []string
		for _, h := range res.Hits {
			convs = append(convs, h.Conversation)
			if strings.Contains(h.Text, "globex") || strings.Contains(h.Text, "no user") {
				t.Errorf("%s found %q, which is not kavya's in tenant acme", search.name, h.Text)
			}
		}
		slices.Sort(convs)
		if !slices.Equal(slices.Compact(convs), []string{"fri", "mon"}) {
			t.Errorf("%s hit conversations %v, want fri and mon", search.name, convs)
		}
	}
	if res, err := c.SearchUser(ctx, "nobody", "order", 0); err != nil || len(res.Hits) != 0 {
		t.Errorf("SearchUser(nobody) = %d hits, %v; want none, no error", len(res.Hits), err)
	}

	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"empty query", convPath("mon", "search"), `{"query":"  "}`, 400},
		{"limit over", convPath("mon", "search"), `{"query":"order","limit":101}`, 400},
		{"negative limit", convPath("mon", "search"), `{"query":"order","limit":-1}`, 400},
		{"unknown field", convPath("mon", "search"), `{"query":"order","k":3}`, 400},
		{"bad scope", convPath("mon", "search"), `{"query":"order","scope":"tenant"}`, 400},
		{"scope user without a user", convPath("lone", "search"), `{"query":"order","scope":"user"}`, 400},
		{"scope on the user route", userPath("kavya", "search"), `{"query":"order","scope":"conversation"}`, 400},
		{"missing conversation", convPath("nope", "search"), `{"query":"order"}`, 404},
		{"bad user", "/v1/users/a%20b/search", `{"query":"order"}`, 400},
	} {
		r := ts.raw(t, "POST", tc.path, acmeKey, map[string]string{"Content-Type": "application/json"}, tc.body)
		if r.status != tc.status {
			t.Errorf("%s: POST %s %s = %d %s, want %d", tc.name, tc.path, tc.body, r.status, r.body, tc.status)
		}
	}

	// GET /v1/users pages the tenant's users in byte order.
	must(t, "SetUserFacts", func() error {
		_, err := c.SetUserFacts(ctx, "anya", []FactInput{{Key: "name", Value: "Anya"}})
		return err
	}())
	first, err := c.Users(ctx, "", 1)
	must(t, "Users(limit 1)", err)
	rest, err := c.Users(ctx, first.Next, 0)
	must(t, "Users(after)", err)
	if got := append(first.Users, rest.Users...); !slices.Equal(got, []string{"anya", "kavya"}) || first.Next == "" || rest.Next != "" {
		t.Errorf("Users pages = %v (next %q), %v (next %q); want [anya] then [kavya], the last without next", first.Users, first.Next, rest.Users, rest.Next)
	}
	if g, err := ts.client(globexKey).Users(ctx, "", 0); err != nil || !slices.Equal(g.Users, []string{"kavya"}) {
		t.Errorf("globex Users = %v, %v; want [kavya] (its own)", g.Users, err)
	}
	if r := ts.raw(t, "GET", "/v1/users?limit=0", acmeKey, nil, ""); r.status != 400 {
		t.Errorf("GET /v1/users?limit=0 = %d, want 400", r.status)
	}
}

// TestContextDefaults checks that a context read leaving parameters out
// gets the defaults every surface shares: chatmem.DefaultPolicy at
// DefaultBudget, and DefaultTurns for last_turns.
func TestContextDefaults(t *testing.T) {
	mem := newMemory(t, backends[0].open(t), nil)
	ts := newTestServer(t, mem, Options{Limits: testLimits})
	c := ts.client(acmeKey)
	ctx := t.Context()
	var msgs []chatmem.Message
	for i := range 30 {
		role := chatmem.RoleUser
		if i%2 == 1 {
			role = chatmem.RoleAssistant
		}
		msgs = append(msgs, chatmem.Message{Role: role, Content: strings.Repeat("word ", 200)})
	}
	for i := 0; i < len(msgs); i += 10 {
		_, err := c.Append(ctx, "long", msgs[i:i+10], client.AppendOptions{})
		must(t, "Append", err)
	}
	for _, tc := range []struct{ got, want string }{
		{"", "?policy=token_budget&budget=4000"},
		{"?facts=false", "?policy=token_budget&budget=4000"},
		{"?policy=recall", "?policy=recall&budget=4000"},
		{"?policy=last_turns", "?policy=last_turns&turns=10"},
	} {
		got := ts.raw(t, "GET", convPath("long", "context")+tc.got, acmeKey, nil, "")
		want := ts.raw(t, "GET", convPath("long", "context")+tc.want, acmeKey, nil, "")
		if got.status != 200 || want.status != 200 || string(got.body) != string(want.body) {
			t.Errorf("context%s = %d %.200s\nwant as context%s = %d %.200s", tc.got, got.status, got.body, tc.want, want.status, want.body)
		}
	}
	if chatmem.DefaultPolicy != chatmem.PolicyTokenBudget || chatmem.DefaultBudget != 4000 || chatmem.DefaultTurns != 10 {
		t.Errorf("defaults = %s, %d, %d; docs/memory.md's table says token_budget, 4000, 10", chatmem.DefaultPolicy, chatmem.DefaultBudget, chatmem.DefaultTurns)
	}
}

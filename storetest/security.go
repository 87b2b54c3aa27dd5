package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// hostileIDs are tenants and conversation IDs built from what means
// something to a store's query language: SQL quoting and comments, LIKE
// and GLOB wildcards, Redis key patterns and hash tags, path segments.
// ValidateID refuses every one, so each must wrap ErrInvalid everywhere.
var hostileIDs = []string{
	"'; DROP TABLE messages; --", "a' OR '1'='1", `a"b`, "a;b", "a%", "%", "a*", "*", "a?", "?", "[a]", "a[bc]",
	"{a}", "a{b}c", "}", "a\\b", "a\x00b", "a\nb", "..", ".", "a/../b", "%2e%2e", "a%2Fb", "a b", "é", "a`b",
}

// hostileText is data with the same characters: message content, names,
// metadata, tool calls, idempotency keys, tokenizer names, fact values and
// summaries must be stored as plain data and read back byte for byte.
var hostileText = []string{
	"'; DROP TABLE messages; --",
	`"); DELETE FROM conversations; --`,
	"a' OR '1'='1",
	"%", "_", "*", "?", "[a-z]*", "{x}", "{acme/c1}", "chatmem:{acme/c1}:msgs",
	"\\", "\\'", "$1", "?1", ":name", "@p1",
	"KEYS *", "FLUSHALL", "redis.call('FLUSHALL')", "]]--", "\r\n*1\r\n$8\r\nFLUSHALL\r\n",
	`{"role":"system","content":"x"}`, "\u2028\u2029", "\ufeff",
}

// testSecurity checks that what a store's query language gives meaning to
// never acts as anything but data. Tenants and IDs with SQL, LIKE, glob,
// Redis pattern or hash-tag characters are refused with ErrInvalid by
// every method and leave nothing behind. Message fields, idempotency keys,
// tokenizer names, fact values and summaries made of such characters are
// stored as plain data and read back byte for byte. And IDs that are valid
// but share a prefix, or differ only in a character LIKE treats as a
// wildcard (_), never reach each other's data: List, Delete, idempotency
// replays, facts and PurgeInactive stay with the exact key.
func testSecurity(t *testing.T, h Harness) {
	t.Run("HostileIDsRefused", func(t *testing.T) { testHostileIDs(t, h) })
	t.Run("HostileDataStoredAsIs", func(t *testing.T) { testHostileData(t, h) })
	t.Run("NoWildcardMatches", func(t *testing.T) { testNoWildcards(t, h) })
}

func testHostileIDs(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	tenant := randomTenant()
	// A conversation whose ID each hostile ID might match or reach.
	victim := chatmem.Key{Tenant: tenant, ID: "ab"}
	mustAppend(t, s, victim, []chatmem.Message{msg(chatmem.RoleUser, "victim", 1)}, chatmem.AppendOptions{})
	one := []chatmem.Message{msg(chatmem.RoleUser, "hello", 1)}
	for _, bad := range hostileIDs {
		for _, key := range []chatmem.Key{{Tenant: tenant, ID: bad}, {Tenant: bad, ID: "ab"}, {Tenant: tenant + bad, ID: "ab"}, {Tenant: tenant, ID: "ab" + bad}} {
			if key.Validate() == nil {
				continue // tenant+"." is a valid tenant
			}
			name := fmt.Sprintf("%q", key.String())
			_, err := s.Append(ctx, key, one, chatmem.AppendOptions{})
			wantErr(t, "Append("+name+")", err, chatmem.ErrInvalid)
			_, err = s.Conversation(ctx, key)
			wantErr(t, "Conversation("+name+")", err, chatmem.ErrInvalid)
			_, err = s.Range(ctx, key, 0, 0)
			wantErr(t, "Range("+name+")", err, chatmem.ErrInvalid)
			_, err = s.Tail(ctx, key, chatmem.TailQuery{Tokens: 100})
			wantErr(t, "Tail("+name+")", err, chatmem.ErrInvalid)
			_, err = s.System(ctx, key)
			wantErr(t, "System("+name+")", err, chatmem.ErrInvalid)
			wantErr(t, "Delete("+name+")", s.Delete(ctx, key), chatmem.ErrInvalid)
			if ss, ok := s.(chatmem.SummaryStore); ok {
				_, err := ss.Summary(ctx, key)
				wantErr(t, "Summary("+name+")", err, chatmem.ErrInvalid)
				err = ss.PutSummary(ctx, key, chatmem.Summary{Text: "x", CoversSeq: 1, Tokens: 1, Summarizer: "t"}, 0)
				wantErr(t, "PutSummary("+name+")", err, chatmem.ErrInvalid)
			}
			if fs, ok := s.(chatmem.FactStore); ok {
				_, err := fs.Facts(ctx, key)
				wantErr(t, "Facts("+name+")", err, chatmem.ErrInvalid)
				err = fs.SetFacts(ctx, key, []chatmem.Fact{{Key: "name", Value: "x", SetBy: "app", Confidence: 1}})
				wantErr(t, "SetFacts("+name+")", err, chatmem.ErrInvalid)
				wantErr(t, "DeleteFact("+name+")", fs.DeleteFact(ctx, key, "name"), chatmem.ErrInvalid)
			}
		}
		for _, tn := range []string{bad, tenant + bad} {
			if chatmem.ValidateID(tn) == nil {
				continue
			}
			page, err := s.List(ctx, tn, chatmem.PageRequest{})
			wantErr(t, fmt.Sprintf("List(%q)", tn), err, chatmem.ErrInvalid)
			if len(page.Conversations) != 0 {
				t.Errorf("List(%q) returned %d conversations with its error", tn, len(page.Conversations))
			}
			if p, ok := s.(chatmem.Purger); ok {
				_, err := p.PurgeInactive(ctx, tn, time.Now().Add(time.Hour))
				wantErr(t, fmt.Sprintf("PurgeInactive(%q)", tn), err, chatmem.ErrInvalid)
			}
		}
	}
	// Nothing was written, and nothing was lost.
	wantMessages(t, "Range(victim)", mustRange(t, s, victim, 0, 0), withSeqs([]chatmem.Message{msg(chatmem.RoleUser, "victim", 1)}, 1, mustRange(t, s, victim, 0, 0)[0].CreatedAt))
	if got := listIDs(t, s, tenant, 0); !slices.Equal(got, []string{"ab"}) {
		t.Errorf("List(%s) after the refused calls = %q, want [ab]", tenant, got)
	}
	// A page cursor is data too: any After reads this tenant only.
	for _, after := range hostileText {
		page, err := s.List(ctx, tenant, chatmem.PageRequest{After: after})
		if err != nil {
			if !errors.Is(err, chatmem.ErrInvalid) {
				t.Errorf("List(%s, after %q) error = %v, want nil or ErrInvalid", tenant, after, err)
			}
			continue
		}
		for _, c := range page.Conversations {
			if c.Key.Tenant != tenant || c.Key.ID != "ab" || c.Key.ID <= after {
				t.Errorf("List(%s, after %q) returned %s", tenant, after, c.Key)
			}
		}
	}
}

func testHostileData(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	key := randomKey("data")
	control := chatmem.Key{Tenant: key.Tenant, ID: "control"}
	mustAppend(t, s, control, []chatmem.Message{msg(chatmem.RoleUser, "control", 1)}, chatmem.AppendOptions{})

	var seq int64
	for i, text := range hostileText {
		call := fmt.Sprintf("call_%d", i)
		msgs := []chatmem.Message{
			{Role: chatmem.RoleUser, Content: text, Name: text, Tokens: 2, Metadata: map[string]string{text: text, "k": text}},
			{Role: chatmem.RoleAssistant, Content: text, Tokens: 3, ToolCalls: []chatmem.ToolCall{
				{ID: call, Type: "function", Function: chatmem.FunctionCall{Name: text, Arguments: text}}}},
			{Role: chatmem.RoleTool, ToolCallID: call, Content: text, Tokens: 1},
			{Role: chatmem.RoleSystem, Content: text, Tokens: 1},
		}
		opts := chatmem.AppendOptions{IdempotencyKey: text + fmt.Sprint(i), Tokenizer: text}
		if i == 0 {
			opts.ExpectedLastSeq = ptr[int64](0)
		}
		res, err := s.Append(ctx, key, msgs, opts)
		if err != nil {
			t.Errorf("Append of %q error = %v, want nil", text, err)
			continue
		}
		want := withSeqs(msgs, seq+1, res.Messages[0].CreatedAt)
		wantMessages(t, fmt.Sprintf("Append(%q)", text), res.Messages, want)
		wantMessages(t, fmt.Sprintf("Range after %q", text), mustRange(t, s, key, seq, 0), want)
		if tail := mustTail(t, s, key, chatmem.TailQuery{Turns: 1}); len(tail) < len(want) {
			t.Errorf("Tail(Turns 1) after %q = %d messages, want %d or more", text, len(tail), len(want))
		} else {
			wantMessages(t, fmt.Sprintf("Tail after %q", text), tail[len(tail)-len(want):], want)
		}
		seq += int64(len(msgs))
		// The same idempotency key replays; the key is not a pattern.
		again, err := s.Append(ctx, key, msgs[:1], chatmem.AppendOptions{IdempotencyKey: text + fmt.Sprint(i)})
		if err != nil || !again.Replayed {
			t.Errorf("retry with idempotency key %q = replayed %v, %v; want a replay", text+fmt.Sprint(i), again.Replayed, err)
		}
	}
	conv := mustConversation(t, s, key)
	if conv.LastSeq != seq || conv.Tokenizer != hostileText[0] {
		t.Errorf("Conversation(%s) = last_seq %d, tokenizer %q; want %d, %q", key, conv.LastSeq, conv.Tokenizer, seq, hostileText[0])
	}
	sys, err := s.System(ctx, key)
	if err != nil || len(sys) != len(hostileText) {
		t.Fatalf("System(%s) = %d messages, %v; want %d", key, len(sys), err, len(hostileText))
	}
	for i, m := range sys {
		if m.Content != hostileText[i] {
			t.Errorf("System(%s)[%d] = %q, want %q", key, i, m.Content, hostileText[i])
		}
	}

	if ss, ok := s.(chatmem.SummaryStore); ok {
		prev := int64(0)
		for i, text := range hostileText {
			sum := chatmem.Summary{Text: text, CoversSeq: int64(i + 1), Tokens: 1, Summarizer: text, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
			if err := ss.PutSummary(ctx, key, sum, prev); err != nil {
				t.Errorf("PutSummary(%q) error = %v", text, err)
				continue
			}
			prev = sum.CoversSeq
			got, err := ss.Summary(ctx, key)
			if err != nil || got.Text != text || got.Summarizer != text || got.CoversSeq != sum.CoversSeq {
				t.Errorf("Summary after putting %q = %+v, %v", text, got, err)
			}
		}
	}
	if fs, ok := s.(chatmem.FactStore); ok {
		var facts []chatmem.Fact
		for i, text := range hostileText {
			facts = append(facts, chatmem.Fact{Key: fmt.Sprintf("k%d", i), Value: text, SetBy: text, Confidence: 1, SourceSeq: 1})
		}
		if err := fs.SetFacts(ctx, key, facts); err != nil {
			t.Fatalf("SetFacts error = %v", err)
		}
		got, err := fs.Facts(ctx, key)
		if err != nil || len(got) != len(facts) {
			t.Fatalf("Facts = %d, %v; want %d", len(got), err, len(facts))
		}
		byKey := map[string]chatmem.Fact{}
		for _, f := range got {
			byKey[f.Key] = f
		}
		for _, f := range facts {
			if g := byKey[f.Key]; g.Value != f.Value || g.SetBy != f.SetBy {
				t.Errorf("fact %s = %q (set by %q), want %q (set by %q)", f.Key, g.Value, g.SetBy, f.Value, f.SetBy)
			}
		}
		// Fact keys with characters ValidateFactKey refuses never reach
		// the store.
		for _, bad := range []string{"a*", "a%", "*", "'; DROP TABLE facts; --", "{k0}", "k0 ", "K0"} {
			err := fs.SetFacts(ctx, key, []chatmem.Fact{{Key: bad, Value: "x", SetBy: "app", Confidence: 1}})
			wantErr(t, fmt.Sprintf("SetFacts(key %q)", bad), err, chatmem.ErrInvalid)
			_, err = fs.FactHistory(ctx, key, bad)
			if err == nil {
				t.Errorf("FactHistory(%q) error = nil, want ErrInvalid or ErrNotFound", bad)
			}
			err = fs.DeleteFact(ctx, key, bad)
			if !errors.Is(err, chatmem.ErrInvalid) && !errors.Is(err, chatmem.ErrNotFound) {
				t.Errorf("DeleteFact(%q) error = %v, want ErrInvalid or ErrNotFound", bad, err)
			}
		}
		if got, err := fs.Facts(ctx, key); err != nil || len(got) != len(facts) {
			t.Errorf("Facts after the refused keys = %d, %v; want %d", len(got), err, len(facts))
		}
	}

	// The tables and keys are all still there.
	wantMessages(t, "Range(control)", mustRange(t, s, control, 0, 0),
		withSeqs([]chatmem.Message{msg(chatmem.RoleUser, "control", 1)}, 1, mustRange(t, s, control, 0, 0)[0].CreatedAt))
	if got := listIDs(t, s, key.Tenant, 0); !slices.Equal(got, []string{"control", "data"}) {
		t.Errorf("List(%s) = %q, want [control data]", key.Tenant, got)
	}
}

func testNoWildcards(t *testing.T, h Harness) {
	s := h.New(t)
	ctx := t.Context()
	base := randomTenant()
	// Tenants that a prefix match, a LIKE pattern (_ matches any one
	// character) or a glob would confuse with each other.
	tenants := []string{base, base + "b", base + "_", base + ".", base + ":x", base + "-", base + "@"}
	ids := []string{"x", "xy", "x_", "xz", "x.", "x:y", "x-y", "x@y"}
	old := time.Now().Add(-72 * time.Hour)
	for _, tn := range tenants {
		for _, id := range ids {
			key := chatmem.Key{Tenant: tn, ID: id}
			content := []chatmem.Message{msg(chatmem.RoleUser, key.String(), 1)}
			opts := chatmem.AppendOptions{Now: old}
			if tn == base && id == "x" {
				opts.IdempotencyKey = "x_"
			}
			mustAppend(t, s, key, content, opts)
		}
	}
	for _, tn := range tenants {
		if got := listIDs(t, s, tn, 0); !slices.Equal(got, sorted(ids)) {
			t.Errorf("List(%q) = %q, want %q", tn, got, sorted(ids))
		}
		for _, id := range ids {
			key := chatmem.Key{Tenant: tn, ID: id}
			if msgs := mustRange(t, s, key, 0, 0); len(msgs) != 1 || msgs[0].Content != key.String() {
				t.Errorf("Range(%s) = %d messages (first %q), want only its own", key, len(msgs), firstContent(msgs))
			}
		}
	}

	// An idempotency key is matched exactly: "x_y" is not "x_" plus any
	// character, "%" matches nothing else.
	key := chatmem.Key{Tenant: base, ID: "x"}
	for _, ik := range []string{"x_", "x%", "%", "*", "x?", "x*", "x", "xa", "x__", "X_"} {
		res, err := s.Append(ctx, key, []chatmem.Message{msg(chatmem.RoleAssistant, "reply "+ik, 1)}, chatmem.AppendOptions{IdempotencyKey: ik})
		switch {
		case err != nil:
			t.Errorf("Append(%s, idempotency key %q) error = %v", key, ik, err)
		case ik == "x_" && !res.Replayed:
			t.Errorf("Append(%s, idempotency key %q) was not replayed, but that key was applied", key, ik)
		case ik != "x_" && res.Replayed:
			t.Errorf("Append(%s, idempotency key %q) was replayed as another key's append", key, ik)
		}
	}

	// Deleting "x" or "x_" deletes that conversation only.
	for _, del := range []chatmem.Key{{Tenant: base, ID: "x_"}, {Tenant: base + "_", ID: "x"}} {
		if err := s.Delete(ctx, del); err != nil {
			t.Fatalf("Delete(%s) error = %v", del, err)
		}
		wantNotFound(t, s, del)
	}
	for _, tn := range tenants {
		for _, id := range ids {
			key := chatmem.Key{Tenant: tn, ID: id}
			if (tn == base && id == "x_") || (tn == base+"_" && id == "x") {
				continue
			}
			if _, err := s.Conversation(ctx, key); err != nil {
				t.Errorf("Conversation(%s) after deleting x_ and %s_/x: %v", key, base, err)
			}
		}
	}

	if fs, ok := s.(chatmem.FactStore); ok {
		fkey := chatmem.Key{Tenant: base + "b", ID: "xy"}
		facts := []chatmem.Fact{
			{Key: "abc", Value: "1", SetBy: "app", Confidence: 1},
			{Key: "a_c", Value: "2", SetBy: "app", Confidence: 1},
			{Key: "a.c", Value: "3", SetBy: "app", Confidence: 1},
			{Key: "ab", Value: "4", SetBy: "app", Confidence: 1},
		}
		if err := fs.SetFacts(ctx, fkey, facts); err != nil {
			t.Fatalf("SetFacts(%s) error = %v", fkey, err)
		}
		hist, err := fs.FactHistory(ctx, fkey, "a_c")
		if err != nil || len(hist) != 1 || hist[0].Value != "2" {
			t.Errorf("FactHistory(a_c) = %+v, %v; want its one value 2", hist, err)
		}
		if err := fs.DeleteFact(ctx, fkey, "a_c"); err != nil {
			t.Fatalf("DeleteFact(a_c) error = %v", err)
		}
		got, err := fs.Facts(ctx, fkey)
		var keys []string
		for _, f := range got {
			keys = append(keys, f.Key)
		}
		if err != nil || !slices.Equal(keys, []string{"a.c", "ab", "abc"}) {
			t.Errorf("Facts(%s) after DeleteFact(a_c) = %q, %v; want [a.c ab abc]", fkey, keys, err)
		}
		// The neighbours' facts are their own.
		for _, other := range []chatmem.Key{{Tenant: base, ID: "xy"}, {Tenant: base + "b", ID: "x"}, {Tenant: base + "_", ID: "xy"}} {
			if got, err := fs.Facts(ctx, other); err != nil || len(got) != 0 {
				t.Errorf("Facts(%s) = %d facts, %v; want none", other, len(got), err)
			}
		}
	}

	// Purging tenant base+"_" purges that tenant only.
	if p, ok := s.(chatmem.Purger); ok {
		n, err := p.PurgeInactive(ctx, base+"_", time.Now().Add(-24*time.Hour))
		if err != nil || n != len(ids)-1 {
			t.Errorf("PurgeInactive(%q) = %d, %v; want %d", base+"_", n, err, len(ids)-1)
		}
		if got := listIDs(t, s, base+"_", 0); len(got) != 0 {
			t.Errorf("List(%q) after its purge = %q, want none", base+"_", got)
		}
		for _, tn := range []string{base, base + "b", base + ".", base + ":x", base + "-", base + "@"} {
			want := sorted(ids)
			if tn == base {
				want = slices.DeleteFunc(want, func(id string) bool { return id == "x_" })
			}
			if got := listIDs(t, s, tn, 0); !slices.Equal(got, want) {
				t.Errorf("List(%q) after purging %q = %q, want %q", tn, base+"_", got, want)
			}
		}
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func firstContent(msgs []chatmem.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[0].Content
}

package transfer_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/redis"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/transfer"
)

const tenant = "acme"

// stores opens a fresh, empty store of each kind, removed when t ends.
var stores = []struct {
	name string
	open func(t *testing.T) chatmem.Store
}{
	{"memory", func(t *testing.T) chatmem.Store { return memstore.New() }},
	{"sqlite", openSQLite},
	{"redis", openRedis},
	{"postgres", openPostgres},
}

func openSQLite(t *testing.T) chatmem.Store {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "chatmem.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openRedis(t *testing.T) chatmem.Store {
	o := testenv.RedisOptions(t)
	client := goredis.NewClient(o)
	prefix := "cmtransfer-" + rand.Text()[:12]
	s, err := redis.New(client, redis.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		client.Close()
	})
	return s
}

func openPostgres(t *testing.T) chatmem.Store {
	schema := testenv.PostgresSchema(t, "chatmem_transfer_")
	s, err := postgres.Open(t.Context(), testenv.PostgresURL(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// base is a time with nanoseconds, which not every store keeps: the
// export writes microseconds.
var base = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)

// fill writes the test data into st: a conversation with a system
// message, tool calls (parallel ones), metadata, a name, Unicode, a
// summary and facts with history, bound to a user with facts and their
// history; a long one over several import batches; one with an expiry.
func fill(t *testing.T, st chatmem.Store, long int) {
	t.Helper()
	ctx := t.Context()
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	rich := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "You are a helpful shop assistant.", Tokens: 8, CreatedAt: at(0)},
		{Role: chatmem.RoleUser, Content: "Hi, I'm Kavya — नमस्ते 🌏. Order SE-10423 hasn't arrived.", Name: "kavya", Tokens: 15, CreatedAt: at(1),
			Metadata: map[string]string{"channel": "web", "locale": "hi-IN"}},
		{Role: chatmem.RoleAssistant, Tokens: 20, CreatedAt: at(2), ToolCalls: []chatmem.ToolCall{
			{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "track", Arguments: `{"order":"SE-10423"}`}},
			{ID: "call_2", Type: "function", Function: chatmem.FunctionCall{Name: "eta", Arguments: `{"zip":"411001"}`}},
		}},
		{Role: chatmem.RoleTool, ToolCallID: "call_1", Content: `{"status":"out for delivery"}`, Tokens: 7, CreatedAt: at(3)},
		{Role: chatmem.RoleTool, ToolCallID: "call_2", Content: `{"eta":"20:00"}`, Tokens: 5, CreatedAt: at(4)},
		{Role: chatmem.RoleAssistant, Content: "Sorry Kavya! It is out for delivery, by 8 pm.\nGrüße, \"Shop\"", Tokens: 16, CreatedAt: at(5)},
	}
	if _, err := st.Append(t.Context(), key("rich"), rich[:2], chatmem.AppendOptions{Tokenizer: "estimate", Now: at(0), User: "kavya"}); err != nil {
		t.Fatal(err)
	}
	// The reply at 6 (the conversation's last) has a receipt, as the chat
	// proxy keeps one.
	if _, err := st.Append(ctx, key("rich"), rich[2:], chatmem.AppendOptions{Tokenizer: "estimate", Now: at(9), Receipt: testReceipt(t, 5)}); err != nil {
		t.Fatal(err)
	}
	ss := st.(chatmem.SummaryStore)
	if err := ss.PutSummary(ctx, key("rich"), chatmem.Summary{Text: "Kavya asked about order SE-10423.", CoversSeq: 4, Tokens: 9, Summarizer: "offline", CreatedAt: at(10)}, 0); err != nil {
		t.Fatal(err)
	}
	fs := st.(chatmem.FactStore)
	for _, batch := range [][]chatmem.Fact{
		{{Key: "name", Value: "Kavya", SourceSeq: 2, SetBy: "rules", Confidence: 0.9, CreatedAt: at(11)},
			{Key: "order_id", Value: "SE-10423", SourceSeq: 2, SetBy: "rules", Confidence: 1, CreatedAt: at(11)}},
		{{Key: "name", Value: "Kavya R.", SetBy: "app", Confidence: 1, CreatedAt: at(12)}},
		{{Key: "language", Value: "hi", SourceSeq: 2, SetBy: "rules", Confidence: 0.75, CreatedAt: at(13)}},
	} {
		if err := fs.SetFacts(ctx, key("rich"), batch); err != nil {
			t.Fatal(err)
		}
	}

	us := st.(chatmem.UserStore)
	for _, batch := range [][]chatmem.Fact{
		{{Key: "name", Value: "Kavya", Conversation: "rich", SourceSeq: 2, SetBy: "rules", Confidence: 0.9, CreatedAt: at(14)},
			{Key: "language", Value: "hi", Conversation: "rich", SourceSeq: 2, SetBy: "rules", Confidence: 0.75, CreatedAt: at(14)}},
		{{Key: "name", Value: "Kavya R.", SetBy: "app", Confidence: 1, CreatedAt: at(15)}},
		{{Key: "name", Value: "Kavya Rao", Conversation: "gone", SourceSeq: 7, SetBy: "rules", Confidence: 0.8, CreatedAt: at(16)}},
	} {
		if err := us.SetUserFacts(ctx, chatmem.Key{Tenant: tenant, ID: "kavya"}, batch); err != nil {
			t.Fatal(err)
		}
	}

	var msgs []chatmem.Message
	for i := range long {
		role, text := chatmem.RoleUser, fmt.Sprintf("question %d about flight AI-%03d?", i, i%997)
		if i%2 == 1 {
			role, text = chatmem.RoleAssistant, fmt.Sprintf("answer %d: gate %d, «%s»", i, i%40, strings.Repeat("ü", i%7))
		}
		msgs = append(msgs, chatmem.Message{Role: role, Content: text, Tokens: 5 + i%9, CreatedAt: at(100 + i)})
	}
	for i := 0; i < len(msgs); i += 700 {
		// Each batch's last message has a receipt: in the middle of the
		// conversation.
		if _, err := st.Append(ctx, key("long"), msgs[i:min(i+700, len(msgs))], chatmem.AppendOptions{Tokenizer: "estimate", Now: at(100 + i), Receipt: testReceipt(t, int64(min(i+700, len(msgs))))}); err != nil {
			t.Fatal(err)
		}
	}
	appendAt(t, st, "short-ttl", []chatmem.Message{{Role: chatmem.RoleUser, Content: "remember me for a day", Tokens: 5, CreatedAt: at(20)}}, time.Now(), 24*time.Hour)
}

func key(id string) chatmem.Key { return chatmem.Key{Tenant: tenant, ID: id} }

// testReceipt is a receipt of a window that sent messages 1..to-1.
func testReceipt(t *testing.T, to int64) []byte {
	t.Helper()
	b, err := chatmem.EncodeReceipt(&chatmem.Receipt{
		Policy: chatmem.ReceiptPolicy{Kind: chatmem.PolicyTokenBudget, Budget: 4000}, Tokenizer: "estimate",
		Tokens:   chatmem.ReceiptTokens{Recent: 40},
		Sent:     []chatmem.SentSpan{{Part: chatmem.PartRecent, From: 1, To: to - 1, Hash: "0123456789abcdef"}},
		Upstream: &chatmem.UpstreamUse{Model: "gpt-4o-mini", InputTokens: 42, CachedTokens: 32, OutputTokens: 7, RequestID: "req_1"},
		Request:  &chatmem.RequestFrame{Body: `{"model":"gpt-4o-mini","messages":}`, At: 34},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func appendAt(t *testing.T, st chatmem.Store, id string, msgs []chatmem.Message, now time.Time, ttl time.Duration) {
	t.Helper()
	if _, err := st.Append(t.Context(), key(id), msgs, chatmem.AppendOptions{Tokenizer: "estimate", Now: now, TTL: ttl}); err != nil {
		t.Fatalf("append to %s: %v", id, err)
	}
}

func export(t *testing.T, st chatmem.Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := transfer.Export(t.Context(), st, tenant, &buf, transfer.ExportOptions{}); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return buf.Bytes()
}

func importAll(t *testing.T, st chatmem.Store, data []byte, opts transfer.ImportOptions) (transfer.Totals, []transfer.Result) {
	t.Helper()
	var results []transfer.Result
	totals, err := transfer.Import(t.Context(), st, tenant, bytes.NewReader(data), opts, func(r transfer.Result) error {
		results = append(results, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Import: %v (results %+v)", err, results)
	}
	return totals, results
}

// TestRoundTrip exports each store's data, imports it into each other
// store and exports it again: the bytes are the same, for every ordered
// pair. A second import of the same file changes nothing.
func TestRoundTrip(t *testing.T) {
	long := 2300
	if testing.Short() {
		long = 300
	}
	for _, from := range stores {
		t.Run(from.name, func(t *testing.T) {
			src := from.open(t)
			fill(t, src, long)
			want := export(t, src)
			validateSchema(t, want)
			if n := bytes.Count(want, []byte("\n")); n < long+10 {
				t.Fatalf("export has %d lines, want at least %d", n, long+10)
			}
			for _, to := range stores {
				if to.name == from.name {
					continue
				}
				t.Run(to.name, func(t *testing.T) {
					dst := to.open(t)
					totals, _ := importAll(t, dst, want, transfer.ImportOptions{})
					if totals.Created != 4 || totals.Conversations != 3 || totals.Users != 1 || totals.Messages != int64(long+7) {
						t.Fatalf("first import: %+v, want 3 conversations and 1 user created with %d messages", totals, long+7)
					}
					if got := export(t, dst); !bytes.Equal(got, want) {
						t.Fatalf("re-export from %s differs from %s's export:\n%s", to.name, from.name, firstDiff(want, got))
					}
					totals, _ = importAll(t, dst, want, transfer.ImportOptions{})
					if totals.Unchanged != 4 || totals.Messages != 0 {
						t.Fatalf("second import: %+v, want 3 conversations and 1 user unchanged and no message written", totals)
					}
					if got := export(t, dst); !bytes.Equal(got, want) {
						t.Fatalf("second import changed the store:\n%s", firstDiff(want, got))
					}
				})
			}
		})
	}
}

// firstDiff shows the first line where a and b differ.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\nwant %s\n got %s", i+1, x, y)
		}
	}
	return "(no difference)"
}

// TestImportMalformed: a malformed line refuses its conversation whole,
// named by line number, and the others are imported.
func TestImportMalformed(t *testing.T) {
	src := memstore.New()
	fill(t, src, 40)
	good := export(t, src)
	lines := strings.Split(strings.TrimSuffix(string(good), "\n"), "\n")
	// Lines: 1 header; conversation "long" (ordered first by ID) at 2, its
	// messages 3..42; then user kavya's record at 43 and "rich" at 44.
	cases := []struct {
		name   string
		line   int // 1-based line to replace
		with   string
		reason string
	}{
		{"not JSON", 10, `{"type":"message","seq":`, "not a JSON object"},
		{"unknown field", 10, strings.Replace(lines[9], `"role"`, `"rol":"x","role"`, 1), "unknown field"},
		{"seq gap", 10, strings.Replace(lines[9], `"seq":8,`, `"seq":9,`, 1), "seq 9, want 8"},
		{"bad role", 10, strings.Replace(lines[9], `"role":"assistant"`, `"role":"robot"`, 1), "unknown role"},
		{"unknown type", 10, `{"type":"vector"}`, "unknown record type"},
		{"fact before messages end", 10, `{"type":"fact","key":"name","value":"x","set_by":"app","confidence":1,"created_at":"2026-01-01T00:00:00Z"}`, "message after the summary or facts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := append([]string(nil), lines...)
			bad[c.line-1] = c.with
			dst := memstore.New()
			totals, results := importAll(t, dst, []byte(strings.Join(bad, "\n")+"\n"), transfer.ImportOptions{})
			if totals.Invalid != 1 || totals.Created != 3 {
				t.Fatalf("totals %+v, want 1 invalid and 2 conversations and a user created", totals)
			}
			var r transfer.Result
			for _, r = range results {
				if r.Status == transfer.StatusInvalid {
					break
				}
			}
			// "fact before messages end" is found at the next message line.
			if wantLine := c.line + boolInt(c.name == "fact before messages end"); r.Line != wantLine || r.Conversation != "long" || !strings.Contains(r.Error, c.reason) {
				t.Fatalf("invalid result %+v, want conversation long, line %d, error with %q", r, wantLine, c.reason)
			}
			if _, err := dst.Conversation(t.Context(), key("long")); !errors.Is(err, chatmem.ErrNotFound) {
				t.Fatalf("conversation long after a refused import: err %v, want ErrNotFound (nothing written)", err)
			}
		})
	}
	t.Run("header", func(t *testing.T) {
		_, err := transfer.Import(t.Context(), memstore.New(), tenant, strings.NewReader(`{"format":"chatmem/v2"}`+"\n"), transfer.ImportOptions{}, nil)
		var le *transfer.LineError
		if !errors.As(err, &le) || le.Line != 1 || !errors.Is(err, chatmem.ErrInvalid) {
			t.Fatalf("Import of a v2 file: %v, want a line-1 error wrapping ErrInvalid", err)
		}
	})
	t.Run("totals disagree", func(t *testing.T) {
		bad := append([]string(nil), lines...)
		bad[1] = strings.Replace(bad[1], `"turns":20`, `"turns":21`, 1)
		totals, results := importAll(t, memstore.New(), []byte(strings.Join(bad, "\n")+"\n"), transfer.ImportOptions{})
		if totals.Invalid != 1 || results[0].Line != 2 || !strings.Contains(results[0].Error, "turns") {
			t.Fatalf("totals %+v results %+v, want conversation long invalid at line 2 for its turns", totals, results)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// failingStore fails every append after the first ok ones, as a process
// killed mid-import would stop.
type failingStore struct {
	chatmem.Store
	ok atomic.Int64
}

var errKilled = errors.New("killed")

func (f *failingStore) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	if f.ok.Add(-1) < 0 {
		return chatmem.AppendResult{}, errKilled
	}
	return f.Store.Append(ctx, key, msgs, opts)
}

func (f *failingStore) Receipts(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.StoredReceipt, error) {
	return f.Store.(chatmem.ReceiptStore).Receipts(ctx, key, after, limit)
}

func (f *failingStore) Summary(ctx context.Context, key chatmem.Key) (chatmem.Summary, error) {
	return f.Store.(chatmem.SummaryStore).Summary(ctx, key)
}

func (f *failingStore) PutSummary(ctx context.Context, key chatmem.Key, s chatmem.Summary, prev int64) error {
	return f.Store.(chatmem.SummaryStore).PutSummary(ctx, key, s, prev)
}

func (f *failingStore) Facts(ctx context.Context, key chatmem.Key) ([]chatmem.Fact, error) {
	return f.Store.(chatmem.FactStore).Facts(ctx, key)
}

func (f *failingStore) FactHistory(ctx context.Context, key chatmem.Key, name string) ([]chatmem.Fact, error) {
	return f.Store.(chatmem.FactStore).FactHistory(ctx, key, name)
}

func (f *failingStore) SetFacts(ctx context.Context, key chatmem.Key, facts []chatmem.Fact) error {
	return f.Store.(chatmem.FactStore).SetFacts(ctx, key, facts)
}

func (f *failingStore) DeleteFact(ctx context.Context, key chatmem.Key, name string) error {
	return f.Store.(chatmem.FactStore).DeleteFact(ctx, key, name)
}

func (f *failingStore) UserConversations(ctx context.Context, user chatmem.Key, page chatmem.PageRequest) (chatmem.Page, error) {
	return f.Store.(chatmem.UserStore).UserConversations(ctx, user, page)
}

func (f *failingStore) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	return f.Store.(chatmem.UserStore).UserFacts(ctx, user)
}

func (f *failingStore) UserFactHistory(ctx context.Context, user chatmem.Key, name string) ([]chatmem.Fact, error) {
	return f.Store.(chatmem.UserStore).UserFactHistory(ctx, user, name)
}

func (f *failingStore) SetUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	return f.Store.(chatmem.UserStore).SetUserFacts(ctx, user, facts)
}

func (f *failingStore) SetDerivedUserFacts(ctx context.Context, p chatmem.DerivedUserFacts) error {
	return f.Store.(chatmem.UserStore).SetDerivedUserFacts(ctx, p)
}

func (f *failingStore) DeleteUserFact(ctx context.Context, user chatmem.Key, name string) error {
	return f.Store.(chatmem.UserStore).DeleteUserFact(ctx, user, name)
}

func (f *failingStore) DeleteUser(ctx context.Context, user chatmem.Key) (int, error) {
	return f.Store.(chatmem.UserStore).DeleteUser(ctx, user)
}

// TestImportResumes stops an import at each of its appends in turn, as a
// kill would, and runs it again: it ends with the same bytes.
func TestImportResumes(t *testing.T) {
	src := memstore.New()
	fill(t, src, 2500)
	want := export(t, src)
	dst := openSQLite(t)
	for kill := int64(0); ; kill++ {
		f := &failingStore{Store: dst}
		f.ok.Store(kill)
		_, err := transfer.Import(t.Context(), f, tenant, bytes.NewReader(want), transfer.ImportOptions{}, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, errKilled) {
			t.Fatalf("import killed after %d appends: %v", kill, err)
		}
	}
	totals, _ := importAll(t, dst, want, transfer.ImportOptions{})
	if totals.Unchanged != 4 {
		t.Fatalf("after the resumed imports: %+v, want 3 conversations and 1 user unchanged", totals)
	}
	if got := export(t, dst); !bytes.Equal(got, want) {
		t.Fatalf("resumed import differs:\n%s", firstDiff(want, got))
	}
}

// TestImportConflict: a conversation stored with other content is left
// alone (skip), stops the import (fail) or is replaced (replace).
func TestImportConflict(t *testing.T) {
	src := memstore.New()
	fill(t, src, 10)
	data := export(t, src)
	other := func() chatmem.Store {
		st := memstore.New()
		appendAt(t, st, "rich", []chatmem.Message{{Role: chatmem.RoleUser, Content: "something else entirely", Tokens: 5, CreatedAt: base}}, base, 0)
		return st
	}
	t.Run("skip", func(t *testing.T) {
		st := other()
		before := export(t, st)
		totals, results := importAll(t, st, data, transfer.ImportOptions{OnConflict: transfer.ConflictSkip})
		if totals.Conflicts != 1 || totals.Created != 3 {
			t.Fatalf("totals %+v, want 1 conflict, 2 conversations and a user created", totals)
		}
		for _, r := range results {
			if r.Conversation == "rich" && (r.Status != transfer.StatusConflict || !strings.Contains(r.Error, "exists with other content")) {
				t.Fatalf("result for rich: %+v", r)
			}
		}
		var conv bytes.Buffer
		if _, err := transfer.WriteConversation(t.Context(), st, key("rich"), &conv); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(before, conv.Bytes()) {
			t.Fatalf("skip changed the stored conversation: %s", conv.Bytes())
		}
	})
	t.Run("fail", func(t *testing.T) {
		_, err := transfer.Import(t.Context(), other(), tenant, bytes.NewReader(data), transfer.ImportOptions{OnConflict: transfer.ConflictFail}, nil)
		if !errors.Is(err, chatmem.ErrConflict) || !strings.Contains(err.Error(), "rich") {
			t.Fatalf("Import with on-conflict fail: %v, want ErrConflict naming rich", err)
		}
	})
	t.Run("replace", func(t *testing.T) {
		st := other()
		totals, _ := importAll(t, st, data, transfer.ImportOptions{OnConflict: transfer.ConflictReplace})
		if totals.Replaced != 1 || totals.Created != 3 {
			t.Fatalf("totals %+v, want 1 replaced, 2 conversations and a user created", totals)
		}
		if got := export(t, st); !bytes.Equal(got, data) {
			t.Fatalf("after replace:\n%s", firstDiff(data, got))
		}
	})
	t.Run("bad policy", func(t *testing.T) {
		if _, err := transfer.ParseConflict("merge"); !errors.Is(err, chatmem.ErrInvalid) {
			t.Fatalf("ParseConflict(merge) = %v, want ErrInvalid", err)
		}
	})
}

// TestExportLines checks the shape of an export line by line: the header,
// each record's type, and times in UTC microseconds.
func TestExportLines(t *testing.T) {
	src := memstore.New()
	fill(t, src, 4)
	data := export(t, src)
	if !bytes.Contains(data, []byte(`{"type":"conversation","id":"rich","user":"kavya",`)) {
		t.Errorf("the conversation record of rich does not name its user:\n%s", data)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var types []string
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, ".123456789") {
			t.Errorf("line has nanoseconds: %s", line)
		}
		if i := strings.Index(line, `"type":"`); i >= 0 {
			types = append(types, strings.SplitN(line[i+8:], `"`, 2)[0])
		} else {
			types = append(types, line)
		}
	}
	got := strings.Join(types, ",")
	want := `{"format":"chatmem/v1"},conversation,message,message,message,message,user,conversation,message,message,message,message,message,message,summary,fact,fact,fact,fact,conversation,message`
	if got != want {
		t.Fatalf("record types:\n got %s\nwant %s", got, want)
	}
}

// TestUsers: a user's record holds every value of the user's facts, with
// the conversation each was stated in; an export without user records (as
// before they existed) still imports; a user stored with other facts is a
// conflict, or is replaced; a malformed user record is refused alone.
func TestUsers(t *testing.T) {
	src := memstore.New()
	fill(t, src, 4)
	data := export(t, src)
	var userLine string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, `{"type":"user",`) {
			userLine = l
		}
	}
	want := `{"type":"user","id":"kavya","facts":[` +
		`{"key":"language","value":"hi","conversation":"rich","source_seq":2,"set_by":"rules","confidence":0.75,"created_at":"2026-03-04T05:06:21.123456Z"},` +
		`{"key":"name","value":"Kavya","conversation":"rich","source_seq":2,"set_by":"rules","confidence":0.9,"created_at":"2026-03-04T05:06:21.123456Z"},` +
		`{"key":"name","value":"Kavya R.","set_by":"app","confidence":1,"created_at":"2026-03-04T05:06:22.123456Z"},` +
		`{"key":"name","value":"Kavya Rao","conversation":"gone","source_seq":7,"set_by":"rules","confidence":0.8,"created_at":"2026-03-04T05:06:23.123456Z"}]}`
	if userLine != want {
		t.Fatalf("user record\n got %s\nwant %s", userLine, want)
	}
	kavya := chatmem.Key{Tenant: tenant, ID: "kavya"}

	t.Run("pages", func(t *testing.T) {
		// Pages of one conversation, as GET /v1/export serves them: the
		// user's record comes once, with its first conversation.
		var pages strings.Builder
		pages.WriteString(`{"format":"chatmem/v1"}` + "\n")
		for _, id := range []string{"long", "rich", "short-ttl"} {
			var buf bytes.Buffer
			if err := transfer.Export(t.Context(), src, tenant, &buf, transfer.ExportOptions{IDs: []string{id}}); err != nil {
				t.Fatal(err)
			}
			_, body, _ := strings.Cut(buf.String(), "\n")
			pages.WriteString(body)
		}
		if pages.String() != string(data) {
			t.Fatalf("pages of one conversation differ from the whole export:\n%s", firstDiff(data, []byte(pages.String())))
		}
	})
	t.Run("old export", func(t *testing.T) {
		old := strings.Replace(string(data), userLine+"\n", "", 1)
		dst := openSQLite(t)
		totals, _ := importAll(t, dst, []byte(old), transfer.ImportOptions{})
		if totals.Created != 3 || totals.Users != 0 {
			t.Fatalf("totals %+v, want 3 conversations created and no user", totals)
		}
		if got := export(t, dst); string(got) != old {
			t.Fatalf("re-export of an export without users:\n%s", firstDiff([]byte(old), got))
		}
	})
	other := func(t *testing.T) chatmem.Store {
		st := openSQLite(t)
		if err := st.(chatmem.UserStore).SetUserFacts(t.Context(), kavya, []chatmem.Fact{{Key: "name", Value: "Someone else", SetBy: "app", Confidence: 1, CreatedAt: base}}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	t.Run("conflict", func(t *testing.T) {
		st := other(t)
		totals, results := importAll(t, st, data, transfer.ImportOptions{})
		if totals.Conflicts != 1 || totals.Created != 3 {
			t.Fatalf("totals %+v, want the user a conflict and 3 conversations created", totals)
		}
		for _, r := range results {
			if r.User == "kavya" && (r.Status != transfer.StatusConflict || !strings.Contains(r.Error, "other facts")) {
				t.Fatalf("result for user kavya: %+v", r)
			}
		}
		facts, err := st.(chatmem.UserStore).UserFacts(t.Context(), kavya)
		if err != nil || len(facts) != 1 || facts[0].Value != "Someone else" {
			t.Fatalf("user facts after a skipped conflict: %+v, %v; want the stored one alone", facts, err)
		}
		_, err = transfer.Import(t.Context(), st, tenant, bytes.NewReader(data), transfer.ImportOptions{OnConflict: transfer.ConflictFail}, nil)
		if !errors.Is(err, chatmem.ErrConflict) || !strings.Contains(err.Error(), "user kavya") {
			t.Fatalf("Import with on-conflict fail: %v, want ErrConflict naming user kavya", err)
		}
	})
	t.Run("replace", func(t *testing.T) {
		st := other(t)
		totals, _ := importAll(t, st, data, transfer.ImportOptions{OnConflict: transfer.ConflictReplace})
		if totals.Replaced != 1 || totals.Users != 1 {
			t.Fatalf("totals %+v, want the user replaced", totals)
		}
		if got := export(t, st); !bytes.Equal(got, data) {
			t.Fatalf("after replace:\n%s", firstDiff(data, got))
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for _, c := range []struct{ name, line, reason string }{
			{"unknown field", strings.Replace(userLine, `"set_by":"app"`, `"set_by":"app","valid_to":"2026-01-01T00:00:00Z"`, 1), "unknown field"},
			{"bad id", strings.Replace(userLine, `"id":"kavya"`, `"id":"../kavya"`, 1), "user id"},
			{"unordered", strings.Replace(userLine, `"key":"language"`, `"key":"zone"`, 1), "ordered by key"},
			{"no facts", `{"type":"user","id":"kavya","facts":[]}`, "at least one fact"},
		} {
			t.Run(c.name, func(t *testing.T) {
				dst := memstore.New()
				totals, results := importAll(t, dst, []byte(strings.Replace(string(data), userLine, c.line, 1)), transfer.ImportOptions{})
				if totals.Invalid != 1 || totals.Created != 3 {
					t.Fatalf("totals %+v, want the user invalid and 3 conversations created", totals)
				}
				for _, r := range results {
					if r.Status == transfer.StatusInvalid && (r.User == "" || !strings.Contains(r.Error, c.reason)) {
						t.Fatalf("invalid result %+v, want a user's, with %q", r, c.reason)
					}
				}
				if facts, err := dst.UserFacts(t.Context(), kavya); err != nil || len(facts) != 0 {
					t.Fatalf("user facts after a refused record: %+v, %v; want none", facts, err)
				}
			})
		}
	})
}

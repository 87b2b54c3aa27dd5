package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/transfer"
)

// killingStore lets the first left writes through and fails every write
// after them, as a process killed between two writes would stop: what the
// store holds then is what a kill there leaves. It counts the writes it
// saw by kind. Every write an import makes goes through it: appends,
// summaries, facts, user facts (set, replaced, deleted) and deletions.
type killingStore struct {
	chatmem.Store
	mu    sync.Mutex
	left  int
	kinds []string // the kinds of the writes let through, in order
}

func (k *killingStore) write(kind string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.left <= 0 {
		return fmt.Errorf("%s: %w", kind, errKilled)
	}
	k.left--
	k.kinds = append(k.kinds, kind)
	return nil
}

func (k *killingStore) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	if err := k.write("Append"); err != nil {
		return chatmem.AppendResult{}, err
	}
	return k.Store.Append(ctx, key, msgs, opts)
}

func (k *killingStore) Delete(ctx context.Context, key chatmem.Key) error {
	if err := k.write("Delete"); err != nil {
		return err
	}
	return k.Store.Delete(ctx, key)
}

func (k *killingStore) Receipts(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.StoredReceipt, error) {
	return k.Store.(chatmem.ReceiptStore).Receipts(ctx, key, after, limit)
}

func (k *killingStore) Summary(ctx context.Context, key chatmem.Key) (chatmem.Summary, error) {
	return k.Store.(chatmem.SummaryStore).Summary(ctx, key)
}

func (k *killingStore) PutSummary(ctx context.Context, key chatmem.Key, s chatmem.Summary, prev int64) error {
	if err := k.write("PutSummary"); err != nil {
		return err
	}
	return k.Store.(chatmem.SummaryStore).PutSummary(ctx, key, s, prev)
}

func (k *killingStore) Facts(ctx context.Context, key chatmem.Key) ([]chatmem.Fact, error) {
	return k.Store.(chatmem.FactStore).Facts(ctx, key)
}

func (k *killingStore) FactHistory(ctx context.Context, key chatmem.Key, name string) ([]chatmem.Fact, error) {
	return k.Store.(chatmem.FactStore).FactHistory(ctx, key, name)
}

func (k *killingStore) SetFacts(ctx context.Context, key chatmem.Key, facts []chatmem.Fact) error {
	if err := k.write("SetFacts"); err != nil {
		return err
	}
	return k.Store.(chatmem.FactStore).SetFacts(ctx, key, facts)
}

func (k *killingStore) DeleteFact(ctx context.Context, key chatmem.Key, name string) error {
	if err := k.write("DeleteFact"); err != nil {
		return err
	}
	return k.Store.(chatmem.FactStore).DeleteFact(ctx, key, name)
}

func (k *killingStore) UserConversations(ctx context.Context, user chatmem.Key, page chatmem.PageRequest) (chatmem.Page, error) {
	return k.Store.(chatmem.UserStore).UserConversations(ctx, user, page)
}

func (k *killingStore) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	return k.Store.(chatmem.UserStore).UserFacts(ctx, user)
}

func (k *killingStore) UserFactHistory(ctx context.Context, user chatmem.Key, name string) ([]chatmem.Fact, error) {
	return k.Store.(chatmem.UserStore).UserFactHistory(ctx, user, name)
}

func (k *killingStore) SetUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if err := k.write("SetUserFacts"); err != nil {
		return err
	}
	return k.Store.(chatmem.UserStore).SetUserFacts(ctx, user, facts)
}

func (k *killingStore) SetDerivedUserFacts(ctx context.Context, p chatmem.DerivedUserFacts) error {
	kind := "SetDerivedUserFacts"
	if p.Replace {
		kind += "(replace)"
	}
	if err := k.write(kind); err != nil {
		return err
	}
	return k.Store.(chatmem.UserStore).SetDerivedUserFacts(ctx, p)
}

func (k *killingStore) ReplaceUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if err := k.write("ReplaceUserFacts"); err != nil {
		return err
	}
	return k.Store.(chatmem.UserFactReplacer).ReplaceUserFacts(ctx, user, facts)
}

func (k *killingStore) DeleteUserFact(ctx context.Context, user chatmem.Key, name string) error {
	if err := k.write("DeleteUserFact"); err != nil {
		return err
	}
	return k.Store.(chatmem.UserStore).DeleteUserFact(ctx, user, name)
}

func (k *killingStore) DeleteUser(ctx context.Context, user chatmem.Key) (int, error) {
	if err := k.write("DeleteUser"); err != nil {
		return 0, err
	}
	return k.Store.(chatmem.UserStore).DeleteUser(ctx, user)
}

func (k *killingStore) Rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64) (chatmem.Conversation, error) {
	if err := k.write("Rewind"); err != nil {
		return chatmem.Conversation{}, err
	}
	return k.Store.(chatmem.Rewinder).Rewind(ctx, key, toSeq, expectedLastSeq)
}

func (k *killingStore) Redact(ctx context.Context, key chatmem.Key, r chatmem.Redaction) (chatmem.Conversation, chatmem.Message, error) {
	if err := k.write("Redact"); err != nil {
		return chatmem.Conversation{}, chatmem.Message{}, err
	}
	return k.Store.(chatmem.Redactor).Redact(ctx, key, r)
}

// TestImportResumesAfterAnyWrite kills an import after each of its
// writes in turn (the messages' appends, the summary, the facts, the
// user's facts, and under replace the deletion of the stored
// conversation), each time on a fresh store, then runs it again: the
// rerun finishes it, with no conflict, and the store exports the same
// bytes as after a clean import; a third run changes nothing. On every
// store.
func TestImportResumesAfterAnyWrite(t *testing.T) {
	src := memstore.New()
	fill(t, src, 1010) // "long" takes four appends: 1, 1000, 8, 1
	want := export(t, src)
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			for _, c := range []struct {
				policy transfer.Conflict
				kinds  []string // the writes a clean import makes, at least
			}{
				{transfer.ConflictSkip, []string{"Append", "PutSummary", "SetFacts", "SetDerivedUserFacts"}},
				{transfer.ConflictReplace, []string{"Append", "Delete", "PutSummary", "SetFacts", "SetDerivedUserFacts(replace)"}},
			} {
				t.Run(string(c.policy), func(t *testing.T) {
					fresh := func() chatmem.Store {
						st := s.open(t)
						if c.policy == transfer.ConflictReplace {
							// Other content under the file's conversation and user.
							appendAt(t, st, "rich", []chatmem.Message{{Role: chatmem.RoleUser, Content: "something else", Tokens: 4, CreatedAt: base}}, base, 0)
							us := st.(chatmem.UserStore)
							if err := us.SetUserFacts(t.Context(), chatmem.Key{Tenant: tenant, ID: "kavya"}, []chatmem.Fact{{Key: "name", Value: "Someone else", SetBy: "app", Confidence: 1, CreatedAt: base}}); err != nil {
								t.Fatal(err)
							}
						}
						return st
					}
					clean := &killingStore{Store: fresh(), left: math.MaxInt}
					if _, err := transfer.Import(t.Context(), clean, tenant, bytes.NewReader(want), transfer.ImportOptions{OnConflict: c.policy}, nil); err != nil {
						t.Fatalf("clean import: %v", err)
					}
					for _, kind := range c.kinds {
						if !slices.Contains(clean.kinds, kind) {
							t.Fatalf("a clean import's writes %v lack %s", clean.kinds, kind)
						}
					}
					for n := range len(clean.kinds) {
						dst := fresh()
						killed := &killingStore{Store: dst, left: n}
						_, err := transfer.Import(t.Context(), killed, tenant, bytes.NewReader(want), transfer.ImportOptions{OnConflict: c.policy}, nil)
						if !errors.Is(err, errKilled) {
							t.Fatalf("import killed after %d writes: %v, want the kill", n, err)
						}
						totals, results := importAll(t, dst, want, transfer.ImportOptions{OnConflict: c.policy})
						if totals.Conflicts != 0 || totals.Invalid != 0 {
							t.Fatalf("rerun after a kill after %d writes (%v, then %s): %+v\n%+v", n, clean.kinds[:n], clean.kinds[n], totals, results)
						}
						if got := export(t, dst); !bytes.Equal(got, want) {
							t.Fatalf("rerun after a kill after %d writes (then %s) differs from a clean import:\n%s", n, clean.kinds[n], firstDiff(want, got))
						}
						if totals, _ := importAll(t, dst, want, transfer.ImportOptions{OnConflict: c.policy}); totals.Unchanged != 4 {
							t.Fatalf("third run after a kill after %d writes: %+v, want all 4 unchanged", n, totals)
						}
					}
				})
			}
		})
	}
}

// bigMessages are messages at the largest size lim accepts, their text
// full of the characters JSON encoders like to escape: <, > and &, one
// control character and U+2028.
func bigMessages(lim chatmem.Limits) []chatmem.Message {
	fill := func(n int) string {
		const tail = "&>\x01\u2028"
		return strings.Repeat("<", n-len(tail)) + tail
	}
	meta := map[string]string{}
	for i := range 4 {
		meta[fmt.Sprintf("k<%d>", i)] = fill(lim.MaxMetadataBytes/4 - 4)
	}
	user := chatmem.Message{Role: chatmem.RoleUser, Content: fill(lim.MaxContentBytes), Name: fill(lim.MaxNameBytes), Metadata: meta}
	call := chatmem.Message{Role: chatmem.RoleAssistant, Content: fill(lim.MaxContentBytes), ToolCalls: []chatmem.ToolCall{
		{ID: "call_<1>", Type: "function", Function: chatmem.FunctionCall{Name: "f<&>", Arguments: fill(lim.MaxArgumentsBytes / 2)}},
		{ID: "call_<2>", Type: "function", Function: chatmem.FunctionCall{Name: "g<&>", Arguments: fill(lim.MaxArgumentsBytes / 2)}},
	}}
	answer := chatmem.Message{Role: chatmem.RoleTool, ToolCallID: "call_<1>", Content: fill(lim.MaxContentBytes)}
	msgs := []chatmem.Message{user, call, answer}
	for i := range msgs {
		msgs[i].Tokens = len(msgs[i].Content) / 4
		msgs[i].CreatedAt = base
		if err := msgs[i].Validate(lim); err != nil {
			panic(err)
		}
	}
	return msgs
}

// TestExportLargestContent: conversations holding the largest messages
// the server accepts by default, full of <, export one byte per <
// (never \u003c), within the line bound of those limits, and re-import
// and re-export byte-identically on every store.
func TestExportLargestContent(t *testing.T) {
	lim := chatmem.DefaultLimits
	src := memstore.New()
	msgs := bigMessages(lim)
	appendAt(t, src, "big-1", msgs, base, 0)
	appendAt(t, src, "big-2", msgs[:1], base, 0)
	want := export(t, src)
	validateSchema(t, want)
	if bytes.Contains(want, []byte(`\u003c`)) || bytes.Contains(want, []byte(`\u0026`)) {
		t.Fatalf("the export escapes <, > or &")
	}
	bound := transfer.MaxLineBytes(lim)
	for i, line := range bytes.Split(want, []byte("\n")) {
		if len(line) > bound {
			t.Fatalf("line %d is %d bytes, over MaxLineBytes(DefaultLimits) = %d", i+1, len(line), bound)
		}
		// A record's size follows its text, not six times it.
		if len(line) > 2*lim.MaxContentBytes+lim.MaxArgumentsBytes+lim.MaxMetadataBytes {
			t.Fatalf("line %d is %d bytes: the text grew on export", i+1, len(line))
		}
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			dst := s.open(t)
			if totals, results := importAll(t, dst, want, transfer.ImportOptions{}); totals.Created != 2 {
				t.Fatalf("import: %+v %+v, want 2 created", totals, results)
			}
			if got := export(t, dst); !bytes.Equal(got, want) {
				t.Fatalf("re-export differs:\n%.300s", firstDiff(want, got))
			}
			if totals, _ := importAll(t, dst, want, transfer.ImportOptions{}); totals.Unchanged != 2 {
				t.Fatalf("second import: %+v, want 2 unchanged", totals)
			}
		})
	}
}

// bigExport is an export of three conversations, the middle one,
// "b-big", holding a message of n bytes of <, and the user of the first.
func bigExport(t *testing.T, n int) []byte {
	t.Helper()
	src := memstore.New()
	small := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hello <there>", Tokens: 3, CreatedAt: base}}
	if _, err := src.Append(t.Context(), key("a-small"), small, chatmem.AppendOptions{Tokenizer: "estimate", Now: base, User: "u1"}); err != nil {
		t.Fatal(err)
	}
	if err := src.SetUserFacts(t.Context(), chatmem.Key{Tenant: tenant, ID: "u1"}, []chatmem.Fact{{Key: "name", Value: "<b>", SetBy: "app", Confidence: 1, CreatedAt: base}}); err != nil {
		t.Fatal(err)
	}
	appendAt(t, src, "b-big", []chatmem.Message{{Role: chatmem.RoleUser, Content: strings.Repeat("<", n), Tokens: n / 4, CreatedAt: base}}, base, 0)
	appendAt(t, src, "c-small", small, base, 0)
	return export(t, src)
}

// TestImportLongLines: an export within the server's limits always
// imports, however it escapes (a server that accepts 4 MiB messages: an
// escaped export of one was a line of 24 MiB, over the old fixed bound of
// 16 MiB, which ended the import); a line over the bound, a message over
// the limits, refuses its own conversation or user, and the import goes
// on with the next.
func TestImportLongLines(t *testing.T) {
	data := bigExport(t, 3<<20)
	large := chatmem.Limits{MaxContentBytes: 4 << 20}
	t.Run("within the limits", func(t *testing.T) {
		dst := memstore.New()
		totals, results := importAll(t, dst, data, transfer.ImportOptions{Limits: large})
		if totals.Created != 4 || totals.Invalid != 0 {
			t.Fatalf("totals %+v %+v, want 3 conversations and a user created", totals, results)
		}
		if got := export(t, dst); !bytes.Equal(got, data) {
			t.Fatalf("re-export differs:\n%.300s", firstDiff(data, got))
		}
	})
	check := func(t *testing.T, opts transfer.ImportOptions, data []byte, invalid, reason string) {
		t.Helper()
		dst := memstore.New()
		totals, results := importAll(t, dst, data, opts)
		if totals.Invalid != 1 || totals.Created != 3 {
			t.Fatalf("totals %+v, want 1 invalid, 3 created", totals)
		}
		for _, r := range results {
			if r.Status == transfer.StatusInvalid && (r.Conversation+r.User != invalid || !strings.Contains(r.Error, reason)) {
				t.Fatalf("invalid result %+v, want %s with %q", r, invalid, reason)
			}
		}
	}
	t.Run("over the line bound", func(t *testing.T) {
		check(t, transfer.ImportOptions{Limits: large, MaxLineBytes: 1 << 20}, data, "b-big", "over the limit of 1048576")
	})
	t.Run("over the content limit", func(t *testing.T) {
		check(t, transfer.ImportOptions{}, data, "b-big", "over the limit of 262144")
	})
	t.Run("user over the line bound", func(t *testing.T) {
		lines := strings.Split(string(bigExport(t, 1000)), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, `{"type":"user"`) {
				lines[i] = strings.Replace(l, `"value":"<b>"`, `"value":"`+strings.Repeat("x", 2<<20)+`"`, 1)
			}
		}
		check(t, transfer.ImportOptions{Limits: large, MaxLineBytes: 1 << 20}, []byte(strings.Join(lines, "\n")), "u1", "over the limit")
	})
}

// TestMigrateLargeContent: a migration copies every conversation of a
// store, one with a message of 3 MiB of < among them (which an escaped
// export made a line of 18 MiB, and the migration stopped there).
func TestMigrateLargeContent(t *testing.T) {
	from, to := memstore.New(), memstore.New()
	for i := range 22 {
		content := fmt.Sprintf("message <%d>", i)
		if i == 15 {
			content = strings.Repeat("<", 3<<20)
		}
		appendAt(t, from, fmt.Sprintf("c-%02d", i), []chatmem.Message{{Role: chatmem.RoleUser, Content: content, Tokens: len(content) / 4, CreatedAt: base}}, base, 0)
	}
	rep, err := transfer.Migrate(t.Context(), from, to, tenant, transfer.MigrateOptions{})
	if err != nil || rep.Verified != 22 || rep.Created != 22 {
		t.Fatalf("Migrate: %+v, %v; want 22 conversations created and verified", rep, err)
	}
}

// TestImportRefuses: a conversation whose records break the API's
// invariants is refused whole, with a clear error, and nothing of it is
// written; the others are imported.
func TestImportRefuses(t *testing.T) {
	src := memstore.New()
	fill(t, src, 4)
	good := export(t, src)
	lines := strings.Split(strings.TrimSuffix(string(good), "\n"), "\n")
	// Lines: 1 header; 2 conversation "long", 3..6 its messages; 7 user
	// kavya; 8 conversation "rich", 9..14 its messages, 15 its summary,
	// 16..19 its facts; 20 conversation "short-ttl", 21 its message.
	if !strings.HasPrefix(lines[7], `{"type":"conversation","id":"rich"`) || !strings.HasPrefix(lines[19], `{"type":"conversation","id":"short-ttl"`) {
		t.Fatalf("unexpected export layout:\n%s", good)
	}
	edit := func(i int, old, new string) func([]string) {
		return func(ls []string) {
			if !strings.Contains(ls[i-1], old) {
				t.Fatalf("line %d lacks %q: %s", i, old, ls[i-1])
			}
			ls[i-1] = strings.Replace(ls[i-1], old, new, 1)
		}
	}
	// overflow sets message 2 of "long" to the largest int64 and its
	// record's tokens to what the sum then wraps to, as if the totals
	// added up.
	overflow := func(ls []string) {
		tokensOf := func(l string) int64 {
			_, rest, _ := strings.Cut(l, `"tokens":`)
			n, _ := strconv.ParseInt(rest[:strings.IndexAny(rest, ",}")], 10, 64)
			return n
		}
		old, total := tokensOf(ls[3]), tokensOf(ls[1])
		wrapped := total - old
		wrapped += math.MaxInt64 // wraps, as the old import's sum did
		edit(4, fmt.Sprintf(`"tokens":%d`, old), fmt.Sprintf(`"tokens":%d`, int64(math.MaxInt64)))(ls)
		edit(2, fmt.Sprintf(`"tokens":%d`, total), fmt.Sprintf(`"tokens":%d`, wrapped))(ls)
	}
	later := `"updated_at":"2261-01-01T00:00:00Z"`
	cases := []struct {
		name   string
		change func([]string)
		conv   string
		reason string
	}{
		{"tokens overflow", overflow, "long", "tokens for"},
		{"negative tokens", edit(4, `"tokens":`, `"tokens":-`), "long", "tokens for"},
		{"tokens over the text", edit(4, `"tokens":`, `"tokens":9000`), "long", "want 0 to"},
		{"summary negative tokens", edit(15, `"tokens":9`, `"tokens":-100`), "rich", "summary has -100 tokens"},
		{"tokenizer not a name", edit(8, `"tokenizer":"estimate"`, `"tokenizer":"no such tokenizer"`), "rich", "tokenizer"},
		{"updated before created", edit(8, `"updated_at":"2026-03-04T05:06:16.123456Z"`, `"updated_at":"2020-01-01T00:00:00Z"`), "rich", "before created_at"},
		{"one message, updated after created", func(ls []string) {
			_, rest, _ := strings.Cut(ls[19], `"updated_at":"`)
			edit(20, `"updated_at":"`+rest[:strings.Index(rest, `"`)]+`"`, later)(ls)
		}, "short-ttl", "conversation of one message"},
		{"expiry before update", func(ls []string) {
			_, rest, _ := strings.Cut(ls[19], `"expires_at":"`)
			edit(20, `"expires_at":"`+rest[:strings.Index(rest, `"`)]+`"`, `"expires_at":"2000-01-01T00:00:00Z"`)(ls)
		}, "short-ttl", "expires_at"},
		{"time out of range", edit(16, `"created_at":"2026`, `"created_at":"2300`), "rich", "outside the range"},
		{"invalid UTF-8 in a fact", edit(16, `"value":"hi"`, "\"value\":\"h\xffi\""), "rich", "invalid UTF-8"},
		{"lone surrogate in the summary", edit(15, `"text":"Kavya`, `"text":"\ud800Kavya`), "rich", "surrogate"},
		{"invalid UTF-8 in a conversation record", edit(2, `"tokenizer":"estimate"`, "\"tokenizer\":\"estimate\",\"user\":\"\xff\""), "long", "invalid UTF-8"},
		{"invalid UTF-8 in a message", edit(10, `Kavya`, "Kav\xc3ya"), "rich", "invalid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := slices.Clone(lines)
			c.change(bad)
			dst := memstore.New()
			totals, results := importAll(t, dst, []byte(strings.Join(bad, "\n")+"\n"), transfer.ImportOptions{})
			if totals.Invalid != 1 || totals.Created != 3 {
				t.Fatalf("totals %+v, want 1 invalid and 2 conversations and a user created\n%+v", totals, results)
			}
			for _, r := range results {
				if r.Status == transfer.StatusInvalid && (r.Conversation != c.conv || !strings.Contains(r.Error, c.reason)) {
					t.Fatalf("invalid result %+v, want conversation %s, error with %q", r, c.conv, c.reason)
				}
			}
			if _, err := dst.Conversation(t.Context(), key(c.conv)); !errors.Is(err, chatmem.ErrNotFound) {
				t.Fatalf("conversation %s after a refused import: %v, want ErrNotFound (nothing written)", c.conv, err)
			}
		})
	}
	t.Run("invalid UTF-8 in a user record", func(t *testing.T) {
		bad := slices.Clone(lines)
		edit(7, `"value":"Kavya R."`, "\"value\":\"Kavya\xff\"")(bad)
		dst := memstore.New()
		totals, results := importAll(t, dst, []byte(strings.Join(bad, "\n")+"\n"), transfer.ImportOptions{})
		if totals.Invalid != 1 || totals.Created != 3 || results[1].User != "kavya" || !strings.Contains(results[1].Error, "invalid UTF-8") {
			t.Fatalf("totals %+v results %+v, want user kavya invalid for its UTF-8", totals, results)
		}
	})
	t.Run("unknown tokenizer", func(t *testing.T) {
		known := func(name string) error {
			if name != "estimate" {
				return fmt.Errorf("%w: unknown tokenizer %q", chatmem.ErrInvalid, name)
			}
			return nil
		}
		bad := slices.Clone(lines)
		edit(8, `"tokenizer":"estimate"`, `"tokenizer":"o300k_base"`)(bad)
		totals, results := importAll(t, memstore.New(), []byte(strings.Join(bad, "\n")+"\n"), transfer.ImportOptions{Tokenizer: known})
		if totals.Invalid != 1 || results[2].Conversation != "rich" || !strings.Contains(results[2].Error, `unknown tokenizer "o300k_base"`) {
			t.Fatalf("totals %+v results %+v, want rich refused for its tokenizer", totals, results)
		}
	})
	t.Run("no tokens for 8 MiB", func(t *testing.T) {
		src := memstore.New()
		appendAt(t, src, "huge", []chatmem.Message{{Role: chatmem.RoleUser, Content: strings.Repeat("a", 8<<20), CreatedAt: base}}, base, 0)
		totals, results := importAll(t, memstore.New(), export(t, src), transfer.ImportOptions{Limits: chatmem.Limits{MaxContentBytes: 16 << 20}})
		if totals.Invalid != 1 || !strings.Contains(results[0].Error, "0 tokens for 8388608 bytes") {
			t.Fatalf("totals %+v results %+v, want huge refused for its tokens", totals, results)
		}
	})
}

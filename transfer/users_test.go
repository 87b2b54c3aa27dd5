package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/transfer"
)

// fillLoneUsers adds to fill's data users whose facts outlive their
// conversations: "solo" has facts and never had a conversation, "left"
// had one and it was deleted, "void" had one, deleted, and no facts.
func fillLoneUsers(t *testing.T, st chatmem.Store) {
	t.Helper()
	ctx := t.Context()
	us := st.(chatmem.UserStore)
	set := func(id string, facts ...chatmem.Fact) {
		if err := us.SetUserFacts(ctx, chatmem.Key{Tenant: tenant, ID: id}, facts); err != nil {
			t.Fatal(err)
		}
	}
	set("solo",
		chatmem.Fact{Key: "language", Value: "ta", SetBy: "app", Confidence: 1, CreatedAt: base},
		chatmem.Fact{Key: "language", Value: "en", SetBy: "app", Confidence: 1, CreatedAt: base.Add(1e9)},
		chatmem.Fact{Key: "name", Value: "Selvi", SetBy: "app", Confidence: 1, CreatedAt: base.Add(2e9)})
	for _, id := range []string{"left", "void"} {
		if _, err := st.Append(ctx, key("bye-"+id), []chatmem.Message{{Role: chatmem.RoleUser, Content: "bye", Tokens: 1, CreatedAt: base}},
			chatmem.AppendOptions{Tokenizer: "estimate", Now: base, User: id}); err != nil {
			t.Fatal(err)
		}
	}
	set("left", chatmem.Fact{Key: "email", Value: "left@example.com", Conversation: "bye-left", SourceSeq: 1, SetBy: "rules", Confidence: 0.9, CreatedAt: base})
	for _, id := range []string{"left", "void"} {
		if err := st.Delete(ctx, key("bye-"+id)); err != nil {
			t.Fatal(err)
		}
	}
}

// userIDs returns the IDs of the user records in an export, in order.
func userIDs(data []byte) []string {
	var ids []string
	for _, l := range strings.Split(string(data), "\n") {
		if id, ok := strings.CutPrefix(l, `{"type":"user","id":"`); ok {
			ids = append(ids, id[:strings.IndexByte(id, '"')])
		}
	}
	return ids
}

// TestUsersWithoutConversations: a user who holds facts and no live
// conversation is in the tenant's export (after the conversations, by
// user ID), in the pages of GET /v1/export (the last page), comes back
// whole from an import (memory -> SQLite, byte for byte) and from a
// migration (SQLite -> PostgreSQL), which verifies it.
func TestUsersWithoutConversations(t *testing.T) {
	src := memstore.New()
	fill(t, src, 4)
	fillLoneUsers(t, src)
	data := export(t, src)
	if got, want := userIDs(data), []string{"kavya", "left", "solo"}; !slices.Equal(got, want) {
		t.Fatalf("user records in the export = %v, want %v:\n%s", got, want, data)
	}
	if !bytes.HasSuffix(data, []byte(`{"key":"name","value":"Selvi","set_by":"app","confidence":1,"created_at":"2026-03-04T05:06:09.123456Z"}]}`+"\n")) {
		t.Errorf("the export does not end with solo's record:\n%s", data)
	}

	t.Run("pages", func(t *testing.T) {
		// GET /v1/export's pages: one conversation each, the last with the
		// users who have none.
		var pages bytes.Buffer
		pages.WriteString(`{"format":"chatmem/v1"}` + "\n")
		ids := []string{"long", "rich", "short-ttl"}
		for i, id := range ids {
			var buf bytes.Buffer
			if err := transfer.Export(t.Context(), src, tenant, &buf, transfer.ExportOptions{IDs: []string{id}}); err != nil {
				t.Fatal(err)
			}
			if i == len(ids)-1 {
				if err := transfer.WriteUsersWithoutConversations(t.Context(), src, tenant, &buf, nil); err != nil {
					t.Fatal(err)
				}
			}
			_, body, _ := bytes.Cut(buf.Bytes(), []byte("\n"))
			pages.Write(body)
		}
		if !bytes.Equal(pages.Bytes(), data) {
			t.Fatalf("pages differ from the whole export:\n%s", firstDiff(data, pages.Bytes()))
		}
	})

	t.Run("import", func(t *testing.T) {
		dst := openSQLite(t)
		totals, _ := importAll(t, dst, data, transfer.ImportOptions{})
		if totals.Users != 3 || totals.Created != 6 {
			t.Fatalf("totals %+v, want 3 users and 3 conversations created", totals)
		}
		facts, err := dst.(chatmem.UserStore).UserFacts(t.Context(), chatmem.Key{Tenant: tenant, ID: "solo"})
		if err != nil || len(facts) != 2 || facts[0].Value != "en" || facts[1].Value != "Selvi" {
			t.Fatalf("solo's facts after the import = %+v, %v; want language en, name Selvi", facts, err)
		}
		if got := export(t, dst); !bytes.Equal(got, data) {
			t.Fatalf("re-export differs:\n%s", firstDiff(data, got))
		}
		if totals, _ := importAll(t, dst, data, transfer.ImportOptions{}); totals.Unchanged != 6 {
			t.Fatalf("importing again: %+v, want all 6 unchanged", totals)
		}
	})

	t.Run("migrate", func(t *testing.T) {
		from := openSQLite(t)
		fill(t, from, 4)
		fillLoneUsers(t, from)
		to := openPostgres(t)
		rep, err := transfer.Migrate(t.Context(), from, to, tenant, transfer.MigrateOptions{})
		if err != nil || rep.Users != 3 || rep.Created != 6 || rep.Verified != 3 || len(rep.Missing)+len(rep.Mismatched) != 0 {
			t.Fatalf("migrate: %+v, %v; want 3 users and 3 conversations created and verified", rep, err)
		}
		want := export(t, from)
		if got := userIDs(want); !slices.Equal(got, []string{"kavya", "left", "solo"}) {
			t.Fatalf("user records in the source's export = %v", got)
		}
		if got := export(t, to); !bytes.Equal(got, want) {
			t.Fatalf("migrated store differs:\n%s", firstDiff(want, got))
		}
		rep, err = transfer.Migrate(t.Context(), from, to, tenant, transfer.MigrateOptions{})
		if err != nil || rep.Unchanged != 6 {
			t.Fatalf("migrating again: %+v, %v; want all 6 unchanged", rep, err)
		}
		// The verification sees a lone user who differs, or is missing.
		solo := chatmem.Key{Tenant: tenant, ID: "solo"}
		if err := to.(chatmem.UserStore).SetUserFacts(t.Context(), solo, []chatmem.Fact{{Key: "name", Value: "Other", SetBy: "app", Confidence: 1}}); err != nil {
			t.Fatal(err)
		}
		rep, err = transfer.Migrate(t.Context(), from, to, tenant, transfer.MigrateOptions{OnConflict: transfer.ConflictSkip})
		if err != nil || rep.Conflicts != 1 || !slices.Equal(rep.Mismatched, []string{"user solo"}) {
			t.Fatalf("migrate onto a changed lone user: %+v, %v; want a conflict and user solo mismatched", rep, err)
		}
		if _, err := to.(chatmem.UserStore).DeleteUser(t.Context(), solo); err != nil {
			t.Fatal(err)
		}
		verify := &hidingUser{failingStore: &failingStore{Store: to}, hide: "solo"}
		verify.ok.Store(1 << 30)
		rep, err = transfer.Migrate(t.Context(), from, verify, tenant, transfer.MigrateOptions{})
		if err != nil || !slices.Equal(rep.Missing, []string{"user solo"}) {
			t.Fatalf("migrate onto a target that drops solo: %+v, %v; want user solo missing", rep, err)
		}
	})
}

// hidingUser is a target that accepts one user's facts and keeps none
// (failingStore forwards the rest; it is given appends enough).
type hidingUser struct {
	*failingStore
	hide string
}

func (h *hidingUser) SetUserFacts(ctx context.Context, user chatmem.Key, facts []chatmem.Fact) error {
	if user.ID == h.hide {
		return nil
	}
	return h.failingStore.SetUserFacts(ctx, user, facts)
}

func (h *hidingUser) SetDerivedUserFacts(ctx context.Context, p chatmem.DerivedUserFacts) error {
	if p.User.ID == h.hide {
		return nil
	}
	return h.failingStore.SetDerivedUserFacts(ctx, p)
}

// replaceOnly is a store whose user facts change only through one atomic
// replace, SetDerivedUserFacts with Replace: its SetUserFacts,
// DeleteUserFact, ReplaceUserFacts and SetDerivedUserFacts without Replace
// fail, and the replace fails too when failReplace is set.
type replaceOnly struct {
	chatmem.Store
	failReplace bool
}

var errRefused = errors.New("refused")

func (r *replaceOnly) us() chatmem.UserStore { return r.Store.(chatmem.UserStore) }

func (r *replaceOnly) Receipts(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.StoredReceipt, error) {
	return r.Store.(chatmem.ReceiptStore).Receipts(ctx, key, after, limit)
}

func (r *replaceOnly) UserConversations(ctx context.Context, user chatmem.Key, page chatmem.PageRequest) (chatmem.Page, error) {
	return r.us().UserConversations(ctx, user, page)
}

func (r *replaceOnly) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	return r.us().UserFacts(ctx, user)
}

func (r *replaceOnly) UserFactHistory(ctx context.Context, user chatmem.Key, name string) ([]chatmem.Fact, error) {
	return r.us().UserFactHistory(ctx, user, name)
}

func (r *replaceOnly) SetUserFacts(context.Context, chatmem.Key, []chatmem.Fact) error {
	return errRefused
}

func (r *replaceOnly) SetDerivedUserFacts(ctx context.Context, p chatmem.DerivedUserFacts) error {
	if !p.Replace || r.failReplace {
		return errRefused
	}
	return r.us().SetDerivedUserFacts(ctx, p)
}

func (r *replaceOnly) DeleteUserFact(context.Context, chatmem.Key, string) error { return errRefused }

func (r *replaceOnly) DeleteUser(ctx context.Context, user chatmem.Key) (int, error) {
	return r.us().DeleteUser(ctx, user)
}

func (r *replaceOnly) ReplaceUserFacts(context.Context, chatmem.Key, []chatmem.Fact) error {
	return errRefused
}

// TestImportReplaceUserAtomic: an import with on-conflict replace swaps a
// user's facts with one atomic replace (SetDerivedUserFacts with Replace),
// never a delete and then a write;
// when that fails, the stored facts are all still there.
func TestImportReplaceUserAtomic(t *testing.T) {
	src := memstore.New()
	fill(t, src, 4)
	var line bytes.Buffer
	line.WriteString(`{"format":"chatmem/v1"}` + "\n")
	for _, l := range strings.SplitAfter(string(export(t, src)), "\n") {
		if strings.HasPrefix(l, `{"type":"user",`) {
			line.WriteString(l)
		}
	}
	kavya := chatmem.Key{Tenant: tenant, ID: "kavya"}
	stored := []chatmem.Fact{{Key: "name", Value: "Someone else", SetBy: "app", Confidence: 1, CreatedAt: base}, {Key: "zone", Value: "IST", SetBy: "app", Confidence: 1, CreatedAt: base}}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			dst := st.open(t)
			if err := dst.(chatmem.UserStore).SetUserFacts(t.Context(), kavya, stored); err != nil {
				t.Fatal(err)
			}
			_, err := transfer.Import(t.Context(), &replaceOnly{Store: dst, failReplace: true}, tenant, bytes.NewReader(line.Bytes()),
				transfer.ImportOptions{OnConflict: transfer.ConflictReplace}, nil)
			if !errors.Is(err, errRefused) {
				t.Fatalf("Import with a failing replace: %v, want the failure", err)
			}
			if facts, err := dst.(chatmem.UserStore).UserFacts(t.Context(), kavya); err != nil || len(facts) != 2 {
				t.Fatalf("facts after the failed replace = %+v, %v; want the 2 stored", facts, err)
			}
			totals, err := transfer.Import(t.Context(), &replaceOnly{Store: dst}, tenant, bytes.NewReader(line.Bytes()),
				transfer.ImportOptions{OnConflict: transfer.ConflictReplace}, nil)
			if err != nil || totals.Replaced != 1 {
				t.Fatalf("Import with replace: %+v, %v; want the user replaced", totals, err)
			}
			facts, err := dst.(chatmem.UserStore).UserFacts(t.Context(), kavya)
			if err != nil || len(facts) != 2 || facts[0].Key != "language" || facts[1].Value != "Kavya Rao" {
				t.Fatalf("facts after the replace = %+v, %v; want the file's language and name", facts, err)
			}
		})
	}
}

// TestExportUser: a user's export is a chatmem/v1 file of the user's
// record and the user's conversations only, which imports into every
// store and exports there the same bytes.
func TestExportUser(t *testing.T) {
	src := memstore.New()
	fill(t, src, 4)
	kavya := chatmem.Key{Tenant: tenant, ID: "kavya"}
	var want bytes.Buffer
	if err := transfer.ExportUser(t.Context(), src, kavya, &want); err != nil {
		t.Fatal(err)
	}
	validateSchema(t, want.Bytes())
	var types []string
	for _, l := range strings.Split(strings.TrimSuffix(want.String(), "\n"), "\n")[1:] {
		var probe struct{ Type, ID string }
		if err := json.Unmarshal([]byte(l), &probe); err != nil {
			t.Fatal(err)
		}
		if probe.ID != "" {
			types = append(types, probe.Type+" "+probe.ID)
		}
	}
	if got := strings.Join(types, ", "); got != "user kavya, conversation rich" {
		t.Fatalf("user export holds %s, want the user's record and rich", got)
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			dst := s.open(t)
			if totals, results := importAll(t, dst, want.Bytes(), transfer.ImportOptions{}); totals.Created != 2 {
				t.Fatalf("import: %+v %+v, want the user and rich created", totals, results)
			}
			var got bytes.Buffer
			if err := transfer.ExportUser(t.Context(), dst, kavya, &got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("re-export differs:\n%s", firstDiff(want.Bytes(), got.Bytes()))
			}
		})
	}
}

// erasingStore erases one user when the import first reads that user's
// facts: the erasure lands after the import started and before the
// user's record is written.
type erasingStore struct {
	*failingStore
	erase string
	done  bool
}

func (e *erasingStore) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	if user.ID == e.erase && !e.done {
		e.done = true
		if _, err := e.failingStore.DeleteUser(ctx, user); err != nil {
			return nil, err
		}
	}
	return e.failingStore.UserFacts(ctx, user)
}

// TestImportUserErased: a user erased after an import started is not
// brought back by the import's record of the user, under either policy:
// the record is reported (a conflict that names the erasure), the user's
// facts stay empty and unlisted, and the rest of the file is imported.
func TestImportUserErased(t *testing.T) {
	src := memstore.New()
	fill(t, src, 4)
	fillLoneUsers(t, src)
	data := export(t, src)
	solo := chatmem.Key{Tenant: tenant, ID: "solo"}
	for _, s := range stores {
		for _, policy := range []transfer.Conflict{transfer.ConflictSkip, transfer.ConflictReplace} {
			t.Run(s.name+"/"+string(policy), func(t *testing.T) {
				dst := s.open(t)
				us := dst.(chatmem.UserStore)
				if policy == transfer.ConflictReplace {
					if err := us.SetUserFacts(t.Context(), solo, []chatmem.Fact{{Key: "name", Value: "Someone else", SetBy: "app", Confidence: 1, CreatedAt: base}}); err != nil {
						t.Fatal(err)
					}
				}
				st := &erasingStore{failingStore: &failingStore{Store: dst}, erase: solo.ID}
				st.ok.Store(1 << 30)
				totals, results := importAll(t, st, data, transfer.ImportOptions{OnConflict: policy})
				if !st.done {
					t.Fatal("the import never read solo's facts")
				}
				var got *transfer.Result
				for i, r := range results {
					if r.User == solo.ID {
						got = &results[i]
					}
				}
				if got == nil || got.Status != transfer.StatusConflict || !strings.Contains(got.Error, "erased") {
					t.Fatalf("solo's result = %+v, want a conflict that names the erasure", got)
				}
				if totals.Users != 3 || totals.Conflicts != 1 || totals.Created != totals.Conversations+2 {
					t.Errorf("totals = %+v, want every record but solo's created", totals)
				}
				if facts, err := us.UserFacts(t.Context(), solo); err != nil || len(facts) != 0 {
					t.Errorf("solo's facts after the import = %+v, %v; want none", facts, err)
				}
				p, err := dst.(chatmem.UserLister).Users(t.Context(), tenant, chatmem.PageRequest{Limit: 100})
				if err != nil || slices.Contains(p.Users, solo.ID) || !slices.Contains(p.Users, "kavya") {
					t.Errorf("Users after the import = %v, %v; want kavya and no solo", p.Users, err)
				}
				// A later import, which started after the erasure, restores solo.
				if totals, _ := importAll(t, dst, data, transfer.ImportOptions{OnConflict: policy}); totals.Created != 1 || totals.Conflicts != 0 {
					t.Errorf("import after the erasure: %+v, want solo created, the rest unchanged", totals)
				}
			})
		}
	}
}

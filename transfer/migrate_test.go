package transfer_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
	"github.com/chatmem/chatmem/transfer"
)

// TestMigrate copies SQLite to PostgreSQL, killed at each of its first
// appends in turn and run again: every run continues the last, and the
// end is the source's bytes, verified by digest.
func TestMigrate(t *testing.T) {
	src := openSQLite(t)
	fill(t, src, 2100)
	want := export(t, src)
	dst := openPostgres(t)
	var last transfer.Progress
	for kill := int64(0); kill < 4; kill++ {
		f := &failingStore{Store: dst}
		f.ok.Store(kill)
		_, err := transfer.Migrate(t.Context(), src, f, tenant, transfer.MigrateOptions{})
		if !errors.Is(err, errKilled) {
			t.Fatalf("migrate killed after %d appends: %v, want the kill", kill, err)
		}
	}
	rep, err := transfer.Migrate(t.Context(), src, dst, tenant, transfer.MigrateOptions{Progress: func(p transfer.Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verified != 3 || len(rep.Mismatched) != 0 || len(rep.Missing) != 0 || rep.Resumed+rep.Unchanged+rep.Created != 4 || rep.Users != 1 || rep.Resumed == 0 {
		t.Fatalf("report %+v, want 3 verified, one resumed at least, and the user copied", rep)
	}
	if last.Conversations != 3 || last.TotalConversations != 3 || last.Messages != 2107 || last.TotalMessages != 2107 {
		t.Fatalf("last progress %+v, want 3/3 conversations and 2107/2107 messages", last)
	}
	if got := export(t, dst); !bytes.Equal(got, want) {
		t.Fatalf("migrated store differs:\n%s", firstDiff(want, got))
	}
	rep, err = transfer.Migrate(t.Context(), src, dst, tenant, transfer.MigrateOptions{})
	if err != nil || rep.Unchanged != 4 || rep.Verified != 3 {
		t.Fatalf("migrating again: %+v, %v; want 3 conversations and the user unchanged, 3 verified", rep, err)
	}

	// The target's own change is a conflict: the migration stops on it, and
	// verification is what says so when conflicts are skipped.
	appendAt(t, dst, "short-ttl", []chatmem.Message{{Role: chatmem.RoleAssistant, Content: "changed in the target", Tokens: 4, CreatedAt: base}}, base, 0)
	if _, err := transfer.Migrate(t.Context(), src, dst, tenant, transfer.MigrateOptions{}); !errors.Is(err, chatmem.ErrConflict) {
		t.Fatalf("migrate onto a changed target: %v, want ErrConflict", err)
	}
	rep, err = transfer.Migrate(t.Context(), src, dst, tenant, transfer.MigrateOptions{OnConflict: transfer.ConflictSkip})
	if err != nil || rep.Conflicts != 1 || strings.Join(rep.Mismatched, ",") != "short-ttl" {
		t.Fatalf("migrate skipping conflicts: %+v, %v; want short-ttl a conflict and mismatched", rep, err)
	}
}

// TestOpenAIFormat imports OpenAI-style transcripts (lines, and one array),
// exports them the same way, and imports them again without change.
func TestOpenAIFormat(t *testing.T) {
	st := memstore.New()
	mem, err := chatmem.New(st, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	lines := `{"id":"a","messages":[{"role":"user","content":"Hi, I'm Kavya."},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},{"role":"tool","content":"ok","tool_call_id":"c1"}]}
{"id":"b","messages":[{"role":"user","content":[{"type":"text","text":"part one"},{"type":"text","text":"part two"}]}]}
{"id":"c","messages":[{"role":"tool","content":"orphan","tool_call_id":"x"}]}
`
	var results []transfer.Result
	totals, err := transfer.ImportOpenAI(t.Context(), mem, st, tenant, strings.NewReader(lines), transfer.OpenAIImportOptions{}, func(r transfer.Result) error {
		results = append(results, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if totals.Created != 2 || totals.Invalid != 1 || results[2].Line != 3 || !strings.Contains(results[2].Error, "line 3") {
		t.Fatalf("totals %+v results %+v, want a and b created, c invalid at line 3", totals, results)
	}
	if _, err := st.Conversation(t.Context(), key("c")); !errors.Is(err, chatmem.ErrNotFound) {
		t.Fatalf("the invalid conversation was written: %v", err)
	}
	array := `[{"role":"user","content":"one"},{"role":"assistant","content":"two"}]`
	if totals, err := transfer.ImportOpenAI(t.Context(), mem, st, tenant, strings.NewReader(array), transfer.OpenAIImportOptions{ID: "d"}, nil); err != nil || totals.Created != 1 || totals.Messages != 2 {
		t.Fatalf("array import: %+v, %v", totals, err)
	}
	if _, err := transfer.ImportOpenAI(t.Context(), mem, st, tenant, strings.NewReader(array), transfer.OpenAIImportOptions{}, nil); !errors.Is(err, chatmem.ErrInvalid) {
		t.Fatalf("array import without an id: %v, want ErrInvalid", err)
	}
	var out bytes.Buffer
	if err := transfer.ExportOpenAI(t.Context(), st, tenant, &out, transfer.OpenAIExportOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"a","messages":[{"role":"user","content":"Hi, I'm Kavya."},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},{"role":"tool","content":"ok","tool_call_id":"c1"}]}
{"id":"b","messages":[{"role":"user","content":"part one\npart two"}]}
{"id":"d","messages":[{"role":"user","content":"one"},{"role":"assistant","content":"two"}]}
`
	if out.String() != want {
		t.Fatalf("ExportOpenAI:\n%s\nwant\n%s", out.String(), want)
	}
	totals, err = transfer.ImportOpenAI(t.Context(), mem, st, tenant, strings.NewReader(want+`{"id":"d","messages":[{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":"three"}]}`+"\n"), transfer.OpenAIImportOptions{}, nil)
	if err != nil || totals.Unchanged != 3 || totals.Resumed != 1 || totals.Messages != 1 {
		t.Fatalf("re-import: %+v, %v; want 3 unchanged and d resumed with one message", totals, err)
	}
	totals, err = transfer.ImportOpenAI(t.Context(), mem, st, tenant, strings.NewReader(`{"id":"a","messages":[{"role":"user","content":"other"}]}`), transfer.OpenAIImportOptions{}, nil)
	if err != nil || totals.Conflicts != 1 {
		t.Fatalf("import of other messages: %+v, %v; want a conflict", totals, err)
	}
}

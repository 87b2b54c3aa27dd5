package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/transfer"
)

// TestTransferRoundTrip moves conversations SQLite -> PostgreSQL -> Redis
// -> SQLite through the CLI (export, import, migrate) and checks that each
// store's export is the same bytes.
func TestTransferRoundTrip(t *testing.T) {
	dir := t.TempDir()
	srcPath := seedStore(t, chatmem.Key{Tenant: "acme", ID: "kavya-1"}, chatmem.Key{Tenant: "acme", ID: "kavya-2"}, chatmem.Key{Tenant: "globex", ID: "other"})
	s, err := sqlite.Open(t.Context(), srcPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetFacts(t.Context(), chatmem.Key{Tenant: "acme", ID: "kavya-1"}, []chatmem.Fact{
		{Key: "name", Value: "Kavya", SourceSeq: 1, SetBy: "rules", Confidence: 0.9},
		{Key: "name", Value: "Kavya R.", SetBy: "app", Confidence: 1},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSummary(t.Context(), chatmem.Key{Tenant: "acme", ID: "kavya-2"}, chatmem.Summary{Text: "Kavya's order SE-10423 is late.", CoversSeq: 2, Tokens: 8, Summarizer: "offline"}, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()

	pg, _ := postgresSchemaURL(t, "chatmem_cli_")
	o := testenv.RedisOptions(t)
	prefix := "cmcli-" + rand.Text()[:10]
	rd := testenv.RedisURL() + "?prefix=" + prefix
	t.Cleanup(func() {
		c := goredis.NewClient(o)
		defer c.Close()
		iter := c.Scan(t.Context(), 0, prefix+"*", 1000).Iterator()
		for iter.Next(t.Context()) {
			c.Del(t.Context(), iter.Val())
		}
	})
	dstPath := filepath.Join(dir, "back.db")

	exportOf := func(store string) []byte {
		t.Helper()
		out := filepath.Join(dir, "out.ndjson")
		if _, errOut, code := runSub(t, runExport, "--store", store, "--tenant", "acme", "--out", out); code != 0 {
			t.Fatalf("export --store %s: exit %d: %s", store, code, errOut)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	want := exportOf("sqlite:" + srcPath)
	if n := bytes.Count(want, []byte(`"type":"message"`)); n != 10 {
		t.Fatalf("export of acme has %d messages, want 10:\n%s", n, want)
	}
	file := filepath.Join(dir, "acme.ndjson")
	if err := os.WriteFile(file, want, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runSub(t, runImport, "--store", pg, "--tenant", "acme", file)
	if code != 0 || !strings.Contains(out, `"created":2`) {
		t.Fatalf("import into postgres: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	out, _, code = runSub(t, runImport, "--store", pg, "--tenant", "acme", file)
	if code != 0 || !strings.Contains(out, `"unchanged":2`) {
		t.Fatalf("second import into postgres: exit %d, stdout %s; want 2 unchanged", code, out)
	}
	if got := exportOf(pg); !bytes.Equal(got, want) {
		t.Fatalf("postgres export differs:\n%s\nwant\n%s", got, want)
	}
	out, errOut, code = runSub(t, runMigrate, "--from", pg, "--to", rd, "--tenant", "acme")
	if code != 0 || !strings.Contains(out, `"verified":2`) || !strings.Contains(errOut, "verified 2 conversations") {
		t.Fatalf("migrate postgres -> redis: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	if got := exportOf(rd); !bytes.Equal(got, want) {
		t.Fatalf("redis export differs:\n%s\nwant\n%s", got, want)
	}
	if _, errOut, code := runSub(t, runMigrate, "--from", rd, "--to", "sqlite:"+dstPath, "--tenant", "acme"); code != 0 {
		t.Fatalf("migrate redis -> sqlite: exit %d: %s", code, errOut)
	}
	if got := exportOf("sqlite:" + dstPath); !bytes.Equal(got, want) {
		t.Fatalf("sqlite export after the round trip differs:\n%s\nwant\n%s", got, want)
	}

	// A malformed line: exit 1, the line named, nothing of it written.
	bad := bytes.Replace(want, []byte(`"seq":3,`), []byte(`"seq":4,`), 1)
	if err := os.WriteFile(file, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runSub(t, runImport, "--store", "memory:", "--tenant", "acme", file)
	if code != 1 || !strings.Contains(errOut, "invalid kavya-1: line 5: message seq 4, want 3") {
		t.Fatalf("import of a malformed file: exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{
		{"--store", "memory:", "--on-conflict", "merge", file},
		{"--store", "memory:", "--tenant", "a/b", file},
		{"--store", "memory:"},
	} {
		if _, _, code := runSub(t, runImport, args...); code != 2 {
			t.Errorf("import %q: exit %d, want 2", args, code)
		}
	}
	if _, _, code := runSub(t, runMigrate, "--from", "memory:"); code != 2 {
		t.Errorf("migrate without --to: exit %d, want 2", code)
	}
}

// TestExportOpenAI writes windows in the OpenAI shape.
func TestExportOpenAI(t *testing.T) {
	path := seedStore(t, chatmem.Key{Tenant: "acme", ID: "kavya"})
	out, errOut, code := runSub(t, runExport, "--store", "sqlite:"+path, "--tenant", "acme", "--format", "openai", "--policy", "token_budget", "--budget", "40")
	want := `{"id":"kavya","messages":[{"role":"user","content":"Ok. Also, do you have running socks?"},{"role":"assistant","content":"Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199."},{"role":"user","content":"Add the DryFit ones to my cart please."}]}` + "\n"
	if code != 0 || out != want {
		t.Fatalf("export --format openai at budget 40: exit %d, stderr %s\n got %s\nwant %s", code, errOut, out, want)
	}
}

// TestInMemoryTargetWarns: an import or migration into memory: reports
// what it created, and warns on one line that it is lost at exit.
func TestInMemoryTargetWarns(t *testing.T) {
	path := seedStore(t, chatmem.Key{Tenant: "acme", ID: "kavya"})
	file := filepath.Join(t.TempDir(), "acme.ndjson")
	if _, errOut, code := runSub(t, runExport, "--store", "sqlite:"+path, "--tenant", "acme", "--out", file); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	const warning = "warning: memory: is an in-memory store: what %s writes into it is lost when the process exits\n"
	for _, tt := range []struct {
		args []string
		name string
	}{
		{[]string{"import", "--store", "memory:", "--tenant", "acme", file}, "import"},
		{[]string{"migrate", "--from", "sqlite:" + path, "--to", "memory:", "--tenant", "acme"}, "migrate"},
	} {
		out, errOut, code := runCLI(t, "", tt.args...)
		want := "chatmem: " + tt.name + ": " + strings.Replace(warning, "%s", tt.name, 1)
		if code != 0 || !strings.Contains(out, `"created":1`) || !strings.HasPrefix(errOut, want) {
			t.Errorf("chatmem %q: exit %d, stdout %q, stderr %q; want the warning %q first", tt.args, code, out, errOut, want)
		}
	}
	// A store that keeps its data is no warning.
	if _, errOut, _ := runCLI(t, "", "import", "--store", "sqlite:"+filepath.Join(t.TempDir(), "c.db"), "--tenant", "acme", file); strings.Contains(errOut, "warning") {
		t.Errorf("import into SQLite warns: %q", errOut)
	}
}

// TestImportLimits: import holds a file to serve's limits: a message over
// --max-content-bytes (serve's key and variable, CHATMEM_MAX_CONTENT_BYTES)
// or a tokenizer no server resolves refuses its conversation, named on
// stderr, the rest is imported, and the exit is 1.
func TestImportLimits(t *testing.T) {
	src := memstore.New()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, c := range []struct {
		id, tokenizer string
		size          int
	}{{"big", "estimate", 300 << 10}, {"odd", "o300k_base", 10}, {"small", "o200k_base", 10}} {
		content := strings.Repeat("<", c.size)
		msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: content, Tokens: c.size / 4, CreatedAt: at}}
		if _, err := src.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: c.id}, msgs, chatmem.AppendOptions{Tokenizer: c.tokenizer, Now: at}); err != nil {
			t.Fatal(err)
		}
	}
	var data bytes.Buffer
	if err := transfer.Export(t.Context(), src, "acme", &data, transfer.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "in.ndjson")
	if err := os.WriteFile(file, data.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runSub(t, runImport, "--store", "memory:", "--tenant", "acme", file)
	if code != 1 || !strings.Contains(out, `"created":1`) || !strings.Contains(errOut, "invalid big: line 3: message 1: too large: user message content is 307200 bytes, over the limit of 262144") ||
		!strings.Contains(errOut, `invalid odd: line 4: tokenizer: unknown tokenizer "o300k_base"`) {
		t.Fatalf("import over the limits: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
	t.Setenv("CHATMEM_MAX_CONTENT_BYTES", "1MiB")
	out, errOut, code = runSub(t, runImport, "--store", "memory:", "--tenant", "acme", file)
	if code != 1 || !strings.Contains(out, `"created":2`) || strings.Contains(errOut, "big") {
		t.Fatalf("import with CHATMEM_MAX_CONTENT_BYTES=1MiB: exit %d, stdout %s, stderr %s", code, out, errOut)
	}
}

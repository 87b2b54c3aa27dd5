package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/transfer"
)

// TestTransfer exports a tenant's conversations page by page and one by
// one, imports them under another tenant, and checks tenancy, idempotency
// and refusals, on every store.
func TestTransfer(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			store := b.open(t)
			ts := newTestServer(t, newMemory(t, store, nil), Options{})
			acme, globex := ts.client(acmeKey), ts.client(globexKey)
			ctx := t.Context()
			for i := range 5 {
				_, err := acme.Append(ctx, fmt.Sprintf("kavya-%d", i), seed.History(), client.AppendOptions{})
				must(t, "append", err)
			}
			_, err := acme.PatchFacts(ctx, "kavya-1", []FactInput{{Key: "name", Value: "Kavya"}, {Key: "order_id", Value: "SE-10423", SourceSeq: 1}})
			must(t, "patch facts", err)
			_, err = acme.PatchFacts(ctx, "kavya-1", []FactInput{{Key: "name", Value: "Kavya R."}})
			must(t, "patch facts", err)
			_, err = globex.Append(ctx, "globex-only", seed.History()[:1], client.AppendOptions{})
			must(t, "append", err)
			// Users whose facts were set with no conversation: the export's
			// last page brings acme's, and never globex's.
			_, err = acme.PutUserFacts(ctx, "u-solo", []FactInput{{Key: "language", Value: "ta"}})
			must(t, "put user facts", err)
			_, err = globex.PutUserFacts(ctx, "u-globex", []FactInput{{Key: "language", Value: "de"}})
			must(t, "put user facts", err)

			var want bytes.Buffer
			must(t, "transfer.Export", transfer.Export(ctx, store, "acme", &want, transfer.ExportOptions{}))

			// Pages of two, concatenated without their repeated header lines.
			var got bytes.Buffer
			after, pages := "", 0
			for {
				var page bytes.Buffer
				next, err := acme.Export(ctx, after, 2, &page)
				must(t, "Export", err)
				body := page.String()
				if !strings.HasPrefix(body, `{"format":"chatmem/v1"}`+"\n") {
					t.Fatalf("page %d does not start with the header: %.80q", pages, body)
				}
				if pages > 0 {
					body = strings.SplitN(body, "\n", 2)[1]
				}
				got.WriteString(body)
				pages++
				if next == "" {
					break
				}
				after = next
			}
			if pages != 3 || got.String() != want.String() {
				t.Fatalf("%d pages, export:\n%s\nwant (3 pages):\n%s", pages, got.String(), want.String())
			}
			if lines := strings.SplitAfter(got.String(), "\n"); !strings.HasPrefix(lines[len(lines)-2], `{"type":"user","id":"u-solo","facts":[{"key":"language","value":"ta",`) {
				t.Fatalf("the export lacks the user with facts and no conversation:\n%s", got.String())
			}
			if strings.Contains(got.String(), "globex") || strings.Contains(got.String(), `"acme"`) {
				t.Fatalf("the export names a tenant or holds another tenant's data:\n%s", got.String())
			}

			var one bytes.Buffer
			must(t, "ExportConversation", acme.ExportConversation(ctx, "kavya-1", &one))
			if !strings.Contains(one.String(), `"key":"name","value":"Kavya"`) || !strings.Contains(one.String(), `"value":"Kavya R."`) {
				t.Fatalf("kavya-1's export lacks its fact history:\n%s", one.String())
			}
			wantAPIError(t, "export another tenant's conversation", globex.ExportConversation(ctx, "kavya-1", &bytes.Buffer{}), 404, "not_found")

			// globex imports acme's file: its own conversations, the same bytes.
			results, totals, err := globex.Import(ctx, bytes.NewReader(want.Bytes()), "")
			must(t, "Import", err)
			if totals.Created != 6 || totals.Users != 1 || len(results) != 6 || results[0].Status != transfer.StatusCreated {
				t.Fatalf("import: %+v, %+v; want 5 conversations and u-solo created", totals, results)
			}
			if facts, err := globex.UserFacts(ctx, "u-solo"); err != nil || len(facts) != 1 || facts[0].Value != "ta" {
				t.Fatalf("globex's u-solo after the import: %+v, %v; want language ta", facts, err)
			}
			var back bytes.Buffer
			must(t, "transfer.Export", transfer.Export(ctx, store, "globex", &back, transfer.ExportOptions{IDs: []string{"kavya-0", "kavya-1", "kavya-2", "kavya-3", "kavya-4"}}))
			must(t, "WriteUsersWithoutConversations", transfer.WriteUsersWithoutConversations(ctx, store, "globex", &back, nil))
			// globex's copy: acme's conversations, then its users with no
			// conversation: its own u-globex and the imported u-solo.
			lines := strings.SplitAfter(want.String(), "\n")
			convs, solo := strings.Join(lines[:len(lines)-2], ""), lines[len(lines)-2]
			if !strings.HasPrefix(back.String(), convs) || !strings.HasSuffix(back.String(), solo) ||
				!strings.Contains(back.String(), `{"type":"user","id":"u-globex",`) {
				t.Fatalf("globex's copy:\n%s\nwant acme's conversations, u-globex, then\n%s", back.String(), solo)
			}
			_, totals, err = globex.Import(ctx, bytes.NewReader(want.Bytes()), transfer.ConflictFail)
			if err != nil || totals.Unchanged != 6 {
				t.Fatalf("second import: %+v, %v; want 6 unchanged", totals, err)
			}

			// A malformed line refuses its conversation only.
			bad := strings.Replace(want.String(), `"seq":2,`, `"seq":3,`, 1)
			results, totals, err = ts.client(acmeKey).Import(ctx, strings.NewReader(strings.ReplaceAll(bad, "kavya-", "new-")), "")
			must(t, "Import malformed", err)
			if totals.Invalid != 1 || totals.Created != 4 || results[0].Status != transfer.StatusInvalid || results[0].Line != 4 {
				t.Fatalf("import with a malformed line: %+v %+v; want new-0 invalid at line 4", totals, results)
			}
			wantAPIError(t, "conversation of a refused import", func() error { _, err := acme.Conversation(ctx, "new-0"); return err }(), 404, "not_found")

			// Refusals before anything is read.
			for _, c := range []struct {
				path, key, body string
				status          int
				code            string
			}{
				{"/v1/import", acmeKey, `{"format":"chatmem/v9"}` + "\n", 400, "invalid_request"},
				{"/v1/import?on_conflict=merge", acmeKey, want.String(), 400, "invalid_request"},
				{"/v1/import", "", want.String(), 401, "unauthorized"},
			} {
				r := ts.raw(t, "POST", c.path, c.key, map[string]string{"Content-Type": "application/x-ndjson"}, c.body)
				if e := r.apiError(); r.status != c.status || e == nil || e.Code != c.code {
					t.Errorf("POST %s: %d %s, want %d %s", c.path, r.status, r.body, c.status, c.code)
				}
			}
			r := ts.raw(t, "GET", "/v1/export?limit=0", acmeKey, nil, "")
			if r.status != http.StatusBadRequest {
				t.Errorf("GET /v1/export?limit=0: %d, want 400", r.status)
			}
		})
	}
}

// TestImportTooLarge: a body over MaxImportBytes is 413, and what was
// read before is not half-written.
func TestImportTooLarge(t *testing.T) {
	st := openSQLite(t)
	ts := newTestServer(t, newMemory(t, st, nil), Options{Limits: Limits{MaxImportBytes: 300}})
	var data bytes.Buffer
	src := newMemory(t, openSQLite(t), nil)
	_, err := src.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: "big"}, seed.History(), chatmem.AppendOptions{})
	must(t, "append", err)
	must(t, "export", transfer.Export(t.Context(), src.Store(), "acme", &data, transfer.ExportOptions{}))
	_, _, err = ts.client(acmeKey).Import(t.Context(), &data, "")
	wantAPIError(t, "import over the limit", err, 413, "too_large")
	if _, err := st.Conversation(t.Context(), chatmem.Key{Tenant: "acme", ID: "big"}); err == nil {
		t.Fatal("the conversation of a refused import was written")
	}
}

// TestImportOverLimits: POST /v1/import holds each conversation to what an
// append is held to, and a line too long to read refuses its own
// conversation: each is an invalid result naming its line, the next
// conversation is imported, and the answer ends with the totals, never a
// 500 for the whole file.
func TestImportOverLimits(t *testing.T) {
	st := memstore.New()
	ts := newTestServer(t, newMemory(t, st, nil), Options{Limits: Limits{MaxContentBytes: 1 << 10}})
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	src := memstore.New()
	for _, c := range []struct {
		id, tokenizer string
		size          int
	}{{"a-big", "estimate", 2 << 10}, {"b-long-line", "estimate", 17 << 20}, {"c-odd", "o300k_base", 10}, {"d-ok", "estimate", 1 << 10}} {
		content := strings.Repeat("<", c.size)
		msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: content, Tokens: c.size / 4, CreatedAt: at}}
		_, err := src.Append(t.Context(), chatmem.Key{Tenant: "acme", ID: c.id}, msgs, chatmem.AppendOptions{Tokenizer: c.tokenizer, Now: at})
		must(t, "append", err)
	}
	var data bytes.Buffer
	must(t, "export", transfer.Export(t.Context(), src, "acme", &data, transfer.ExportOptions{}))
	results, totals, err := ts.client(acmeKey).Import(t.Context(), &data, "")
	must(t, "Import", err)
	if totals.Created != 1 || totals.Invalid != 3 || len(results) != 4 || results[3].Conversation != "d-ok" {
		t.Fatalf("import: %+v %+v; want 3 invalid and d-ok created", totals, results)
	}
	for i, want := range []string{
		"line 3: message 1: too large: user message content is 2048 bytes, over the limit of 1024",
		"line 5: too large: the line is 17825898 bytes, over the limit of 16777216",
		`line 6: tokenizer: invalid input: unknown tokenizer "o300k_base"`,
	} {
		if results[i].Status != transfer.StatusInvalid || !strings.Contains(results[i].Error, want) {
			t.Errorf("result %d: %+v, want invalid with %q", i, results[i], want)
		}
	}
	if _, err := st.Conversation(t.Context(), chatmem.Key{Tenant: "acme", ID: "b-long-line"}); err == nil {
		t.Fatal("the conversation of a refused line was written")
	}
}

// TestUserExportChatmem: a user's export (by default, or with
// format=chatmem) is a chatmem/v1 file of the user's record and conversations, which POST
// /v1/import reads into another tenant, and which exports there the same
// bytes; an unknown format is a 400.
func TestUserExportChatmem(t *testing.T) {
	st := memstore.New()
	ts := newTestServer(t, newMemory(t, st, nil), Options{})
	acme, globex := ts.client(acmeKey), ts.client(globexKey)
	ctx := t.Context()
	for _, id := range []string{"kavya-2", "kavya-1"} {
		_, err := acme.Append(ctx, id, seed.History(), client.AppendOptions{User: "kavya"})
		must(t, "append", err)
	}
	_, err := acme.Append(ctx, "someone-else", seed.History()[:1], client.AppendOptions{})
	must(t, "append", err)
	_, err = acme.PutUserFacts(ctx, "kavya", []FactInput{{Key: "name", Value: "Kavya <K>"}})
	must(t, "put user facts", err)
	_, err = acme.PatchFacts(ctx, "kavya-1", []FactInput{{Key: "order_id", Value: "SE-10423"}})
	must(t, "patch facts", err)

	var data bytes.Buffer
	must(t, "ExportUserChatmem", acme.ExportUserChatmem(ctx, "kavya", &data))
	var want bytes.Buffer
	must(t, "transfer.ExportUser", transfer.ExportUser(ctx, st, chatmem.Key{Tenant: "acme", ID: "kavya"}, &want))
	if data.String() != want.String() || !strings.HasPrefix(data.String(), `{"format":"chatmem/v1"}`+"\n"+`{"type":"user","id":"kavya",`) ||
		strings.Contains(data.String(), "someone-else") || strings.Index(data.String(), `"id":"kavya-1"`) > strings.Index(data.String(), `"id":"kavya-2"`) {
		t.Fatalf("user export:\n%s", data.String())
	}
	results, totals, err := globex.Import(ctx, bytes.NewReader(data.Bytes()), "")
	must(t, "Import", err)
	if totals.Created != 3 || totals.Users != 1 {
		t.Fatalf("import of a user's export: %+v %+v; want the user and 2 conversations created", totals, results)
	}
	var back bytes.Buffer
	must(t, "ExportUserChatmem", globex.ExportUserChatmem(ctx, "kavya", &back))
	if back.String() != data.String() {
		t.Fatalf("re-export under globex:\n%s\nwant\n%s", back.String(), data.String())
	}
	// One format: the default is chatmem/v1, format=chatmem names it.
	if r := ts.raw(t, "GET", "/v1/users/kavya/export?format=chatmem", acmeKey, nil, ""); r.status != 200 || string(r.body) != data.String() {
		t.Errorf("GET /v1/users/kavya/export?format=chatmem: %d, body differs from the default's", r.status)
	}
	r := ts.raw(t, "GET", "/v1/users/kavya/export?format=csv", acmeKey, nil, "")
	if e := r.apiError(); r.status != 400 || e == nil || e.Code != "invalid_request" {
		t.Errorf("GET /v1/users/kavya/export?format=csv: %d %s, want 400 invalid_request", r.status, r.body)
	}
}

// TestImportReplaceDropsTail: an import that replaces a conversation with
// one of the same creation time, length and token counts (the case the
// tail cache's own checks cannot tell from the original) is what the next
// context read shows, not the cached messages of the one it replaced.
func TestImportReplaceDropsTail(t *testing.T) {
	ts := newTestServer(t, newMemory(t, memstore.New(), nil), Options{})
	c := ts.client(acmeKey)
	ctx := t.Context()
	_, err := c.Append(ctx, "kavya", seed.History(), client.AppendOptions{})
	must(t, "Append", err)
	var file bytes.Buffer
	must(t, "ExportConversation", c.ExportConversation(ctx, "kavya", &file))
	p := client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 400}
	// Each import replaces the conversation with the file's, edited: from
	// the first on, the stored creation time is the file's (the export's
	// precision), so the second replaces a conversation with its twin.
	for _, socks := range []string{"cycling socks", "jogging socks"} {
		edited := strings.Replace(file.String(), "running socks", socks, 1)
		if edited == file.String() {
			t.Fatal("the export does not hold the text to edit")
		}
		_, totals, err := c.Import(ctx, strings.NewReader(edited), transfer.ConflictReplace)
		if err != nil || totals.Replaced != 1 {
			t.Fatalf("Import(replace, %s) = %+v, %v; want 1 replaced", socks, totals, err)
		}
		w, err := c.Context(ctx, "kavya", p) // fills the tail cache
		must(t, "Context after the import", err)
		var texts []string
		for _, m := range w.Messages {
			texts = append(texts, m.Content)
		}
		if all := strings.Join(texts, "\n"); !strings.Contains(all, socks) {
			t.Errorf("the window after importing %s holds:\n%s", socks, all)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/seed"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// runSub runs one subcommand's function in-process, as run would once the
// command is listed in commands, and returns stdout, stderr and the exit
// code main would use.
func runSub(t *testing.T, fn func(context.Context, []string, io.Reader, io.Writer, io.Writer) error, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := fn(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
	code := exitCode(err, &stderr)
	return stdout.String(), stderr.String(), code
}

// seedStore writes the seed's conversation under each key into a new
// SQLite file, counted with the estimate, and returns the file's path.
func seedStore(t *testing.T, keys ...chatmem.Key) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "chatmem.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mem, err := chatmem.New(s, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		if _, err := mem.Append(t.Context(), key, seed.History(), chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// conversation reads key's metadata from the SQLite file at path.
func conversation(t *testing.T, path string, key chatmem.Key) (chatmem.Conversation, []chatmem.Message) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conv, err := s.Conversation(t.Context(), key)
	if err != nil {
		t.Fatalf("Conversation(%s) error = %v", key, err)
	}
	msgs, err := s.Range(t.Context(), key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return conv, msgs
}

func TestRecount(t *testing.T) {
	c1, c2 := chatmem.Key{Tenant: "acme", ID: "c1"}, chatmem.Key{Tenant: "acme", ID: "c2"}
	other := chatmem.Key{Tenant: "globex", ID: "c1"}
	path := seedStore(t, c1, c2, other)
	out, errOut, code := runSub(t, runRecount, "--store", "sqlite:"+path, "--tenant", "acme", "--tokenizer", "o200k_base", "c1", "c2")
	if code != 0 || errOut != "" {
		t.Fatalf("recount: exit %d, stderr %q", code, errOut)
	}
	counter, err := tokenizer.Get(tokenizer.O200kBase, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, key := range []chatmem.Key{c1, c2} {
		conv, msgs := conversation(t, path, key)
		var tokens int64
		for _, m := range msgs {
			n, _ := counter.Count(t.Context(), m)
			if m.Tokens != n {
				t.Errorf("%s seq %d: %d tokens stored, want %d (o200k_base)", key, m.Seq, m.Tokens, n)
			}
			tokens += int64(n)
		}
		if conv.Tokenizer != tokenizer.O200kBase || conv.Tokens != tokens {
			t.Errorf("Conversation(%s) = tokenizer %q, %d tokens; want o200k_base, %d", key, conv.Tokenizer, conv.Tokens, tokens)
		}
		fmt.Fprintf(&want, "%s tokenizer=o200k_base messages=%d tokens=%d system_tokens=0\n", key.ID, len(msgs), tokens)
	}
	if out != want.String() {
		t.Errorf("recount printed %q, want %q", out, want.String())
	}
	if conv, _ := conversation(t, path, other); conv.Tokenizer != tokenizer.EstimateName {
		t.Errorf("Conversation(%s) of another tenant = tokenizer %q, want estimate", other, conv.Tokenizer)
	}

	// A missing conversation is reported; the others are still recounted.
	out, errOut, code = runSub(t, runRecount, "--store", "sqlite:"+path, "--tenant", "acme", "--tokenizer", "estimate", "nope", "c1")
	if code != 1 || !strings.Contains(errOut, "recount acme/nope: conversation acme/nope: not found") || !strings.Contains(errOut, "1 of 2 conversations failed") ||
		!strings.HasPrefix(out, "c1 tokenizer=estimate messages=5 tokens=63 ") {
		t.Errorf("recount nope c1: exit %d, stdout %q, stderr %q; want exit 1, c1 recounted, nope not found", code, out, errOut)
	}
}

func TestRecountErrors(t *testing.T) {
	path := seedStore(t, chatmem.Key{Tenant: chatmem.DefaultTenant, ID: "c1"})
	store := "sqlite:" + path
	for _, tt := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no tokenizer", []string{"--store", store, "c1"}, 2, "needs --tokenizer"},
		{"no IDs", []string{"--store", store, "--tokenizer", "estimate"}, 2, "at least one conversation ID"},
		{"unknown tokenizer", []string{"--store", store, "--tokenizer", "gpt2", "c1"}, 2, "unknown tokenizer"},
		{"bad ID", []string{"--store", store, "--tokenizer", "estimate", "c/1"}, 2, "invalid input"},
		{"bad tenant", []string{"--store", store, "--tenant", "{x}", "--tokenizer", "estimate", "c1"}, 2, "tenant"},
		{"bad store", []string{"--store", "nosuch://x", "--tokenizer", "estimate", "c1"}, 2, "unknown store URL"},
		{"bad flag", []string{"--bogus"}, 2, "recount: unknown flag --bogus; run chatmem recount --help"},
		{"missing", []string{"--store", store, "--tokenizer", "estimate", "c2"}, 1, "not found"},
		{"help", []string{"--help"}, 0, "Example:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runSub(t, runRecount, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tt.code, tt.msg)
			}
		})
	}
}

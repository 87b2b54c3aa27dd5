package chatmem_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestNotStartedWarns checks that a Memory given extractors and never
// started says so, once, where it is seen: to slog.Default when no
// Logger was given (the library's default logger is silent otherwise),
// to the Logger when one was; and that a started or Sync Memory does not.
func TestNotStartedWarns(t *testing.T) {
	var def bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	appendTwo := func(mem *chatmem.Memory) {
		t.Helper()
		key := chatmem.Key{Tenant: "t", ID: "c"}
		for _, text := range []string{"Hi, I'm Kavya.", "My order SE-10423 is late."} {
			if _, err := mem.Append(t.Context(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: text}}, chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	newMem := func(mod func(*chatmem.Options)) *chatmem.Memory {
		t.Helper()
		opts := chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{offline.DefaultExtractor()}}
		if mod != nil {
			mod(&opts)
		}
		mem, err := chatmem.New(memstore.New(), opts)
		if err != nil {
			t.Fatal(err)
		}
		return mem
	}
	const want = "never started"

	appendTwo(newMem(nil))
	if n := strings.Count(def.String(), want); n != 1 {
		t.Errorf("never started, no Logger: slog.Default got %d warnings %q, want 1 naming Memory.Start", n, def.String())
	}
	if !strings.Contains(def.String(), "Memory.Start") || !strings.Contains(def.String(), "level=WARN") {
		t.Errorf("warning = %q, want a WARN naming Memory.Start", def.String())
	}

	def.Reset()
	var own bytes.Buffer
	appendTwo(newMem(func(o *chatmem.Options) { o.Logger = slog.New(slog.NewTextHandler(&own, nil)) }))
	if strings.Count(own.String(), want) != 1 || def.Len() != 0 {
		t.Errorf("never started, with a Logger: Logger got %q, slog.Default %q; want the one warning in the Logger only", own.String(), def.String())
	}

	started := newMem(nil)
	if err := started.Start(); err != nil {
		t.Fatal(err)
	}
	appendTwo(started)
	if err := started.Close(); err != nil {
		t.Fatal(err)
	}
	appendTwo(newMem(func(o *chatmem.Options) { o.Sync = true }))
	plain, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	appendTwo(plain)
	if def.Len() != 0 {
		t.Errorf("started, Sync, or nothing to do: slog.Default got %q, want nothing", def.String())
	}
}

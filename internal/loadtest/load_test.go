package loadtest

import (
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/httpapi"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestLoadAgainstServer drives a short, bounded load through a real server
// on the SQLite store and checks the verification finds every
// acknowledged append, in order.
func TestLoadAgainstServer(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "load.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(mem, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	cfg := LoadConfig{URL: srv.URL, Conversations: 20, Duration: 2 * time.Second, MaxTurns: 40,
		Policy: chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 400}, Verify: true}
	res, err := Load(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || !res.Verified || res.Acknowledged == 0 || res.Found != res.Acknowledged || res.AppendP50us == 0 || res.ContextP99us == 0 {
		t.Fatalf("load: %+v", res)
	}
	t.Logf("%d requests, %.0f/s, %d appends verified", res.Requests, res.RPS, res.Found)

	// The baseline runs the same loop against a bare handler.
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url, err := StartBaseline(bctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg.URL, cfg.Verify = url, false
	b, err := Load(ctx, cfg, io.Discard)
	if err != nil || b.Errors != 0 || b.Requests == 0 {
		t.Fatalf("baseline: %+v, %v", b, err)
	}
}

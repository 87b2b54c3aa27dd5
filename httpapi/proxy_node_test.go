package httpapi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem/internal/testenv"
)

// TestProxyNodeClient runs testdata/node/openai-client.mjs, the official
// `openai` npm client, against the proxy (which points at the fake OpenAI
// upstream): three turns, one streamed. .ci/run installs the package with
// `npm ci --prefix testdata/node`; without Node.js or the package the test
// skips, or fails under CI=true.
func TestProxyNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.SkipOrFail(t, "Node.js is not installed: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testenv.SkipOrFail(t, "the openai npm package is not installed (run npm ci --prefix testdata/node): %v", err)
	}
	env := newProxyEnv(t, proxyConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "openai-client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHATMEM_PROXY_URL="+env.url+"/v1", "CHATMEM_API_KEY="+proxyKey, "CHATMEM_CONVERSATION=node-1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node openai-client.mjs: %v\n%s", err, out)
	}
	t.Logf("node client:\n%s", out)

	// The upstream saw the memory grow: each turn carries the earlier ones.
	reqs := env.up.requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream got %d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if n := len(r.messages(t)); n != 2*i+1 {
			t.Errorf("upstream request %d carried %d messages, want %d", i+1, n, 2*i+1)
		}
	}
	stored := env.stored(t, "node-1")
	if len(stored) != 6 || !strings.Contains(stored[0].Content, "SE-10423") {
		t.Errorf("stored %d messages (%v), want the 3 turns with their replies", len(stored), brief(stored))
	}
}

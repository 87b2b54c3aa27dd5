package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	want := buildinfo.Read().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		out, errOut, code := runCLI(t, "", args...)
		if out != want || code != 0 {
			t.Errorf("chatmem %s = %q (exit %d, stderr %q), want %q", strings.Join(args, " "), out, code, errOut, want)
		}
	}
	out, errOut, code := runCLI(t, "", "version", "--json")
	var got buildinfo.Info
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got != buildinfo.Read() {
		t.Errorf("chatmem version --json = %q (exit %d, stderr %q, %v), want %+v", out, code, errOut, err, buildinfo.Read())
	}
	if _, errOut, code := runCLI(t, "", "version", "extra"); code != 2 {
		t.Errorf("chatmem version extra: exit %d (%q), want 2", code, errOut)
	}
}

// lockedBuffer collects a server's log, written while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestServeVersion starts `chatmem serve` and checks that it logs its build
// at start, answers GET /v1/version with it, and that `chatmem healthcheck`
// finds it healthy, and no longer once it has stopped.
func TestServeVersion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log lockedBuffer
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:", "--log-format", "json"}, nil, pw, &log)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listen line: %v (log: %s)", err, log.String())
	}
	go io.Copy(io.Discard, pr)
	base := strings.TrimSpace(strings.TrimPrefix(line, "chatmem listening on "))
	want := buildinfo.Read()

	var started map[string]any
	for l := range strings.SplitSeq(log.String(), "\n") {
		if strings.Contains(l, `"msg":"chatmem starting"`) {
			if err := json.Unmarshal([]byte(l), &started); err != nil {
				t.Fatalf("log line %s: %v", l, err)
			}
		}
	}
	if started == nil || started["version"] != want.Version || started["revision"] != want.Revision ||
		started["go_version"] != want.GoVersion || started["modified"] != want.Modified {
		t.Errorf("serve's log at start: %v; want the build %+v (log: %s)", started, want, log.String())
	}

	resp, err := http.Get(base + "/v1/version")
	if err != nil {
		t.Fatal(err)
	}
	var got buildinfo.Info
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || got != want {
		t.Errorf("GET /v1/version = %d %+v (%v), want 200 %+v", resp.StatusCode, got, err, want)
	}

	if out, errOut, code := runCLI(t, "", "healthcheck", "--url", base+"/healthz"); code != 0 || out != "" || errOut != "" {
		t.Errorf("healthcheck of a running server: exit %d, stdout %q, stderr %q; want 0 and silence", code, out, errOut)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not shut down")
	}
	if _, errOut, code := runCLI(t, "", "healthcheck", "--url", base+"/healthz"); code != 1 || !strings.HasPrefix(errOut, "chatmem: unhealthy: ") {
		t.Errorf("healthcheck of a stopped server: exit %d, stderr %q; want 1, chatmem: unhealthy: ...", code, errOut)
	}
}

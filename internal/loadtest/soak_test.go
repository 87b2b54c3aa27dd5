package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/sqlite"
)

// soakFor is how long TestSoak drives the server. The default keeps
// `go test ./...` short; CI runs
//
//	go test -count=1 -run '^TestSoak$' ./loadtest -soak 5m -v
//
// and a soak before a release runs half an hour:
//
//	go test -count=1 -run '^TestSoak$' ./loadtest -soak 30m -timeout 45m -v
var soakFor = flag.Duration("soak", 15*time.Second, "how long TestSoak drives the server (CI: 5m; locally: 30m with -timeout 45m)")

// TestSoak builds chatmem and runs `chatmem serve` in a process of its own
// on a SQLite store with the offline summarizer and rule
// extractor, so its /metrics shows the server's memory and goroutines
// alone, and soaks it over real HTTP on loopback for -soak: 10000
// conversations, 64 clients. It fails on any failed request, any message
// lost, duplicated or out of place, any summary or fact of another
// conversation or generation, resources that are not flat, an error in the
// server's log, or a server that does not shut down cleanly.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test: not with -short")
	}
	const verifyMargin = 3 * time.Minute // start, final read-back, cleanup, shutdown
	if d, ok := t.Deadline(); ok && time.Until(d) < *soakFor+verifyMargin {
		t.Fatalf("-soak %s does not fit in the test timeout (%s left): pass -timeout %s", *soakFor, time.Until(d).Round(time.Second), (*soakFor + verifyMargin + 5*time.Minute).Round(time.Minute))
	}
	dir := t.TempDir()
	base, stop := startSoakServer(t, dir,
		"serve", "--addr", "127.0.0.1:0", "--store", "sqlite:"+filepath.Join(dir, "soak.db"),
		"--summarizer", "offline", "--extractors", "rules", "--summary-trigger", "600", "--summary-target", "300",
		// A small tail cache fills during the warm-up, so that its growth to
		// its bound is not judged as a leak (the default, 32 MiB, takes the
		// whole run to fill with 10,000 short conversations).
		"--tail-cache-bytes", "4MiB",
		"--log-level", "warn")

	sample := min(max(*soakFor/60, time.Second), 10*time.Second)
	cfg := SoakConfig{URL: base, Conversations: DefaultSoakConversations, Workers: DefaultSoakWorkers, Duration: *soakFor, Sample: sample, MaxRSSGrowth: DefaultSoakRSSGrowth,
		CacheBytes: sqlite.WriteCacheBytes}
	var progress bytes.Buffer
	res, err := Soak(context.Background(), cfg, &syncWriter{w: &progress})
	var lines []string
	for _, l := range strings.Split(progress.String(), "\n") {
		if i := strings.LastIndexByte(l, '\r'); i >= 0 {
			l = l[i+1:] // the last state of a progress bar
		}
		lines = append(lines, l)
	}
	t.Log("\n" + strings.Join(lines, "\n"))
	t.Log(res.Line())
	if err != nil {
		t.Error(err)
	}
	if res.Ops["append"] == 0 || res.Ops["delete"] == 0 || res.Messages == 0 || res.Checked == 0 {
		t.Errorf("the soak did too little to mean anything: %+v", res)
	}
	if *soakFor >= time.Minute && res.Summaries == 0 {
		t.Errorf("no summary seen in %s: the summary path was not soaked", *soakFor)
	}
	stop()
}

// startSoakServer builds chatmem (the go command is on PATH where tests
// run), starts it in a child process and returns its base URL and a
// function that stops it with SIGTERM and checks that it exited cleanly and
// logged no error.
func startSoakServer(t *testing.T, dir string, args ...string) (string, func()) {
	t.Helper()
	bin := filepath.Join(dir, "chatmem")
	build := exec.Command("go", "build", "-o", bin, "github.com/chatmem/chatmem/cmd/chatmem")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build chatmem: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	logPath := filepath.Join(dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stopped bool
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
		logFile.Close()
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "chatmem listening on "); ok {
				lines <- l
			}
		}
		close(lines)
	}()
	var base string
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatalf("the server exited before listening; its log:\n%s", readFile(t, logPath))
		}
		base = strings.TrimSpace(l)
	case <-time.After(time.Minute):
		t.Fatalf("the server did not listen within a minute; its log:\n%s", readFile(t, logPath))
	}
	return base, func() {
		t.Helper()
		stopped = true
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the server did not exit cleanly after SIGTERM: %v", err)
			}
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Errorf("the server did not exit within a minute of SIGTERM")
		}
		var dropped int
		for _, l := range strings.Split(readFile(t, logPath), "\n") {
			switch {
			case strings.Contains(l, "level=ERROR"):
				t.Errorf("server logged an error: %s", l)
			case strings.Contains(l, "worker queue full"):
				dropped++
			}
		}
		if dropped > 0 {
			t.Logf("the server's worker queue was full %d times: that summary and fact work was dropped from the queue, to be caught up from the store's marks at each conversation's next append", dropped)
		}
	}
}

func readFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
	}
	return string(b)
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestSoakJudgeFlat(t *testing.T) {
	const mib = 1 << 20
	series := func(rss func(i int) float64, gor func(i int) float64) []SoakSample {
		var xs []SoakSample
		for i := range 40 {
			xs = append(xs, SoakSample{At: time.Duration(i) * time.Second, RSS: rss(i), Goroutines: gor(i)})
		}
		return xs
	}
	flat := func(int) float64 { return 80 * mib }
	tests := []struct {
		name    string
		samples []SoakSample
		warmup  time.Duration
		ok      bool
	}{
		{"flat", series(flat, func(int) float64 { return 70 }), 4 * time.Second, true},
		{"warm-up growth is not judged", series(func(i int) float64 { return float64(min(i, 4)) * 40 * mib }, func(int) float64 { return 70 }), 4 * time.Second, true},
		{"noise within the bound", series(func(i int) float64 { return float64(80+i%7) * mib }, func(i int) float64 { return float64(70 + i%30) }), 4 * time.Second, true},
		{"rss leak", series(func(i int) float64 { return float64(80+3*i) * mib }, func(int) float64 { return 70 }), 4 * time.Second, false},
		{"goroutine leak", series(flat, func(i int) float64 { return float64(70 + 10*i) }), 4 * time.Second, false},
		{"too few samples", series(flat, func(int) float64 { return 70 }), 38 * time.Second, false},
	}
	for _, tt := range tests {
		first, last, err := judgeFlat(tt.samples, tt.warmup, 0.25, 0)
		if (err == nil) != tt.ok {
			t.Errorf("%s: judgeFlat = %v (rss %.0f -> %.0f MiB, goroutines %.0f -> %.0f), want ok %t",
				tt.name, err, first.RSS/mib, last.RSS/mib, first.Goroutines, last.Goroutines, tt.ok)
		}
	}
}

func TestSoakParseMetrics(t *testing.T) {
	in := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 75
go_memstats_heap_inuse_bytes 3.1e+07
process_resident_memory_bytes 8.5e+07
chatmem_worker_queue_depth 3
chatmem_http_requests_total{route="x",method="GET",status="200"} 12
`
	x, err := parseMetrics(strings.NewReader(in))
	if err != nil || x.Goroutines != 75 || x.RSS != 8.5e7 || x.Heap != 3.1e7 || x.Queue != 3 {
		t.Errorf("parseMetrics = %+v, %v; want goroutines 75, rss 8.5e7, heap 3.1e7, queue 3", x, err)
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines 75\n")); err == nil || !strings.Contains(err.Error(), "process_resident_memory_bytes") {
		t.Errorf("parseMetrics without the process collector: %v, want an error naming process_resident_memory_bytes", err)
	}
}

// TestSoakChecks checks that the log's checks catch what they are for: a
// message of a deleted generation, one never sent, a gap, and a summary
// or fact naming another generation.
func TestSoakChecks(t *testing.T) {
	c := &soakConv{num: 7, gen: 2, inflight: map[int32]bool{}}
	c.sent = 3
	for m := range int32(3) {
		if err := c.ack(int64(m)+1, m); err != nil {
			t.Fatal(err)
		}
	}
	msg := func(seq int64, gen int, m int32) chatmem.Message {
		x := soakMessage(7, gen, m)
		x.Seq = seq
		return x
	}
	all := client.ContextParams{Policy: chatmem.PolicyAll}
	good := chatmem.Window{Messages: []chatmem.Message{msg(1, 2, 0), msg(2, 2, 1), msg(3, 2, 2)}}
	if err := checkWindow(c, 7, all, good, 3); err != nil {
		t.Errorf("a window as logged: %v", err)
	}
	tests := []struct {
		name string
		w    chatmem.Window
	}{
		{"old generation", chatmem.Window{Messages: []chatmem.Message{msg(1, 1, 0), msg(2, 2, 1), msg(3, 2, 2)}}},
		{"gap", chatmem.Window{Messages: []chatmem.Message{msg(1, 2, 0), msg(3, 2, 2)}}},
		{"ends early", chatmem.Window{Messages: []chatmem.Message{msg(1, 2, 0), msg(2, 2, 1)}}},
		{"swapped", chatmem.Window{Messages: []chatmem.Message{msg(1, 2, 0), msg(2, 2, 2), msg(3, 2, 1)}}},
		{"never sent", chatmem.Window{Messages: []chatmem.Message{msg(1, 2, 0), msg(2, 2, 1), msg(3, 2, 2), msg(4, 2, 3)}}},
		{"summary of the old generation", chatmem.Window{Messages: good.Messages, Summary: &chatmem.Summary{Text: "user: My order SE-00007-G1 hasn't arrived", CoversSeq: 1}}},
		{"fact of another conversation", chatmem.Window{Messages: good.Messages, Facts: []chatmem.Fact{{Key: "email", Value: "kavya.c8g2@example.com"}}}},
	}
	for _, tt := range tests {
		if err := checkWindow(c, 7, all, tt.w, 3); err == nil {
			t.Errorf("%s: checkWindow = nil, want an error", tt.name)
		}
	}
	if err := c.ack(2, 5); err == nil {
		t.Error("a seq acknowledged twice: ack = nil, want an error")
	}
}

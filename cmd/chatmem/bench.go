package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

// benchResult is one line of `chatmem bench --json`.
type benchResult struct {
	Store          string  `json:"store"`
	Policy         string  `json:"policy"`
	Messages       int     `json:"messages"`
	Budget         int     `json:"budget"`
	P50us          float64 `json:"p50_us"`
	P99us          float64 `json:"p99_us"`
	WindowMessages int     `json:"window_messages"`
	FillSeconds    float64 `json:"fill_s"`
}

func runBench(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench",
		"bench [--store URL] [--messages 1000,100000,1000000] [--budget 4000] [--policy P] [--turns N] [--iterations 300] [--json]\n"+
			"       chatmem bench --http URL [--api-key K] [--conversations 1000] [--duration 30s] [--baseline]\n"+
			"       chatmem bench --http URL --soak [--conversations 10000] [--duration 30m] [--workers 64] [--sample 10s] [--max-rss-growth 0.25]\n\n"+
			"For each size, fills one conversation with that many messages (with a progress bar on\n"+
			"standard error), then measures per-turn cost: append one message and read the context\n"+
			"under the policy. Prints p50 and p99 per size; with --json one JSON object per size.\n"+
			"The benchmark conversations are deleted afterwards.\n\n"+
			"With --http, load-tests a running server instead: one client per conversation appends a\n"+
			"message and reads the context, over and over, for --duration (at most --max-turns turns),\n"+
			"then every conversation is read back and checked: each acknowledged append present once, in\n"+
			"order. Exits 1 on any error or lost message. Only point it at servers you run.\n\n"+
			"With --http and --soak, soak-tests it: --workers clients make a mix of appends, context reads\n"+
			"(every policy), summary and facts reads and deletes over --conversations conversations for\n"+
			"--duration, scraping /metrics every --sample; then every conversation is checked against\n"+
			"what the clients were told. Exits 1 on any error, any difference, or resident memory or\n"+
			"goroutines not flat. Start the server with a summarizer, a low --summary-trigger (600) and a small --tail-cache-mb (4).",
		"chatmem bench --store sqlite:/tmp/bench.db --messages 1000,1000000 --budget 4000", stderr)
	storeURL := fs.String("store", "", storeURLHelp)
	dataDir := fs.String("data-dir", defaultDataDir, "data directory of the default SQLite store")
	sizesFlag := fs.String("messages", "1000,100000,1000000", "comma-separated conversation sizes")
	budget := fs.Int("budget", 4000, "token budget")
	policy := fs.String("policy", string(chatmem.PolicyTokenBudget), "policy: "+strings.Join(policyNames(), ", "))
	turns := fs.Int("turns", 0, "turns (last_turns)")
	facts := fs.Bool("facts", false, "add the facts block (runs the rule extractor in the worker)")
	iterations := fs.Int("iterations", 300, "measured turns per size")
	asJSON := fs.Bool("json", false, "print one JSON object per size")
	httpURL := fs.String("http", "", "load-test a running server at this URL instead (see --conversations)")
	apiKey := fs.String("api-key", "", "API key for --http (default $CHATMEM_API_KEY)")
	conversations := fs.Int("conversations", 1000, "with --http: concurrent clients, one conversation each")
	duration := fs.Duration("duration", 30*time.Second, "with --http: how long to drive the load")
	maxTurns := fs.Int("max-turns", 100000, "with --http: most turns per conversation")
	baseline := fs.Bool("baseline", false, "with --http: also drive a bare net/http handler the same way and print the throughput ratio")
	soak := addSoakFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *soak.soak && *httpURL == "" {
		return usageErr("--soak needs --http URL: it soaks a running server")
	}
	if *httpURL != "" {
		p := chatmem.Policy{Kind: chatmem.PolicyKind(*policy), Budget: *budget, Turns: *turns}
		if err := p.Validate(); err != nil {
			return &exitError{code: 2, err: err}
		}
		if *conversations < 1 || *maxTurns < 1 || *duration <= 0 {
			return usageErr("--conversations, --max-turns and --duration must be positive")
		}
		if *apiKey == "" {
			*apiKey = os.Getenv("CHATMEM_API_KEY")
		}
		if *soak.soak {
			cfg, err := soak.config(strings.TrimRight(*httpURL, "/"), *apiKey, *conversations, *duration)
			if err != nil {
				return err
			}
			return benchSoak(ctx, cfg, *asJSON, stdout, stderr)
		}
		cfg := loadConfig{url: strings.TrimRight(*httpURL, "/"), apiKey: *apiKey, conversations: *conversations, duration: *duration, maxTurns: *maxTurns, policy: p, verify: true}
		return benchHTTP(ctx, cfg, *baseline, *asJSON, stdout, stderr)
	}
	sizes, err := parseSizes(*sizesFlag)
	if err != nil {
		return err
	}
	p := chatmem.Policy{Kind: chatmem.PolicyKind(*policy), Budget: *budget, Turns: *turns, Facts: *facts}
	if err := p.Validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	if *iterations < 1 {
		return usageErr("--iterations must be at least 1")
	}
	store, err := openStore(ctx, *storeURL, *dataDir)
	if err != nil {
		return err
	}
	defer store.Close()
	opts := chatmem.Options{Counter: tokenizer.Estimate{}}
	if p.Kind == chatmem.PolicySummaryBuffer || p.Facts {
		// As a server runs it: the offline summarizer and rule extractor in
		// the worker, off the measured path.
		opts.Summarizer = offline.NewSummarizer(offline.Options{})
		opts.Extractors = []chatmem.Extractor{offline.DefaultExtractor()}
	}
	mem, err := chatmem.New(store, opts)
	if err != nil {
		return err
	}
	if err := mem.Start(); err != nil {
		return err
	}
	defer mem.Close()

	var results []benchResult
	for _, n := range sizes {
		r, err := benchSize(ctx, mem, p, n, *iterations, stderr)
		if err != nil {
			return err
		}
		r.Store = storeName(*storeURL)
		results = append(results, r)
		if *asJSON {
			if err := json.NewEncoder(stdout).Encode(r); err != nil {
				return err
			}
		}
	}
	if !*asJSON {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "store\tpolicy\tmessages\tbudget\tp50 µs\tp99 µs\twindow msgs\tfill s\t")
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%d\t%.1f\t\n", r.Store, r.Policy, r.Messages, r.Budget, r.P50us, r.P99us, r.WindowMessages, r.FillSeconds)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(results) > 1 {
			first, last := results[0], results[len(results)-1]
			fmt.Fprintf(stdout, "p50 at %d messages / p50 at %d: %.2fx\n", last.Messages, first.Messages, last.P50us/first.P50us)
		}
	}
	return nil
}

// benchHTTP runs the load against the server (and the baseline) and fails
// if anything was lost or any request failed.
func benchHTTP(ctx context.Context, cfg loadConfig, baseline, asJSON bool, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "driving %d conversations against %s for %s\n", cfg.conversations, cfg.url, cfg.duration)
	res, err := runLoad(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	results := []loadResult{res}
	if baseline {
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		url, err := startBaseline(bctx)
		if err != nil {
			return err
		}
		base := cfg
		base.url, base.verify = url, false
		fmt.Fprintf(stderr, "driving the same load against a bare net/http handler at %s\n", url)
		b, err := runLoad(ctx, base, stderr)
		if err != nil {
			return err
		}
		b.Target = "bare net/http"
		results = append(results, b)
	}
	if err := printLoad(stdout, results, asJSON); err != nil {
		return err
	}
	if res.Errors > 0 || !res.Verified {
		return fmt.Errorf("load test failed: %d errors; %d appends acknowledged, %d found", res.Errors, res.Acknowledged, res.Found)
	}
	return nil
}

func parseSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, usageErr("--messages: %q is not a positive number", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// benchContent is about 40 tokens under the seed's estimator.
const benchContent = "Customer asks where order SE-10423 is; the agent says it is out for delivery and should arrive by 8 pm, and offers running socks for Rs 249."

func benchSize(ctx context.Context, mem *chatmem.Memory, p chatmem.Policy, n, iterations int, progress io.Writer) (benchResult, error) {
	var suffix [4]byte
	rand.Read(suffix[:])
	key := chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("bench-%d-%s", n, hex.EncodeToString(suffix[:]))}
	defer mem.Store().Delete(context.WithoutCancel(ctx), key)

	text := func(i int) string { return fmt.Sprintf("%d: %s", i, benchContent) }
	if p.Kind == chatmem.PolicyRecall || p.Recall {
		// Recall searches the words: one sentence repeated would make every
		// term common. Sentences of a Zipf vocabulary have rare and common
		// words, as chats do.
		text = zipfText
	}
	message := func(i int) chatmem.Message {
		role := chatmem.RoleUser
		if i%2 == 1 {
			role = chatmem.RoleAssistant
		}
		return chatmem.Message{Role: role, Content: text(i)}
	}
	start := time.Now()
	bar := newProgress(progress, fmt.Sprintf("filling %d messages", n), n)
	batch := make([]chatmem.Message, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, message(i))
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := mem.Append(ctx, key, batch, chatmem.AppendOptions{}); err != nil {
				return benchResult{}, err
			}
			batch = batch[:0]
			bar.set(i + 1)
		}
	}
	bar.done()
	fill := time.Since(start)
	// Reach a steady state before measuring: the worker has caught up with
	// the fill (summaries, facts), and the collector has finished with the
	// fill's garbage, so the turns pay for neither.
	if err := mem.Flush(ctx); err != nil {
		return benchResult{}, err
	}
	runtime.GC()

	// Each turn appends the next message and reads the context, as a chat
	// backend does once per user message. A few warm-up turns come first.
	const warmup = 10
	var window int
	durations := make([]time.Duration, 0, iterations)
	for i := 0; i < warmup+iterations; i++ {
		t0 := time.Now()
		if _, err := mem.Append(ctx, key, []chatmem.Message{message(n + i)}, chatmem.AppendOptions{}); err != nil {
			return benchResult{}, err
		}
		w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
		if err != nil {
			return benchResult{}, err
		}
		if i >= warmup {
			durations = append(durations, time.Since(t0))
		}
		window = len(w.Messages)
	}
	slices.Sort(durations)
	pct := func(q float64) float64 {
		return float64(durations[int(q*float64(len(durations)-1))].Nanoseconds()) / 1e3
	}
	return benchResult{Policy: string(p.Kind), Messages: n, Budget: p.Budget, P50us: pct(0.50), P99us: pct(0.99), WindowMessages: window, FillSeconds: fill.Seconds()}, nil
}

// progress draws a one-line progress bar, redrawn in place.
type progress struct {
	w         io.Writer
	label     string
	total     int
	lastDrawn time.Time
	lastPct   int
}

func newProgress(w io.Writer, label string, total int) *progress {
	p := &progress{w: w, label: label, total: total, lastPct: -1}
	p.set(0)
	return p
}

func (p *progress) set(done int) {
	pct := done * 100 / max(p.total, 1)
	if pct == p.lastPct || (time.Since(p.lastDrawn) < 200*time.Millisecond && done < p.total) {
		return
	}
	p.lastPct, p.lastDrawn = pct, time.Now()
	const width = 30
	filled := pct * width / 100
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%%", p.label, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), pct)
}

func (p *progress) done() {
	p.set(p.total)
	fmt.Fprintln(p.w)
}

// benchVocabulary is 5,000 made-up words, the same on every run.
var benchVocabulary = func() []string {
	syllables := strings.Fields("ba ko mi ru te sa no li pe da gu fi ro ne ta vi lo su ke ma")
	words := make([]string, 0, 5000)
	for i := 0; len(words) < cap(words); i++ {
		var b strings.Builder
		for n := i; ; n /= len(syllables) {
			b.WriteString(syllables[n%len(syllables)])
			if n < len(syllables) {
				break
			}
		}
		if b.Len() >= 4 {
			words = append(words, b.String())
		}
	}
	return words
}()

// zipfText returns message i's text for recall benchmarks: 8 to 23 words
// of benchVocabulary drawn with Zipf frequencies (s = 1.1), the same for
// the same i.
func zipfText(i int) string {
	r := mrand.New(mrand.NewSource(int64(i)))
	z := mrand.NewZipf(r, 1.1, 1, uint64(len(benchVocabulary)-1))
	n := 8 + r.Intn(16)
	words := make([]string, n)
	for j := range words {
		words[j] = benchVocabulary[z.Uint64()]
	}
	return strings.Join(words, " ")
}

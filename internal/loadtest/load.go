package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/progress"
)

// LoadConfig is one HTTP load run: conversations clients, each owning a
// conversation, alternating an append and a context read, until duration
// or maxTurns.
type LoadConfig struct {
	// URL is the server's base URL; APIKey its key, if it needs one.
	URL, APIKey   string
	Conversations int
	Duration      time.Duration
	MaxTurns      int
	// Policy is the context read after each append.
	Policy chatmem.Policy
	// Verify reads every conversation back and checks count and order.
	Verify bool
}

// LoadResult is what `chatmem bench --http` reports, per target.
type LoadResult struct {
	Target        string  `json:"target"`
	Conversations int     `json:"conversations"`
	Seconds       float64 `json:"seconds"`
	Requests      int64   `json:"requests"`
	RPS           float64 `json:"requests_per_s"`
	AppendP50us   float64 `json:"append_p50_us"`
	AppendP99us   float64 `json:"append_p99_us"`
	ContextP50us  float64 `json:"context_p50_us"`
	ContextP99us  float64 `json:"context_p99_us"`
	Errors        int64   `json:"errors"`
	Acknowledged  int64   `json:"appends_acknowledged"`
	Found         int64   `json:"appends_found"`
	Verified      bool    `json:"verified"`
}

// Load drives the load and, with Verify, checks afterwards that every
// acknowledged append is stored once, in order. The first error and the
// verification's progress go to log.
func Load(ctx context.Context, cfg LoadConfig, log io.Writer) (LoadResult, error) {
	if cfg.URL == "" || cfg.Conversations < 1 || cfg.MaxTurns < 1 || cfg.Duration <= 0 {
		return LoadResult{}, errors.New("load: needs a URL, and positive conversations, turns and duration")
	}
	transport := &http.Transport{MaxIdleConns: cfg.Conversations, MaxIdleConnsPerHost: cfg.Conversations, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer transport.CloseIdleConnections()
	api := client.New(cfg.URL, cfg.APIKey, &http.Client{Transport: transport, Timeout: 30 * time.Second})

	run := fmt.Sprintf("load-%d", time.Now().UnixNano())
	acked := make([]int64, cfg.Conversations)
	var errCount, requests atomic.Int64
	var firstErr atomic.Value
	var mu sync.Mutex
	var appendLat, contextLat []time.Duration

	lctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range cfg.Conversations {
		wg.Go(func() {
			id := fmt.Sprintf("%s-%d", run, c)
			var al, cl []time.Duration
			defer func() {
				mu.Lock()
				appendLat = append(appendLat, al...)
				contextLat = append(contextLat, cl...)
				mu.Unlock()
			}()
			for turn := 0; turn < cfg.MaxTurns && lctx.Err() == nil; turn++ {
				msg := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("turn %d: where is order SE-%05d?", turn, c)}
				if turn%2 == 1 {
					msg.Role = chatmem.RoleAssistant
				}
				t0 := time.Now()
				_, err := api.Append(lctx, id, []chatmem.Message{msg}, client.AppendOptions{IdempotencyKey: fmt.Sprint(turn)})
				if lctx.Err() != nil {
					// Cut off by the end of the run: the append may or may
					// not have landed; settle it with the same idempotency key.
					_, err = api.Append(context.WithoutCancel(ctx), id, []chatmem.Message{msg}, client.AppendOptions{IdempotencyKey: fmt.Sprint(turn)})
					if err == nil {
						acked[c]++
					}
					return
				}
				requests.Add(1)
				if err != nil {
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err)
					// The append may have landed before the error: settle it
					// with the same idempotency key, then stop this client.
					time.Sleep(100 * time.Millisecond)
					if _, err := api.Append(context.WithoutCancel(ctx), id, []chatmem.Message{msg}, client.AppendOptions{IdempotencyKey: fmt.Sprint(turn)}); err == nil {
						acked[c]++
					}
					return
				}
				acked[c]++
				al = append(al, time.Since(t0))
				t0 = time.Now()
				_, err = api.Context(lctx, id, client.ContextParams{Policy: cfg.Policy.Kind, Budget: cfg.Policy.Budget, Turns: cfg.Policy.Turns})
				if lctx.Err() != nil {
					return
				}
				requests.Add(1)
				if err != nil && !errors.Is(err, chatmem.ErrBudgetTooSmall) {
					errCount.Add(1)
					firstErr.CompareAndSwap(nil, err)
					return
				}
				cl = append(cl, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	res := LoadResult{
		Target: cfg.URL, Conversations: cfg.Conversations, Seconds: elapsed.Seconds(),
		Requests: requests.Load(), RPS: float64(requests.Load()) / elapsed.Seconds(), Errors: errCount.Load(),
	}
	res.AppendP50us, res.AppendP99us = percentiles(appendLat)
	res.ContextP50us, res.ContextP99us = percentiles(contextLat)
	for _, n := range acked {
		res.Acknowledged += n
	}
	if err, _ := firstErr.Load().(error); err != nil {
		fmt.Fprintf(log, "first error: %v\n", err)
	}
	if !cfg.Verify {
		return res, nil
	}
	found, err := verifyLoad(ctx, api, run, acked, log)
	res.Found = found
	res.Verified = err == nil && found == res.Acknowledged
	if err != nil {
		return res, err
	}
	for c := range cfg.Conversations {
		api.Delete(ctx, fmt.Sprintf("%s-%d", run, c))
	}
	return res, nil
}

// verifyLoad reads every conversation back: exactly the acknowledged
// appends, dense sequence numbers, in the order they were sent.
func verifyLoad(ctx context.Context, api *client.Client, run string, acked []int64, log io.Writer) (int64, error) {
	var found int64
	bar := progress.New(log, "verifying conversations", len(acked))
	for c, want := range acked {
		id := fmt.Sprintf("%s-%d", run, c)
		var after int64
		for {
			page, err := api.Messages(ctx, id, after, 1000)
			if errors.Is(err, chatmem.ErrNotFound) && want == 0 {
				break
			}
			if err != nil {
				return found, fmt.Errorf("conversation %s: %w", id, err)
			}
			for _, m := range page.Messages {
				turn := m.Seq - 1
				if !strings.HasPrefix(m.Content, fmt.Sprintf("turn %d:", turn)) {
					return found, fmt.Errorf("conversation %s: seq %d holds %q, want turn %d", id, m.Seq, m.Content, turn)
				}
				found++
				after = m.Seq
			}
			if page.NextAfter == nil {
				break
			}
		}
		if after != want {
			return found, fmt.Errorf("conversation %s: %d messages stored, %d acknowledged", id, after, want)
		}
		bar.Set(c + 1)
	}
	bar.Done()
	return found, nil
}

func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Nanoseconds()) / 1e3 }
	return at(0.50), at(0.99)
}

// bareHandler is the baseline: net/http answering the same requests with
// a fixed small JSON body and no work behind it.
func bareHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"messages":[],"conversation":{}}`)
			return
		}
		io.WriteString(w, `{"messages":[],"tokens":0,"dropped":0,"facts":[]}`)
	})
}

// StartBaseline serves bareHandler on a loopback port until ctx ends.
func StartBaseline(ctx context.Context) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: bareHandler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	go func() { <-ctx.Done(); srv.Close() }()
	return "http://" + ln.Addr().String(), nil
}

func WriteLoad(w io.Writer, results []LoadResult, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tconvs\ts\trequests\treq/s\tappend p50 µs\tp99 µs\tcontext p50 µs\tp99 µs\terrors\tacked\tfound\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t\n", r.Target, r.Conversations, r.Seconds, r.Requests, r.RPS,
			r.AppendP50us, r.AppendP99us, r.ContextP50us, r.ContextP99us, r.Errors, r.Acknowledged, r.Found)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(results) == 2 && results[1].RPS > 0 {
		fmt.Fprintf(w, "throughput against the bare net/http handler: %.2fx\n", results[0].RPS/results[1].RPS)
	}
	return nil
}

// LoadAndCompare runs the load against cfg.URL and, with baseline, the
// same load against a bare net/http handler (its result second). The
// error is not nil if any request failed or an acknowledged append was
// not found.
func LoadAndCompare(ctx context.Context, cfg LoadConfig, baseline bool, log io.Writer) ([]LoadResult, error) {
	fmt.Fprintf(log, "driving %d conversations against %s for %s\n", cfg.Conversations, cfg.URL, cfg.Duration)
	res, err := Load(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	results := []LoadResult{res}
	if baseline {
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		url, err := StartBaseline(bctx)
		if err != nil {
			return nil, err
		}
		base := cfg
		base.URL, base.Verify = url, false
		fmt.Fprintf(log, "driving the same load against a bare net/http handler at %s\n", url)
		b, err := Load(ctx, base, log)
		if err != nil {
			return nil, err
		}
		b.Target = "bare net/http"
		results = append(results, b)
	}
	if res.Errors > 0 || (cfg.Verify && !res.Verified) {
		return results, fmt.Errorf("load test failed: %d errors; %d appends acknowledged, %d found", res.Errors, res.Acknowledged, res.Found)
	}
	return results, nil
}

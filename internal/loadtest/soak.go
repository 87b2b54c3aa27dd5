package loadtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/progress"
)

// The soak test (`chatmem bench --http URL --soak`, Soak) drives a running server
// for a long time with a mix of appends, context reads, summary and facts
// reads and deletes over many conversations, keeps a log of what the
// server acknowledged, and checks three things: no request fails, the
// final state of every conversation is exactly what the log says, and the
// server's resident memory and goroutines (scraped from its /metrics) stay
// flat.
//
// The log is exact although several clients may work on one conversation
// at once: appends and reads of a conversation run concurrently (each
// append learns its sequence numbers from the answer), and a delete of it
// runs alone, so what a conversation holds is always the acknowledged
// appends since its last acknowledged delete.

// SoakConfig is one soak run.
type SoakConfig struct {
	// URL is the server's base URL; APIKey its key, if it needs one.
	URL, APIKey string
	// Conversations are drawn from by Workers concurrent clients, for
	// Duration.
	Conversations int
	Workers       int
	Duration      time.Duration
	// Sample is how often the server's /metrics is scraped.
	Sample time.Duration
	// Warmup is the start of the run whose samples are not judged (0:
	// a tenth of Duration).
	Warmup time.Duration
	// MaxRSSGrowth bounds the growth of the resident memory: the mean of
	// the last quarter of the judged samples may exceed the first
	// quarter's by at most this fraction of it, plus rssSlack.
	MaxRSSGrowth float64
	// CacheBytes is memory the server may fill during the run on top of
	// that, in caches bounded by design (the SQLite store's write page
	// cache, sqlite.WriteCacheBytes): they fill once, where a leak goes
	// on growing.
	CacheBytes int64
}

// The soak's defaults for what a caller does not choose: 10,000
// conversations for half an hour, 64 clients, /metrics every 10 seconds,
// resident memory growing by at most a quarter.
const (
	DefaultSoakConversations = 10000
	DefaultSoakDuration      = 30 * time.Minute
	DefaultSoakWorkers       = 64
	DefaultSoakSample        = 10 * time.Second
	DefaultSoakRSSGrowth     = 0.25
)

// Validate reports a configuration the soak cannot run.
func (cfg SoakConfig) Validate() error {
	if cfg.URL == "" || cfg.Conversations < 1 || cfg.Workers < 1 || cfg.Duration <= 0 || cfg.Sample <= 0 || cfg.MaxRSSGrowth < 0 {
		return errors.New("soak: needs a URL, positive conversations, workers, duration and sample, and a max RSS growth not negative")
	}
	return nil
}

// rssSlack is the absolute growth of the resident memory always allowed, so
// that a small process's GC target and SQLite's page caches filling up on a
// short run do not count as a leak.
const rssSlack = 16 << 20

// Goroutines may grow by goroutineGrowth of the first quarter's mean plus
// goroutineSlack (connections coming and going, the worker's jobs).
const (
	goroutineGrowth = 0.2
	goroutineSlack  = 50
)

// soakOp is one kind of request the soak makes.
type soakOp int

const (
	opAppend soakOp = iota
	opContext
	opSummary
	opFacts
	opDelete
	numSoakOps
)

func (o soakOp) String() string {
	switch o {
	case opAppend:
		return "append"
	case opContext:
		return "context"
	case opSummary:
		return "summary"
	case opFacts:
		return "facts"
	case opDelete:
		return "delete"
	}
	return "op" + strconv.Itoa(int(o))
}

// pickOp draws the next request: 40% appends, 38% context reads, 10%
// summary reads, 10% facts reads, 2% deletes. With deletes that rare, a
// busy conversation lives for about a hundred requests: long enough to be
// summarized, short enough that the data stay bounded.
func pickOp(r *rand.Rand) soakOp {
	switch n := r.IntN(100); {
	case n < 40:
		return opAppend
	case n < 78:
		return opContext
	case n < 88:
		return opSummary
	case n < 98:
		return opFacts
	}
	return opDelete
}

// soakConv is one conversation and the log of what the server told the
// clients about it.
type soakConv struct {
	id  string
	num int // the conversation's index, which its messages name
	// op is held shared by appends and reads and alone by a delete.
	op sync.RWMutex
	mu sync.Mutex // guards the fields below
	// touched: some request was made for the conversation.
	touched bool
	// gen counts the deletes settled; a new generation starts empty, and
	// its messages, idempotency keys, facts and summaries name it.
	gen int
	// appends counts the appends started in this generation; append i
	// sends messages 2i and (if two) 2i+1.
	appends int
	// sent counts the messages sent in this generation: no sequence
	// number can be higher.
	sent int64
	// slots[seq-1] is the message acknowledged at seq, -1 until then.
	slots []int32
	// acked counts the filled slots; maxAcked is the highest filled seq.
	acked, maxAcked int64
	// inflight holds the messages sent and not yet acknowledged.
	inflight map[int32]bool
	// unknown: a request failed and could not be settled, so the state
	// is not known until the next settled delete.
	unknown bool
}

// reset starts the next generation, after a delete the server settled.
func (c *soakConv) reset() {
	c.gen++
	c.appends, c.sent, c.acked, c.maxAcked = 0, 0, 0, 0
	c.slots = c.slots[:0]
	clear(c.inflight)
	c.unknown = false
}

// ack records that the server stored message m at seq.
func (c *soakConv) ack(seq int64, m int32) error {
	if seq < 1 || seq > c.sent {
		return fmt.Errorf("seq %d outside 1..%d, the messages sent", seq, c.sent)
	}
	for int64(len(c.slots)) < seq {
		c.slots = append(c.slots, -1)
	}
	if prev := c.slots[seq-1]; prev >= 0 {
		return fmt.Errorf("seq %d acknowledged twice: message %d, then %d", seq, prev, m)
	}
	c.slots[seq-1] = m
	c.acked++
	c.maxAcked = max(c.maxAcked, seq)
	delete(c.inflight, m)
	return nil
}

// soakMessage is message m of generation gen of conversation c. Its
// content starts with a tag naming all three, and mentions an order ID and
// an email address naming the conversation and generation, which the rule
// extractor turns into facts and the offline summarizer keeps: a fact or
// summary of another generation or conversation shows in its values.
func soakMessage(c, gen int, m int32) chatmem.Message {
	tag := fmt.Sprintf("c%d g%d m%d:", c, gen, m)
	order := fmt.Sprintf("SE-%05d-G%d", c, gen)
	if m%2 == 0 {
		var s string
		switch (m / 2) % 3 {
		case 0:
			s = fmt.Sprintf("%s Hi, I'm Kavya. My order %s hasn't arrived yet; write to kavya.c%dg%d@example.com.", tag, order, c, gen)
		case 1:
			s = fmt.Sprintf("%s Can you check order %s again? I need it before the weekend.", tag, order)
		default:
			s = fmt.Sprintf("%s Also, do you have running socks in size M? Please add two pairs to my cart.", tag)
		}
		return chatmem.Message{Role: chatmem.RoleUser, Content: s}
	}
	var s string
	switch (m / 2) % 3 {
	case 0:
		s = fmt.Sprintf("%s Sorry Kavya! Order %s is out for delivery and should arrive by 8 pm today.", tag, order)
	case 1:
		s = fmt.Sprintf("%s Yes: DryFit ankle socks (pack of 3) for Rs 249 and CushionRun for Rs 199.", tag)
	default:
		s = fmt.Sprintf("%s Done: the socks are in your cart and ship with order %s.", tag, order)
	}
	return chatmem.Message{Role: chatmem.RoleAssistant, Content: s}
}

// reSoakTag finds the conversation and generation a text names: in a
// message's tag, an order ID or an email address of soakMessage.
var reSoakTag = regexp.MustCompile(`\bc(\d+) g(\d+) m\d+:|SE-(\d+)-G(\d+)|kavya\.c(\d+)g(\d+)@`)

// checkNames returns an error if text names a conversation or generation
// other than (c, gen).
func checkNames(what, text string, c, gen int) error {
	for _, m := range reSoakTag.FindAllStringSubmatch(text, -1) {
		for i := 1; i+1 < len(m); i += 2 {
			if m[i] == "" {
				continue
			}
			gc, _ := strconv.Atoi(m[i])
			gg, _ := strconv.Atoi(m[i+1])
			if gc != c || gg != gen {
				return fmt.Errorf("%s names conversation %d generation %d, want %d generation %d: %q", what, gc, gg, c, gen, m[0])
			}
		}
	}
	return nil
}

// parseTag returns the conversation, generation and message number of a
// soakMessage's content.
func parseTag(content string) (c, gen int, m int32, err error) {
	if _, err := fmt.Sscanf(content, "c%d g%d m%d:", &c, &gen, &m); err != nil {
		return 0, 0, 0, fmt.Errorf("content %q is not a soak message", trim(content))
	}
	return c, gen, m, nil
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// SoakSample is one scrape of the server's /metrics.
type SoakSample struct {
	At         time.Duration `json:"-"`
	RSS        float64       `json:"rss_bytes"`
	Goroutines float64       `json:"goroutines"`
	Heap       float64       `json:"heap_inuse_bytes"`
	Queue      float64       `json:"worker_queue"`
}

// SoakResult is what a soak reports.
type SoakResult struct {
	Target         string           `json:"target"`
	Seconds        float64          `json:"seconds"`
	Conversations  int              `json:"conversations"`
	Workers        int              `json:"workers"`
	Ops            map[string]int64 `json:"ops"`
	Requests       int64            `json:"requests"`
	Errors         int64            `json:"errors"`
	BudgetTooSmall int64            `json:"budget_too_small"`
	Checked        int64            `json:"conversations_checked"`
	Unchecked      int64            `json:"conversations_unknown"`
	Messages       int64            `json:"messages_checked"`
	Summaries      int64            `json:"summaries_seen"`
	Samples        int              `json:"samples"`
	First          SoakSample       `json:"first_quarter"`
	Last           SoakSample       `json:"last_quarter"`
	MaxRSS         float64          `json:"max_rss_bytes"`
	MaxQueue       float64          `json:"max_worker_queue"`
	Flat           bool             `json:"flat"`
	Verdict        string           `json:"verdict"`
}

func (r SoakResult) Line() string {
	var ops []string
	for o := range numSoakOps {
		ops = append(ops, fmt.Sprintf("%s %d", o, r.Ops[o.String()]))
	}
	mib := func(b float64) string { return fmt.Sprintf("%.1f", b/(1<<20)) }
	return fmt.Sprintf("soak %s: %.0fs, %d requests (%s; %d budget too small), %d errors; %d conversations checked (%d messages, %d unknown), %d summaries seen; "+
		"rss %s -> %s MiB (max %s), heap %s -> %s MiB, goroutines %.0f -> %.0f, worker queue max %.0f (first/last quarter means of %d samples): %s",
		r.Target, r.Seconds, r.Requests, strings.Join(ops, ", "), r.BudgetTooSmall, r.Errors, r.Checked, r.Messages, r.Unchecked, r.Summaries,
		mib(r.First.RSS), mib(r.Last.RSS), mib(r.MaxRSS), mib(r.First.Heap), mib(r.Last.Heap), r.First.Goroutines, r.Last.Goroutines, r.MaxQueue, r.Samples, r.Verdict)
}

// soak is one running soak test.
type soak struct {
	cfg    SoakConfig
	client *client.Client
	hc     *http.Client
	convs  []*soakConv
	log    io.Writer

	ops            [numSoakOps]atomic.Int64
	errors         atomic.Int64
	budgetTooSmall atomic.Int64
	summaries      atomic.Int64

	logMu  sync.Mutex
	logged int
}

// maxLoggedErrors bounds the errors printed as they happen.
const maxLoggedErrors = 20

// fail counts an error and prints the first few.
func (s *soak) fail(format string, args ...any) {
	s.errors.Add(1)
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.logged++
	if s.logged <= maxLoggedErrors {
		fmt.Fprintf(s.log, "soak error: "+format+"\n", args...)
	} else if s.logged == maxLoggedErrors+1 {
		fmt.Fprintln(s.log, "soak error: (further errors only counted)")
	}
}

// Soak drives the load for cfg.Duration, scraping /metrics, then checks
// every conversation touched against the log and judges the samples. The
// error is nil only for a clean run: no failed request, every conversation
// as logged, resources flat. Progress lines and the first errors go to log.
func Soak(ctx context.Context, cfg SoakConfig, log io.Writer) (SoakResult, error) {
	if err := cfg.Validate(); err != nil {
		return SoakResult{}, err
	}
	transport := &http.Transport{MaxIdleConns: cfg.Workers + 4, MaxIdleConnsPerHost: cfg.Workers + 4, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	s := &soak{cfg: cfg, client: client.New(cfg.URL, cfg.APIKey, hc), hc: hc, log: log}
	run := fmt.Sprintf("soak-%d", time.Now().UnixNano())
	s.convs = make([]*soakConv, cfg.Conversations)
	for i := range s.convs {
		s.convs[i] = &soakConv{id: fmt.Sprintf("%s-%d", run, i), num: i, inflight: map[int32]bool{}}
	}
	res := SoakResult{Target: cfg.URL, Conversations: cfg.Conversations, Workers: cfg.Workers, Ops: map[string]int64{}}

	// The server must export what is judged before any load is spent.
	if _, err := s.scrape(ctx, 0); err != nil {
		return res, fmt.Errorf("soak: %w", err)
	}

	start := time.Now()
	deadline := start.Add(cfg.Duration)
	var samples []SoakSample
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() { samples = s.sampleLoop(ctx, start, stop) })
	var workers sync.WaitGroup
	seed := uint64(start.UnixNano())
	for w := range cfg.Workers {
		workers.Go(func() { s.worker(ctx, rand.New(rand.NewPCG(seed, uint64(w))), deadline) })
	}
	workers.Wait()
	close(stop)
	sampler.Wait()
	res.Seconds = time.Since(start).Seconds()
	for o := range numSoakOps {
		n := s.ops[o].Load()
		res.Ops[o.String()] = n
		res.Requests += n
	}
	if ctx.Err() != nil {
		res.Errors = s.errors.Load()
		return res, fmt.Errorf("soak interrupted: %w", ctx.Err())
	}

	res.Checked, res.Unchecked, res.Messages = s.verify(ctx)
	res.Errors, res.BudgetTooSmall, res.Summaries = s.errors.Load(), s.budgetTooSmall.Load(), s.summaries.Load()

	res.Samples = len(samples)
	for _, x := range samples {
		res.MaxRSS, res.MaxQueue = max(res.MaxRSS, x.RSS), max(res.MaxQueue, x.Queue)
	}
	warmup := cfg.Warmup
	if warmup == 0 {
		warmup = cfg.Duration / 10
	}
	var flatErr error
	res.First, res.Last, flatErr = judgeFlat(samples, warmup, cfg.MaxRSSGrowth, cfg.CacheBytes)
	res.Flat = flatErr == nil

	var problems []string
	if res.Errors > 0 {
		problems = append(problems, fmt.Sprintf("%d errors", res.Errors))
	}
	if flatErr != nil {
		problems = append(problems, flatErr.Error())
	}
	if len(problems) > 0 {
		res.Verdict = "FAIL: " + strings.Join(problems, "; ")
		fmt.Fprintf(log, "soak: conversations left on the server for inspection: %s-*\n", run)
		return res, errors.New("soak failed: " + strings.Join(problems, "; "))
	}
	res.Verdict = "ok"
	s.cleanup(ctx)
	return res, nil
}

// worker makes requests until the deadline: a random conversation, half
// the time one of the busiest 1% (which grow long enough to be
// summarized), and a random request.
func (s *soak) worker(ctx context.Context, r *rand.Rand, deadline time.Time) {
	hot := max(1, len(s.convs)/100)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		var c *soakConv
		if r.IntN(2) == 0 {
			c = s.convs[r.IntN(hot)]
		} else {
			c = s.convs[r.IntN(len(s.convs))]
		}
		op := pickOp(r)
		switch op {
		case opAppend:
			s.append(ctx, r, c)
		case opContext:
			s.context(ctx, r, c)
		case opSummary:
			s.summary(ctx, c)
		case opFacts:
			s.facts(ctx, c)
		case opDelete:
			s.delete(ctx, c)
		}
		s.ops[op].Add(1)
	}
}

// settleAttempts bounds the retries that settle a failed append or delete.
const settleAttempts = 5

func (s *soak) append(ctx context.Context, r *rand.Rand, c *soakConv) {
	c.op.RLock()
	defer c.op.RUnlock()
	c.mu.Lock()
	c.touched = true
	n := 1 + r.IntN(2)
	first := int32(c.appends * 2)
	c.appends++
	msgs := make([]chatmem.Message, n)
	for j := range n {
		msgs[j] = soakMessage(c.num, c.gen, first+int32(j))
		c.inflight[first+int32(j)] = true
	}
	c.sent += int64(n)
	opts := client.AppendOptions{IdempotencyKey: fmt.Sprintf("g%d-a%d", c.gen, c.appends-1)}
	c.mu.Unlock()

	res, err := s.client.Append(ctx, c.id, msgs, opts)
	if err == nil && res.Replayed {
		s.fail("append to %s (key %s): answered as a replay on its first attempt", c.id, opts.IdempotencyKey)
	}
	if err != nil {
		s.fail("append to %s: %v", c.id, err)
		// The append may have landed: settle it with the same key.
		for i := 0; i < settleAttempts && err != nil && ctx.Err() == nil; i++ {
			time.Sleep(time.Duration(100<<i) * time.Millisecond)
			res, err = s.client.Append(context.WithoutCancel(ctx), c.id, msgs, opts)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.unknown = true
		return
	}
	if len(res.Messages) != n {
		s.fail("append to %s: %d messages in the answer, %d sent", c.id, len(res.Messages), n)
		c.unknown = true
		return
	}
	for j, m := range res.Messages {
		if m.Content != msgs[j].Content {
			s.fail("append to %s: answer holds %q, sent %q", c.id, trim(m.Content), trim(msgs[j].Content))
			c.unknown = true
			return
		}
		if j > 0 && m.Seq != res.Messages[j-1].Seq+1 {
			s.fail("append to %s: one append stored at seqs %d and %d", c.id, res.Messages[j-1].Seq, m.Seq)
		}
		if err := c.ack(m.Seq, first+int32(j)); err != nil {
			s.fail("append to %s: %v", c.id, err)
			c.unknown = true
			return
		}
	}
}

// soakPolicy draws a context policy: every kind, budgets from tight to
// roomy, facts a third of the time.
func soakPolicy(r *rand.Rand) client.ContextParams {
	p := client.ContextParams{Facts: r.IntN(3) == 0}
	switch r.IntN(4) {
	case 0:
		p.Policy = chatmem.PolicyAll
	case 1:
		p.Policy, p.Turns = chatmem.PolicyLastTurns, 1+r.IntN(10)
	case 2:
		p.Policy, p.Budget = chatmem.PolicyTokenBudget, 200+r.IntN(4000)
	default:
		p.Policy, p.Budget = chatmem.PolicySummaryBuffer, 300+r.IntN(2000)
	}
	return p
}

func (s *soak) context(ctx context.Context, r *rand.Rand, c *soakConv) {
	c.op.RLock()
	defer c.op.RUnlock()
	p := soakPolicy(r)
	c.mu.Lock()
	c.touched = true
	acked, maxAcked, unknown := c.acked, c.maxAcked, c.unknown
	c.mu.Unlock()

	w, err := s.client.Context(ctx, c.id, p)
	switch {
	case errors.Is(err, chatmem.ErrNotFound):
		if acked > 0 && !unknown {
			s.fail("context of %s: not found, with %d messages acknowledged", c.id, acked)
		}
		return
	case errors.Is(err, chatmem.ErrBudgetTooSmall):
		s.budgetTooSmall.Add(1)
		return
	case err != nil:
		s.fail("context of %s (%s): %v", c.id, p.Policy, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unknown {
		return
	}
	if err := checkWindow(c, c.num, p, w, maxAcked); err != nil {
		s.fail("context of %s (%s budget %d turns %d facts %t): %v", c.id, p.Policy, p.Budget, p.Turns, p.Facts, err)
	}
	if w.Summary != nil {
		s.summaries.Add(1)
	}
}

// checkWindow checks a window of the conversation against its log: the
// messages are a gapless run of the conversation's, each the one logged at
// its seq (or one in flight), ending at or after the last message
// acknowledged before the read (maxAcked), starting at seq 1 for
// PolicyAll and reaching back to the summary; the summary and facts name
// only this generation. The caller holds c.mu.
func checkWindow(c *soakConv, num int, p client.ContextParams, w chatmem.Window, maxAcked int64) error {
	var prev, firstSeq int64
	for _, m := range w.Messages {
		if m.Metadata[chatmem.MetaKey] != "" {
			if err := checkNames("the window's "+m.Metadata[chatmem.MetaKey]+" message", m.Content, num, c.gen); err != nil {
				return err
			}
			continue
		}
		if err := checkLogged(c, num, m); err != nil {
			return err
		}
		if prev != 0 && m.Seq != prev+1 {
			return fmt.Errorf("window jumps from seq %d to %d", prev, m.Seq)
		}
		if firstSeq == 0 {
			firstSeq = m.Seq
		}
		prev = m.Seq
	}
	if prev < maxAcked {
		return fmt.Errorf("window ends at seq %d, before seq %d acknowledged before the read", prev, maxAcked)
	}
	if p.Policy == chatmem.PolicyAll && firstSeq != 1 {
		return fmt.Errorf("policy all starts at seq %d", firstSeq)
	}
	if w.Summary != nil {
		if err := checkSummary(c, num, *w.Summary); err != nil {
			return err
		}
		if firstSeq > w.Summary.CoversSeq+1 {
			return fmt.Errorf("summary covers up to seq %d but the window starts at %d", w.Summary.CoversSeq, firstSeq)
		}
	}
	return checkFacts(c, num, w.Facts)
}

// checkLogged checks that m is the message logged at its seq, or one in
// flight. The caller holds c.mu.
func checkLogged(c *soakConv, num int, m chatmem.Message) error {
	mc, mg, mm, err := parseTag(m.Content)
	if err != nil {
		return fmt.Errorf("seq %d: %w", m.Seq, err)
	}
	if mc != num || mg != c.gen {
		return fmt.Errorf("seq %d holds a message of conversation %d generation %d, want %d generation %d", m.Seq, mc, mg, num, c.gen)
	}
	if m.Seq < 1 || m.Seq > c.sent {
		return fmt.Errorf("seq %d outside 1..%d, the messages sent", m.Seq, c.sent)
	}
	if m.Seq <= int64(len(c.slots)) && c.slots[m.Seq-1] >= 0 {
		if c.slots[m.Seq-1] != mm {
			return fmt.Errorf("seq %d holds message %d, acknowledged there: %d", m.Seq, mm, c.slots[m.Seq-1])
		}
	} else if !c.inflight[mm] {
		return fmt.Errorf("seq %d holds message %d, neither acknowledged there nor in flight", m.Seq, mm)
	}
	if want := soakMessage(num, c.gen, mm); m.Content != want.Content || m.Role != want.Role {
		return fmt.Errorf("seq %d: %s %q, sent %s %q", m.Seq, m.Role, trim(m.Content), want.Role, trim(want.Content))
	}
	return nil
}

// checkSummary checks a summary of the conversation: it covers messages of
// this generation, and names no other. The caller holds c.mu.
func checkSummary(c *soakConv, num int, sum chatmem.Summary) error {
	if sum.CoversSeq < 1 || sum.CoversSeq > c.sent {
		return fmt.Errorf("summary covers up to seq %d, outside 1..%d, the messages sent in this generation", sum.CoversSeq, c.sent)
	}
	if sum.Text == "" {
		return errors.New("summary is empty")
	}
	return checkNames("summary", sum.Text, num, c.gen)
}

// checkFacts checks that the facts name only this generation. The caller
// holds c.mu.
func checkFacts(c *soakConv, num int, facts []chatmem.Fact) error {
	for _, f := range facts {
		if err := checkNames("fact "+f.Key, f.Value, num, c.gen); err != nil {
			return err
		}
		if f.SourceSeq > c.sent {
			return fmt.Errorf("fact %s comes from seq %d, after the %d messages sent", f.Key, f.SourceSeq, c.sent)
		}
	}
	return nil
}

func (s *soak) summary(ctx context.Context, c *soakConv) {
	c.op.RLock()
	defer c.op.RUnlock()
	c.mu.Lock()
	c.touched = true
	c.mu.Unlock()
	sum, err := s.client.Summary(ctx, c.id)
	if errors.Is(err, chatmem.ErrNotFound) {
		return // not written yet, or no conversation
	}
	if err != nil {
		s.fail("summary of %s: %v", c.id, err)
		return
	}
	s.summaries.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unknown {
		return
	}
	if err := checkSummary(c, c.num, sum); err != nil {
		s.fail("summary of %s: %v", c.id, err)
	}
}

func (s *soak) facts(ctx context.Context, c *soakConv) {
	c.op.RLock()
	defer c.op.RUnlock()
	c.mu.Lock()
	c.touched = true
	acked, unknown := c.acked, c.unknown
	c.mu.Unlock()
	facts, err := s.client.Facts(ctx, c.id)
	if errors.Is(err, chatmem.ErrNotFound) {
		if acked > 0 && !unknown {
			s.fail("facts of %s: not found, with %d messages acknowledged", c.id, acked)
		}
		return
	}
	if err != nil {
		s.fail("facts of %s: %v", c.id, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.unknown {
		return
	}
	if err := checkFacts(c, c.num, facts); err != nil {
		s.fail("facts of %s: %v", c.id, err)
	}
}

func (s *soak) delete(ctx context.Context, c *soakConv) {
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touched = true
	err := s.client.Delete(ctx, c.id)
	switch {
	case err == nil:
		if c.acked == 0 && !c.unknown {
			s.fail("delete of %s: deleted, with no message acknowledged", c.id)
		}
	case errors.Is(err, chatmem.ErrNotFound):
		if c.acked > 0 && !c.unknown {
			s.fail("delete of %s: not found, with %d messages acknowledged", c.id, c.acked)
		}
	default:
		s.fail("delete of %s: %v", c.id, err)
		for i := 0; i < settleAttempts && err != nil && !errors.Is(err, chatmem.ErrNotFound) && ctx.Err() == nil; i++ {
			time.Sleep(time.Duration(100<<i) * time.Millisecond)
			err = s.client.Delete(context.WithoutCancel(ctx), c.id)
		}
		if err != nil && !errors.Is(err, chatmem.ErrNotFound) {
			c.unknown = true
			return
		}
	}
	c.reset()
}

// verifyWorkers read conversations back at the end in parallel.
const verifyWorkers = 8

// verify reads back every conversation a request touched: its messages are
// exactly the acknowledged ones since the last settled delete, in order,
// and its summary and facts name only its generation. It returns the
// conversations checked, those whose state is unknown (after an unsettled
// failure, already counted as an error), and the messages checked.
func (s *soak) verify(ctx context.Context) (checked, unknown, messages int64) {
	var touched []*soakConv
	for _, c := range s.convs {
		if c.touched {
			touched = append(touched, c)
		}
	}
	bar := progress.New(s.log, "verifying conversations", len(touched))
	var mu sync.Mutex // guards bar and the counts
	next := make(chan *soakConv)
	var wg sync.WaitGroup
	for range verifyWorkers {
		wg.Go(func() {
			for c := range next {
				var n int64
				var err error
				if !c.unknown {
					n, err = s.verifyConv(ctx, c)
				}
				if err != nil {
					s.fail("final state of %s: %v", c.id, err)
				}
				mu.Lock()
				if c.unknown {
					unknown++
				} else {
					checked++
					messages += n
				}
				bar.Set(int(checked + unknown))
				mu.Unlock()
			}
		})
	}
	for _, c := range touched {
		next <- c
	}
	close(next)
	wg.Wait()
	bar.Done()
	return checked, unknown, messages
}

// verifyConv checks one conversation's final state. The workers are done,
// so it reads c without its locks.
func (s *soak) verifyConv(ctx context.Context, c *soakConv) (int64, error) {
	num := c.num
	var seq int64
	for {
		page, err := s.client.Messages(ctx, c.id, seq, 1000)
		if errors.Is(err, chatmem.ErrNotFound) && seq == 0 {
			break
		}
		if err != nil {
			return seq, err
		}
		for _, m := range page.Messages {
			if m.Seq != seq+1 {
				return seq, fmt.Errorf("seq %d follows seq %d", m.Seq, seq)
			}
			if m.Seq > int64(len(c.slots)) || c.slots[m.Seq-1] < 0 {
				return seq, fmt.Errorf("seq %d stored, never acknowledged (%d acknowledged)", m.Seq, c.acked)
			}
			if err := checkLogged(c, num, m); err != nil {
				return seq, err
			}
			seq = m.Seq
		}
		if page.NextAfter == nil {
			break
		}
	}
	if seq != c.acked || seq != int64(len(c.slots)) {
		return seq, fmt.Errorf("%d messages stored, %d acknowledged (highest seq %d)", seq, c.acked, c.maxAcked)
	}
	sum, err := s.client.Summary(ctx, c.id)
	switch {
	case errors.Is(err, chatmem.ErrNotFound):
	case err != nil:
		return seq, fmt.Errorf("summary: %w", err)
	default:
		if err := checkSummary(c, num, sum); err != nil {
			return seq, err
		}
	}
	facts, err := s.client.Facts(ctx, c.id)
	switch {
	case errors.Is(err, chatmem.ErrNotFound):
		if c.acked > 0 {
			return seq, errors.New("facts: conversation not found")
		}
	case err != nil:
		return seq, fmt.Errorf("facts: %w", err)
	default:
		if err := checkFacts(c, num, facts); err != nil {
			return seq, err
		}
	}
	return seq, nil
}

// cleanup deletes the run's conversations after a clean run.
func (s *soak) cleanup(ctx context.Context) {
	for _, c := range s.convs {
		if c.acked > 0 {
			s.client.Delete(ctx, c.id)
		}
	}
}

// sampleLoop scrapes /metrics every cfg.Sample until stop, printing a
// progress line each time, and returns the samples (with one taken at
// the end).
func (s *soak) sampleLoop(ctx context.Context, start time.Time, stop <-chan struct{}) []SoakSample {
	t := time.NewTicker(s.cfg.Sample)
	defer t.Stop()
	var samples []SoakSample
	var lastOps int64
	lastAt := start
	take := func() {
		x, err := s.scrape(ctx, time.Since(start))
		if err != nil {
			s.fail("%v", err)
			return
		}
		samples = append(samples, x)
		var ops int64
		for o := range numSoakOps {
			ops += s.ops[o].Load()
		}
		now := time.Now()
		fmt.Fprintf(s.log, "soak %6s  %9d requests (%5.0f/s)  %d errors  rss %6.1f MiB  heap %6.1f MiB  goroutines %4.0f  worker queue %.0f\n",
			x.At.Round(time.Second), ops, float64(ops-lastOps)/now.Sub(lastAt).Seconds(), s.errors.Load(),
			x.RSS/(1<<20), x.Heap/(1<<20), x.Goroutines, x.Queue)
		lastOps, lastAt = ops, now
	}
	for {
		select {
		case <-t.C:
			take()
		case <-stop:
			take()
			return samples
		case <-ctx.Done():
			return samples
		}
	}
}

// scrape reads the server's resident memory, goroutines, heap and worker
// queue from its /metrics (Prometheus text format).
func (s *soak) scrape(ctx context.Context, at time.Duration) (SoakSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL+"/metrics", nil)
	if err != nil {
		return SoakSample{}, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return SoakSample{}, fmt.Errorf("scrape /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return SoakSample{}, fmt.Errorf("scrape /metrics: %s", resp.Status)
	}
	x, err := parseMetrics(resp.Body)
	x.At = at
	return x, err
}

// parseMetrics picks the soak's gauges out of a Prometheus text exposition;
// it fails if the resident memory or the goroutines are missing.
func parseMetrics(r io.Reader) (SoakSample, error) {
	var x SoakSample
	found := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		var dst *float64
		switch f[0] {
		case "process_resident_memory_bytes":
			dst = &x.RSS
		case "go_goroutines":
			dst = &x.Goroutines
		case "go_memstats_heap_inuse_bytes":
			dst = &x.Heap
		case "chatmem_worker_queue_depth":
			dst = &x.Queue
		default:
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return x, fmt.Errorf("scrape /metrics: %s: %w", f[0], err)
		}
		*dst = v
		found[f[0]] = true
	}
	if err := sc.Err(); err != nil {
		return x, fmt.Errorf("scrape /metrics: %w", err)
	}
	for _, name := range []string{"process_resident_memory_bytes", "go_goroutines"} {
		if !found[name] {
			return x, fmt.Errorf("scrape /metrics: the server does not export %s", name)
		}
	}
	return x, nil
}

// judgeFlat judges the samples taken after warmup: it splits them in
// quarters and compares the last quarter's means with the first's. The
// resident memory may grow by maxRSSGrowth of the first quarter's mean
// plus rssSlack and cacheBytes, the goroutines by goroutineGrowth plus
// goroutineSlack.
// Fewer than four samples after warm-up cannot be judged, which is an
// error too.
func judgeFlat(samples []SoakSample, warmup time.Duration, maxRSSGrowth float64, cacheBytes int64) (first, last SoakSample, err error) {
	var judged []SoakSample
	for _, x := range samples {
		if x.At >= warmup {
			judged = append(judged, x)
		}
	}
	if len(judged) < 4 {
		return first, last, fmt.Errorf("only %d samples after the warm-up of %s, too few to judge (a longer run or a shorter --sample)", len(judged), warmup)
	}
	q := len(judged) / 4
	first, last = mean(judged[:q]), mean(judged[len(judged)-q:])
	var problems []string
	if limit := first.RSS*(1+maxRSSGrowth) + rssSlack + float64(cacheBytes); last.RSS > limit {
		problems = append(problems, fmt.Sprintf("RSS grew from %.1f to %.1f MiB (first and last quarter means), over the bound of %.1f MiB",
			first.RSS/(1<<20), last.RSS/(1<<20), limit/(1<<20)))
	}
	if limit := first.Goroutines*(1+goroutineGrowth) + goroutineSlack; last.Goroutines > limit {
		problems = append(problems, fmt.Sprintf("goroutines grew from %.0f to %.0f (first and last quarter means), over the bound of %.0f",
			first.Goroutines, last.Goroutines, limit))
	}
	if len(problems) > 0 {
		return first, last, errors.New("not flat: " + strings.Join(problems, "; "))
	}
	return first, last, nil
}

func mean(xs []SoakSample) SoakSample {
	var m SoakSample
	for _, x := range xs {
		m.RSS += x.RSS
		m.Goroutines += x.Goroutines
		m.Heap += x.Heap
		m.Queue += x.Queue
	}
	n := float64(len(xs))
	m.RSS, m.Goroutines, m.Heap, m.Queue = m.RSS/n, m.Goroutines/n, m.Heap/n, m.Queue/n
	m.At = xs[len(xs)-1].At
	return m
}

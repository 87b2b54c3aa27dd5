package eval

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chatmem/chatmem"
)

// DefaultBudgets are the budgets Config.Budgets defaults to.
var DefaultBudgets = []int{512, 1024, 2048, 4096}

// DefaultTurns is the last_turns window Config.Turns defaults to.
const DefaultTurns = 10

// Config says what Run measures. Store and Counter are required; the zero
// value of every other field means its default.
type Config struct {
	// Store receives the replayed conversations (under Tenant, with IDs
	// unique to the run); each is deleted once it has been scored.
	Store chatmem.Store
	// Counter counts the messages; Counters resolves other names (see
	// chatmem.Options).
	Counter  chatmem.Counter
	Counters func(name string) (chatmem.Counter, error)
	// Policies to measure; default chatmem.Policies. all and last_turns
	// take no budget and make one row each; token_budget and
	// summary_buffer make one row per budget.
	Policies []chatmem.PolicyKind
	// Budgets in tokens; default DefaultBudgets.
	Budgets []int
	// Caches are the window cache modes of the budgeted rows ("" for the
	// plain window, chatmem.CacheStable); default the plain one alone.
	// Each budgeted policy makes one row per budget and mode.
	Caches []string
	// LowWater is the cache-stable rows' chatmem.Policy.LowWater (0: the
	// library's default).
	LowWater int
	// RecentPercent, if set, gives the recall rows' recent part that
	// percent of the budget (chatmem.Policy.Recent); 0: the library's
	// default, which differs between the plain and the stable mode.
	RecentPercent int
	// Turns is last_turns' window; default DefaultTurns.
	Turns int
	// Facts adds the facts block to every policy, and runs Extractors
	// during the replay.
	Facts      bool
	Extractors []chatmem.Extractor
	// Summarizer writes summary_buffer's summaries. Each summary_buffer
	// budget gets its own replay, as a deployment sending that budget,
	// with the library's defaults: the summary follows the budget the
	// replay's context reads use (chatmem.SummaryOptions), and the replay
	// reads the context at every user turn, as a chatbot backend does.
	// Nil: no summaries, and summary_buffer sends a plain token window.
	Summarizer chatmem.Summarizer
	// BM25 adds a baseline row per budget: plain BM25 (k1 1.2, b 0.75)
	// over single turns, with the question as the query, sending the best
	// turns that fit the budget in conversation order and nothing else. It
	// runs in the evaluation, not in a store, and is what PolicyRecall is
	// measured against.
	BM25 bool
	// Scope is the recall scope of the recall rows (chatmem.Policy.Scope):
	// "" (the conversation's own history) or chatmem.ScopeUser (the
	// history of all of its user's conversations). Without
	// SessionsAsConversations no conversation has a user, and scope user
	// recalls as the conversation scope does.
	Scope string
	// SessionsAsConversations replays each session of a conversation (the
	// messages whose evidence IDs share a "D<n>:" prefix, LoCoMo's
	// sessions) as its own conversation of one user, and asks each
	// question in a new conversation of that user, which holds the
	// question alone: only recall with Scope user sees the past sessions.
	// It needs a store that keeps users (chatmem.UserStore); its replays
	// record no Trace.
	SessionsAsConversations bool
	// Tenant the replayed conversations are stored under; default "eval".
	Tenant string
	// Parallel is how many conversations are replayed at once; default 1,
	// which keeps the assembly times free of contention.
	Parallel int
	// Logger receives what Memory logs (failed summarizer calls, say).
	// Nil: discarded.
	Logger *slog.Logger
	// Progress, if set, is called as messages are replayed, with the
	// messages done and the total (replays times messages). Calls are
	// serialized.
	Progress func(done, total int)
}

// Result is what Run measured.
type Result struct {
	Dataset       string `json:"dataset"`
	Tokenizer     string `json:"tokenizer"`
	Conversations int    `json:"conversations"`
	Messages      int    `json:"messages"`
	Questions     int    `json:"questions"`
	// SessionsAsConversations says each session was replayed as its own
	// conversation of one user (Config.SessionsAsConversations).
	SessionsAsConversations bool      `json:"sessions_as_conversations,omitempty"`
	Data                    DataStats `json:"data"`
	Rows                    []Row     `json:"rows"`
	// Trace records the tokens each row sends at every user turn of the
	// first conversation, as a live chatbot would send them.
	Trace   *Trace  `json:"trace,omitempty"`
	Seconds float64 `json:"seconds"`
}

// DataStats counts what the dataset got wrong, and what was left out of
// which metric because of it.
type DataStats struct {
	MalformedEvidence  int `json:"malformed_evidence_ids"`
	UnresolvedEvidence int `json:"unresolved_evidence_ids"`
	// NoEvidence counts questions with an empty evidence list;
	// NoValidEvidence those left with no valid ID (NoEvidence included),
	// which evidence recall leaves out.
	NoEvidence      int `json:"questions_without_evidence"`
	NoValidEvidence int `json:"questions_without_valid_evidence"`
	// NoAnswer counts questions without a gold answer that normalizes to
	// anything, which answer presence leaves out.
	NoAnswer int `json:"questions_without_answer"`
}

// Row is one policy at one budget.
type Row struct {
	Policy string `json:"policy"`
	Budget int    `json:"budget,omitempty"`
	Turns  int    `json:"turns,omitempty"`
	Facts  bool   `json:"facts"`
	// Scope is the recall scope, when not the conversation's.
	Scope string `json:"scope,omitempty"`
	// Overall covers every question but category 5's; Categories splits it
	// by category (none when the data has no categories); Adversarial is
	// category 5, reported apart.
	Overall     Group   `json:"overall"`
	Categories  []Group `json:"categories,omitempty"`
	Adversarial *Group  `json:"adversarial,omitempty"`
	// Failed counts questions whose context could not be assembled (the
	// budget too small for the question); they score 0 and send nothing.
	Failed int `json:"failed"`
	// Cache is the window cache mode (chatmem.Policy.Cache), if any.
	Cache string `json:"cache,omitempty"`
	// Cost is what the row's requests at each user turn cost under the
	// providers' prompt caches (nil for the BM25 baseline, and with
	// sessions as conversations).
	Cost *Cost `json:"cost,omitempty"`
}

// Label names the row as the table shows it: "token_budget@1024".
// A recall scope other than the conversation's follows the policy:
// "recall/user@2048".
func (r Row) Label() string {
	name := r.Policy
	if r.Scope != "" && r.Scope != chatmem.ScopeConversation {
		name += "/" + r.Scope
	}
	if r.Cache != "" {
		name += "/" + r.Cache
	}
	switch {
	case r.Budget > 0:
		return name + "@" + strconv.Itoa(r.Budget)
	case r.Turns > 0:
		return name + "(" + strconv.Itoa(r.Turns) + ")"
	}
	return name
}

// Group holds the metrics over a set of questions.
type Group struct {
	Category  int `json:"category,omitempty"`
	Questions int `json:"questions"`
	// Recall is the mean, over the RecallQuestions with valid evidence, of
	// the share of their evidence turns in the context; AllHit and AnyHit
	// the share of them with all, or any, of their evidence there.
	RecallQuestions int     `json:"recall_questions"`
	Recall          float64 `json:"evidence_recall"`
	AllHit          float64 `json:"all_hit"`
	AnyHit          float64 `json:"any_hit"`
	// AnswerPresence is the mean, over the AnswerQuestions with a gold
	// answer, of the share of its normalized tokens in the context.
	AnswerQuestions int     `json:"answer_questions"`
	AnswerPresence  float64 `json:"answer_presence"`
	// SummarySent is the share of questions whose context held a summary
	// (summary_buffer sends a plain window while the summary lags behind).
	SummarySent float64 `json:"summary_sent"`
	// Tokens sent per question, question included; and the time
	// Memory.Context took.
	TokensMean    float64 `json:"tokens_mean"`
	TokensP50     int     `json:"tokens_p50"`
	TokensP95     int     `json:"tokens_p95"`
	AssemblyP50us float64 `json:"assembly_p50_us"`
	AssemblyP99us float64 `json:"assembly_p99_us"`
}

// Trace is the tokens sent per user turn over one replayed conversation.
type Trace struct {
	Conversation string   `json:"conversation"`
	Series       []Series `json:"series"`
}

// Series is one row's tokens at each user turn, in order.
type Series struct {
	Label  string `json:"label"`
	Policy string `json:"policy"`
	Tokens []int  `json:"tokens"`
}

// Cumulative returns the running totals of s.Tokens.
func (s Series) Cumulative() []int {
	out := make([]int, len(s.Tokens))
	sum := 0
	for i, t := range s.Tokens {
		sum += t
		out[i] = sum
	}
	return out
}

// sample is one question's scores under one row.
type sample struct {
	category   int
	recallOK   bool
	recall     float64
	hits       int // evidence turns found
	evidence   int
	presenceOK bool
	presence   float64
	tokens     int
	summary    bool // a summary was sent
	dur        time.Duration
	failed     bool
}

// replay is one replay of a conversation and the rows it serves.
type replay struct {
	name       string
	rows       []int // indexes into the result's rows
	summarizer chatmem.Summarizer
	summary    chatmem.SummaryOptions
	// readEachTurn reads each row's context after every user message, as
	// a deployment does each turn (and as the summary's budget follows).
	readEachTurn bool
}

// Run replays every conversation of d into cfg.Store, asks each question as
// the next user message under every policy and budget, and scores the
// contexts. Summarizers and extractors run synchronously inside each append
// (chatmem.Options.Sync), so results are deterministic.
func Run(ctx context.Context, d *Dataset, cfg Config) (*Result, error) {
	if cfg.Store == nil || cfg.Counter == nil {
		return nil, fmt.Errorf("%w: eval.Run needs a store and a counter", chatmem.ErrInvalid)
	}
	if _, ok := cfg.Store.(chatmem.UserStore); cfg.SessionsAsConversations && !ok {
		return nil, fmt.Errorf("%w: sessions as conversations need a store that keeps users", chatmem.ErrInvalid)
	}
	if _, ok := cfg.Store.(chatmem.UserSearcher); cfg.SessionsAsConversations && cfg.Scope == chatmem.ScopeUser && !ok {
		return nil, fmt.Errorf("%w: recall scope user needs a store that indexes users (chatmem.UserSearcher); %T does not", chatmem.ErrInvalid, cfg.Store)
	}
	start := time.Now()
	cfg = cfg.withDefaults()
	rows, policies, err := planRows(cfg)
	if err != nil {
		return nil, err
	}
	replays := planReplays(cfg, policies)
	var bm25Rows []int
	if cfg.BM25 {
		for _, b := range cfg.Budgets {
			bm25Rows = append(bm25Rows, len(rows))
			rows = append(rows, Row{Policy: BM25Row, Budget: b})
		}
	}

	res := &Result{Dataset: d.Name, Tokenizer: cfg.Counter.Name(), Conversations: len(d.Conversations), Messages: d.Messages(), Questions: d.Questions(), Rows: rows,
		SessionsAsConversations: cfg.SessionsAsConversations}
	for _, c := range d.Conversations {
		for _, q := range c.Questions {
			res.Data.MalformedEvidence += q.Malformed
			res.Data.UnresolvedEvidence += q.Unresolved
			if q.NoEvidence {
				res.Data.NoEvidence++
			}
			if len(q.Evidence) == 0 {
				res.Data.NoValidEvidence++
			}
			if len(Normalize(q.Answer)) == 0 {
				res.Data.NoAnswer++
			}
		}
	}

	prefix := make([]byte, 4)
	_, _ = rand.Read(prefix)
	r := &runner{cfg: cfg, policies: policies, bm25Rows: bm25Rows, replays: replays, prefix: hex.EncodeToString(prefix),
		total: len(replays) * res.Messages, costs: make([]Cost, len(policies))}
	samples := make([][][]sample, len(d.Conversations)) // [conversation][row][question]
	var trace *Trace
	errs := make([]error, len(d.Conversations))
	next := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Parallel {
		wg.Go(func() {
			for i := range next {
				var t *Trace
				if i == 0 {
					t = &Trace{Conversation: d.Conversations[0].ID}
				}
				samples[i], errs[i] = r.conversation(ctx, d.Conversations[i], t)
				if i == 0 {
					trace = t
				}
			}
		})
	}
feed:
	for i := range d.Conversations {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for ri := range res.Rows {
		var all []sample
		for _, conv := range samples {
			all = append(all, conv[ri]...)
		}
		res.Rows[ri].fill(all)
		if ri < len(r.costs) && r.costs[ri].Requests > 0 {
			c := r.costs[ri]
			c.finish()
			res.Rows[ri].Cost = &c
		}
	}
	if trace != nil {
		// Replays finish in their own order; show the series in the rows'.
		slices.SortStableFunc(trace.Series, func(a, b Series) int { return rowIndex(res.Rows, a.Label) - rowIndex(res.Rows, b.Label) })
	}
	res.Trace = trace
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

func rowIndex(rows []Row, label string) int {
	return slices.IndexFunc(rows, func(r Row) bool { return r.Label() == label })
}

func (cfg Config) withDefaults() Config {
	if len(cfg.Policies) == 0 {
		cfg.Policies = chatmem.Policies
	}
	if len(cfg.Budgets) == 0 {
		cfg.Budgets = DefaultBudgets
	}
	if len(cfg.Caches) == 0 {
		cfg.Caches = []string{""}
	}
	if cfg.Turns == 0 {
		cfg.Turns = DefaultTurns
	}
	if cfg.Tenant == "" {
		cfg.Tenant = "eval"
	}
	if cfg.Parallel < 1 {
		cfg.Parallel = 1
	}
	return cfg
}

// planRows makes the rows and their policies, in the order of
// cfg.Policies and cfg.Budgets.
func planRows(cfg Config) ([]Row, []chatmem.Policy, error) {
	var rows []Row
	var ps []chatmem.Policy
	seen := make(map[string]bool)
	add := func(p chatmem.Policy) error {
		if err := p.Validate(); err != nil {
			return err
		}
		r := rowOf(p)
		if seen[r.Label()] {
			return nil
		}
		seen[r.Label()] = true
		rows, ps = append(rows, r), append(ps, p)
		return nil
	}
	for _, k := range cfg.Policies {
		var err error
		switch k {
		case chatmem.PolicyAll:
			err = add(chatmem.Policy{Kind: k, Facts: cfg.Facts})
		case chatmem.PolicyLastTurns:
			err = add(chatmem.Policy{Kind: k, Turns: cfg.Turns, Facts: cfg.Facts})
		default:
			for _, b := range cfg.Budgets {
				for _, cache := range cfg.Caches {
					p := chatmem.Policy{Kind: k, Budget: b, Facts: cfg.Facts, Cache: cache}
					if cache == chatmem.CacheStable {
						p.LowWater = cfg.LowWater
					}
					if k == chatmem.PolicyRecall && cfg.RecentPercent > 0 {
						p.Recent = max(b*cfg.RecentPercent/100, 1)
					}
					if k == chatmem.PolicyRecall && cfg.Scope == chatmem.ScopeUser {
						p.Scope = cfg.Scope
					}
					if err = add(p); err != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return rows, ps, nil
}

// planReplays assigns rows to replays: one shared replay (without a
// summarizer) for every row but summary_buffer's, and one per
// summary_buffer budget, whose summaries are made for that budget.
func planReplays(cfg Config, ps []chatmem.Policy) []replay {
	// Every replay reads each row's context at every user turn: the
	// requests whose cost Row.Cost simulates.
	base := replay{name: "base"}
	var out []replay
	for i, p := range ps {
		if p.Kind == chatmem.PolicySummaryBuffer && cfg.Summarizer != nil {
			out = append(out, replay{
				name: "sb" + strconv.Itoa(p.Budget), rows: []int{i}, summarizer: cfg.Summarizer, readEachTurn: true,
				// A deterministic summarizer fails the same way on a retry:
				// retry at once rather than after the default backoff.
				summary: chatmem.SummaryOptions{Backoff: time.Microsecond},
			})
			continue
		}
		base.rows = append(base.rows, i)
	}
	if len(base.rows) > 0 {
		out = append([]replay{base}, out...)
	}
	return out
}

// runner holds what every conversation's replay shares.
type runner struct {
	cfg      Config
	policies []chatmem.Policy
	bm25Rows []int // rows of the BM25 baseline, one per budget
	replays  []replay
	prefix   string

	mu    sync.Mutex
	done  int
	total int
	costs []Cost // per row, over the conversations replayed so far
}

func (r *runner) progress(n int) {
	if r.cfg.Progress == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done += n
	r.cfg.Progress(r.done, r.total)
}

// conversation replays c once per replay and scores every question under
// that replay's rows. It returns the samples per row, per question. With
// t, it records each row's tokens at every user turn.
func (r *runner) conversation(ctx context.Context, c Conversation, t *Trace) ([][]sample, error) {
	out := make([][]sample, len(r.policies)+len(r.bm25Rows))
	tc := newTextCache(c.Messages)
	if len(r.bm25Rows) > 0 {
		if err := r.bm25(ctx, c, tc, out); err != nil {
			return nil, fmt.Errorf("conversation %s: %w", c.ID, err)
		}
	}
	for _, rp := range r.replays {
		sims := make([]*costSim, len(rp.rows))
		for j, ri := range rp.rows {
			sims[j] = newCostSim(r.policies[ri].Cache == chatmem.CacheStable)
		}
		opts := chatmem.Options{Counter: r.cfg.Counter, Counters: r.cfg.Counters, Sync: true, Summary: rp.summary, Logger: r.cfg.Logger}
		if rp.summarizer != nil {
			opts.Summarizer = rp.summarizer
		}
		if r.cfg.Facts {
			opts.Extractors = r.cfg.Extractors
		}
		mem, err := chatmem.New(r.cfg.Store, opts)
		if err != nil {
			return nil, err
		}
		key := chatmem.Key{Tenant: r.cfg.Tenant, ID: keyID(r.prefix, c.ID, rp.name)}
		if r.cfg.SessionsAsConversations {
			// key names the user whose conversations the sessions become.
			err = r.replaySessions(ctx, mem, key, c, rp, tc, out)
			if _, derr := mem.DeleteUser(context.WithoutCancel(ctx), key); derr != nil && err == nil {
				err = fmt.Errorf("delete user %s: %w", key, derr)
			}
		} else {
			err = r.replayInto(ctx, mem, key, c, rp, t, tc, out, sims)
			if derr := r.cfg.Store.Delete(context.WithoutCancel(ctx), key); derr != nil && !errors.Is(derr, chatmem.ErrNotFound) && err == nil {
				err = fmt.Errorf("delete %s: %w", key, derr)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("conversation %s: %w", c.ID, err)
		}
		if !r.cfg.SessionsAsConversations {
			r.mu.Lock()
			for j, ri := range rp.rows {
				r.costs[ri].merge(sims[j])
			}
			r.mu.Unlock()
		}
	}
	return out, nil
}

func (r *runner) replayInto(ctx context.Context, mem *chatmem.Memory, key chatmem.Key, c Conversation, rp replay, t *Trace, tc *textCache, out [][]sample, sims []*costSim) error {
	seqTurn := make(map[turnRef]string, len(c.Messages))
	var series []Series
	if t != nil {
		for _, ri := range rp.rows {
			p := r.policies[ri]
			series = append(series, Series{Label: rowOf(p).Label(), Policy: string(p.Kind)})
		}
	}
	const step = 50 // messages per progress report
	for i, msg := range c.Messages {
		res, err := mem.Append(ctx, key, []chatmem.Message{msg}, chatmem.AppendOptions{})
		if err != nil {
			return fmt.Errorf("message %d: %w", i+1, err)
		}
		seqTurn[turnRef{key.ID, res.Messages[0].Seq}] = msg.Metadata[TurnKey]
		if msg.Role == chatmem.RoleUser {
			for j, ri := range rp.rows {
				// The reads of a replay that reads each turn are its
				// traffic (the summaries follow them); the others are
				// previews: the requests whose cost is simulated, and
				// the first conversation's traced.
				w, err := mem.Context(ctx, key, r.policies[ri], chatmem.ContextOptions{Preview: !rp.readEachTurn})
				if err != nil && !errors.Is(err, chatmem.ErrBudgetTooSmall) {
					return err
				}
				if t != nil {
					series[j].Tokens = append(series[j].Tokens, w.Tokens)
				}
				if err == nil {
					sims[j].add(w.Messages)
				}
			}
		}
		if (i+1)%step == 0 || i == len(c.Messages)-1 {
			r.progress((i % step) + 1)
		}
	}
	if t != nil {
		t.Series = append(t.Series, series...)
	}
	for _, ri := range rp.rows {
		p := r.policies[ri]
		for _, q := range c.Questions {
			s, err := ask(ctx, mem, key, p, q, seqTurn, tc, true)
			if err != nil {
				return fmt.Errorf("question %q under %s: %w", q.Question, rowOf(p).Label(), err)
			}
			out[ri] = append(out[ri], s)
		}
	}
	return nil
}

func rowOf(p chatmem.Policy) Row {
	return Row{Policy: string(p.Kind), Budget: p.Budget, Turns: p.Turns, Facts: p.Facts, Scope: p.Scope, Cache: p.Cache}
}

// turnRef names a stored message: a conversation and a seq in it.
type turnRef struct {
	conv string
	seq  int64
}

// replaySessions replays each session of c as its own conversation of
// user, then asks each question, under every row of rp, in a new
// conversation of user that holds the question alone (deleted once
// asked).
func (r *runner) replaySessions(ctx context.Context, mem *chatmem.Memory, user chatmem.Key, c Conversation, rp replay, tc *textCache, out [][]sample) error {
	sessions, err := sessionsOf(c)
	if err != nil {
		return err
	}
	seqTurn := make(map[turnRef]string, len(c.Messages))
	const step = 50 // messages per progress report
	done := 0
	for si, msgs := range sessions {
		key := chatmem.Key{Tenant: user.Tenant, ID: keyID(r.prefix, c.ID+".s"+strconv.Itoa(si+1), rp.name)}
		for i, msg := range msgs {
			res, err := mem.Append(ctx, key, []chatmem.Message{msg}, chatmem.AppendOptions{User: user.ID})
			if err != nil {
				return fmt.Errorf("session %d message %d: %w", si+1, i+1, err)
			}
			seqTurn[turnRef{key.ID, res.Messages[0].Seq}] = msg.Metadata[TurnKey]
			if rp.readEachTurn && msg.Role == chatmem.RoleUser {
				for _, ri := range rp.rows {
					if _, err := mem.Context(ctx, key, r.policies[ri], chatmem.ContextOptions{}); err != nil && !errors.Is(err, chatmem.ErrBudgetTooSmall) {
						return err
					}
				}
			}
			if done++; done%step == 0 || done == len(c.Messages) {
				r.progress((done-1)%step + 1)
			}
		}
	}
	for qi, q := range c.Questions {
		key := chatmem.Key{Tenant: user.Tenant, ID: keyID(r.prefix, c.ID+".q"+strconv.Itoa(qi+1), rp.name)}
		question := chatmem.Message{Role: chatmem.RoleUser, Content: q.Question, Metadata: map[string]string{questionMeta: "question"}}
		if _, err := mem.Append(ctx, key, []chatmem.Message{question}, chatmem.AppendOptions{User: user.ID}); err != nil {
			return fmt.Errorf("question %q: %w", q.Question, err)
		}
		for _, ri := range rp.rows {
			p := r.policies[ri]
			s, err := ask(ctx, mem, key, p, q, seqTurn, tc, false)
			if err != nil {
				return fmt.Errorf("question %q under %s: %w", q.Question, rowOf(p).Label(), err)
			}
			out[ri] = append(out[ri], s)
		}
		if err := mem.Store().Delete(ctx, key); err != nil {
			return fmt.Errorf("delete %s: %w", key, err)
		}
	}
	return nil
}

// sessionsOf splits c's messages into sessions: runs of messages whose
// evidence IDs share their "D<n>:" prefix.
func sessionsOf(c Conversation) ([][]chatmem.Message, error) {
	var out [][]chatmem.Message
	last := ""
	for i, m := range c.Messages {
		id := m.Metadata[TurnKey]
		colon := strings.IndexByte(id, ':')
		if !diaID.MatchString(id) || colon < 0 {
			return nil, fmt.Errorf("%w: message %d of %s has evidence ID %q, not D<session>:<turn>: the dataset has no sessions", chatmem.ErrInvalid, i+1, c.ID, id)
		}
		if s := id[:colon]; s != last || len(out) == 0 {
			out = append(out, nil)
			last = s
		}
		out[len(out)-1] = append(out[len(out)-1], m)
	}
	return out, nil
}

// questionMeta marks the pending question, which is not memory: it is left
// out of the context text answer presence searches.
const questionMeta = "eval"

// ask assembles the context as if q were the next user message (pending),
// or with q stored as the conversation's last message (!pending), and
// scores it. seqTurn gives the evidence ID of a stored message.
func ask(ctx context.Context, mem *chatmem.Memory, key chatmem.Key, p chatmem.Policy, q Question, seqTurn map[turnRef]string, tc *textCache, pending bool) (sample, error) {
	s := sample{category: q.Category}
	// A preview: asking a question leaves the summaries as the replay's
	// traffic made them.
	opts := chatmem.ContextOptions{Preview: true}
	if pending {
		opts.Pending = []chatmem.Message{{Role: chatmem.RoleUser, Content: q.Question, Metadata: map[string]string{questionMeta: "question"}}}
	}
	t0 := time.Now()
	w, err := mem.Context(ctx, key, p, opts)
	s.dur = time.Since(t0)
	if errors.Is(err, chatmem.ErrBudgetTooSmall) {
		s.failed = true
		w = chatmem.Window{}
	} else if err != nil {
		return sample{}, err
	}
	s.tokens, s.summary = w.Tokens, w.Summary != nil

	found := make(map[string]bool)
	var texts []tokenSet
	for _, m := range w.Messages {
		if m.Metadata[questionMeta] != "" {
			continue
		}
		if id := m.Metadata[TurnKey]; id != "" {
			found[id] = true
			texts = append(texts, tc.get(id))
			continue
		}
		texts = append(texts, newTokenSet(m.Name+" "+m.Content)) // summary, facts, other system text
	}
	for _, f := range w.Facts {
		if id := seqTurn[turnRef{cmp.Or(f.Conversation, key.ID), f.SourceSeq}]; id != "" {
			found[id] = true
		}
	}
	s.recall, s.hits, s.recallOK = EvidenceRecall(q.Evidence, found)
	s.evidence = len(q.Evidence)
	s.presence, s.presenceOK = AnswerPresence(Normalize(q.Answer), texts)
	return s, nil
}

// EvidenceRecall returns the share of evidence whose IDs are in found, and
// how many are. ok is false for no evidence: such a question is not scored.
func EvidenceRecall(evidence []string, found map[string]bool) (recall float64, hits int, ok bool) {
	if len(evidence) == 0 {
		return 0, 0, false
	}
	for _, id := range evidence {
		if found[id] {
			hits++
		}
	}
	return float64(hits) / float64(len(evidence)), hits, true
}

// textCache keeps each dataset message's normalized tokens (its speaker's
// name and its content), by evidence ID, so that long contexts are not
// normalized again for every question.
type textCache struct {
	byID map[string]tokenSet
}

func newTextCache(msgs []chatmem.Message) *textCache {
	tc := &textCache{byID: make(map[string]tokenSet, len(msgs))}
	for _, m := range msgs {
		id := m.Metadata[TurnKey]
		if prev, ok := tc.byID[id]; ok {
			// Two messages share an ID (a dataset defect): the set holds both.
			for t := range newTokenSet(m.Name + " " + m.Content) {
				prev[t] = struct{}{}
			}
			continue
		}
		tc.byID[id] = newTokenSet(m.Name + " " + m.Content)
	}
	return tc
}

func (tc *textCache) get(id string) tokenSet { return tc.byID[id] }

// keyID makes a conversation ID the store accepts, unique to this run and
// replay.
func keyID(prefix, id, replay string) string {
	b := []byte(prefix + "." + replay + "." + id)
	for i, c := range b {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '_' && c != ':' && c != '@' && c != '-' {
			b[i] = '-'
		}
	}
	if len(b) > chatmem.MaxIDLen {
		b = b[:chatmem.MaxIDLen]
	}
	return string(b)
}

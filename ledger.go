package chatmem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ErrBudgetExhausted reports a tenant over its spend limit (Limit): the
// model call was not made. The HTTP API answers 429 budget_exhausted.
var ErrBudgetExhausted = errors.New("budget exhausted")

// DefaultUsageFlush is the default of LedgerOptions.FlushInterval.
const DefaultUsageFlush = 10 * time.Second

// LedgerOptions configure a Ledger. The zero value of every field means
// its default.
type LedgerOptions struct {
	// Store keeps the counts, shared by every process that writes to it.
	// Nil: they are kept in this process only, and lost with it.
	Store UsageStore
	// Prices turn tokens into cost; a model without a price costs
	// nothing and is reported as unpriced.
	Prices Prices
	// Limits returns a tenant's spend limits. Nil: no tenant has any.
	Limits func(tenant string) TenantLimits
	// FlushInterval is how often the counts recorded in this process are
	// added to Store, in one batch. Zero means DefaultUsageFlush; a
	// negative interval writes each record at once, on the caller's path.
	// What a process that crashes has recorded since its last flush is
	// lost: at most FlushInterval of its counts. A flush that fails keeps
	// its counts for the next one, and says so in the log.
	FlushInterval time.Duration
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
	// Logger receives the ledger's failures and the limits it enforces.
	// Nil: nothing is logged.
	Logger *slog.Logger
}

// Ledger counts model calls and their tokens by tenant, user,
// conversation, model and kind (see Usage), adds them to a UsageStore in
// batches, answers queries on them with their cost, and enforces the
// tenants' spend limits. It is safe for concurrent use. Start runs its
// flushes; Close writes what is left.
type Ledger struct {
	store    UsageStore
	prices   Prices
	limits   func(string) TenantLimits
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger

	// flushing is held by a flush for as long as it writes, and by
	// ForgetUser: an erasure waits for a flush under way, so a batch taken
	// before it cannot write the user's name back after it.
	flushing sync.Mutex

	mu      sync.Mutex
	pending map[bucketOf]*UsageRecord
	// totals are this process's counts since it started, for metrics.
	totals map[totalKey]*Usage
	// spent is each tenant's spend in its limits' current periods.
	spent    map[spentKey]*spentEntry
	refused  map[spentKey]int64
	unpriced map[string]bool
	flushErr int64

	stop, done chan struct{}
	closed     bool
}

type totalKey struct{ tenant, model, kind string }

// spentKey is a tenant's spend of one limit (memory: Limit.Memory).
type spentKey struct {
	tenant string
	memory bool
}

// spentEntry is a tenant's spend in the period starting at start: the
// store's sums as of fetched plus what this process recorded since
// (refreshing also collects them in since while the store is read).
type spentEntry struct {
	start, fetched time.Time
	tokens         int64
	cost           float64
	refreshing     bool
	sinceTokens    int64
	sinceCost      float64
	exhausted      bool
}

// NewLedger returns a Ledger; Start begins its flushes.
func NewLedger(opts LedgerOptions) *Ledger {
	l := &Ledger{
		store: opts.Store, prices: opts.Prices, limits: opts.Limits, interval: opts.FlushInterval, now: opts.Now, log: opts.Logger,
		pending: map[bucketOf]*UsageRecord{}, totals: map[totalKey]*Usage{}, spent: map[spentKey]*spentEntry{},
		refused: map[spentKey]int64{}, unpriced: map[string]bool{},
	}
	if l.store == nil {
		l.store = &localUsage{}
		l.interval = -1 // nothing to batch
	}
	if l.interval == 0 {
		l.interval = DefaultUsageFlush
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	return l
}

// Start begins the periodic flushes (none with a negative FlushInterval).
// It returns at once; Close stops them.
func (l *Ledger) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.interval < 0 || l.stop != nil || l.closed {
		return
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.run(l.stop, l.done)
}

func (l *Ledger) run(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), max(l.interval, 5*time.Second))
			l.flushLogged(ctx)
			cancel()
		}
	}
}

// Close stops the flushes and writes the counts not written yet. An error
// means they could not be: they are lost with the process.
func (l *Ledger) Close(ctx context.Context) error {
	l.mu.Lock()
	stop, done := l.stop, l.done
	l.stop, l.closed = nil, true
	l.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	return l.Flush(ctx)
}

// Record counts u, made now, for metrics, limits and the store (at the
// next flush, or at once with a negative FlushInterval, when an error is
// logged). An invalid u (see UsageRecord.Validate) is logged and not
// counted. A Usage with no Calls counts as one call.
func (l *Ledger) Record(ctx context.Context, u Usage) {
	if u.Calls == 0 {
		u.Calls = 1
	}
	r := UsageRecord{Hour: l.now().UTC().Truncate(time.Hour), Usage: u}
	if err := r.Validate(); err != nil {
		l.log.Error("usage not counted", "tenant", u.Tenant, "model", u.Model, "kind", u.Kind, "err", err)
		return
	}
	cost := l.cost(u.Model, u.Tokens)
	l.mu.Lock()
	b := r.bucket()
	if p := l.pending[b]; p != nil {
		p.Calls += r.Calls
		p.Tokens = p.Tokens.Add(r.Tokens)
	} else {
		l.pending[b] = &r
	}
	tk := totalKey{u.Tenant, u.Model, u.Kind}
	if t := l.totals[tk]; t != nil {
		t.Calls += u.Calls
		t.Tokens = t.Tokens.Add(u.Tokens)
	} else {
		l.totals[tk] = &Usage{Tenant: u.Tenant, Model: u.Model, Kind: u.Kind, Calls: u.Calls, Tokens: u.Tokens}
	}
	if e := l.spent[spentKey{u.Tenant, memoryCall(u.Kind)}]; e != nil && !r.Hour.Before(e.start) {
		e.tokens += u.Tokens.Total()
		e.cost += cost
		if e.refreshing {
			e.sinceTokens += u.Tokens.Total()
			e.sinceCost += cost
		}
	}
	sync := l.interval < 0
	l.mu.Unlock()
	if sync {
		if err := l.Flush(context.WithoutCancel(ctx)); err != nil {
			l.log.Error("usage not written; kept for the next write", "err", err)
		}
	}
}

// cost is what t of model costs at the ledger's prices (0 for a model
// without a price, which is remembered as unpriced).
func (l *Ledger) cost(model string, t Tokens) float64 {
	p, ok := l.prices[model]
	if !ok {
		l.mu.Lock()
		l.unpriced[model] = true
		l.mu.Unlock()
		return 0
	}
	return p.Cost(t)
}

// Flush adds the counts recorded since the last flush to the store. On an
// error they are kept for the next flush.
func (l *Ledger) Flush(ctx context.Context) error {
	l.flushing.Lock()
	defer l.flushing.Unlock()
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.mu.Unlock()
		return nil
	}
	batch := l.pending
	l.pending = map[bucketOf]*UsageRecord{}
	l.mu.Unlock()
	recs := make([]UsageRecord, 0, len(batch))
	for _, r := range batch {
		recs = append(recs, *r)
	}
	err := l.store.AddUsage(ctx, recs)
	if err == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushErr++
	for b, r := range batch {
		if p := l.pending[b]; p != nil {
			p.Calls += r.Calls
			p.Tokens = p.Tokens.Add(r.Tokens)
		} else {
			l.pending[b] = r
		}
	}
	return fmt.Errorf("write %d usage buckets: %w", len(recs), err)
}

// flushLogged is a periodic flush, its failure logged.
func (l *Ledger) flushLogged(ctx context.Context) {
	if err := l.Flush(ctx); err != nil {
		l.log.Error("usage not written; kept for the next flush", "err", err)
	}
}

// ForgetUser is the ledger's part of a user's erasure: the counts of this
// process not written yet lose the user's and their conversations' names,
// and the store's buckets of the user are anonymized
// (UsageStore.AnonymizeUsage). Counts another process has not written
// yet keep them: an erasure run after those processes flushed (one
// FlushInterval later) anonymizes them too.
func (l *Ledger) ForgetUser(ctx context.Context, user Key) error {
	l.flushing.Lock()
	defer l.flushing.Unlock()
	l.mu.Lock()
	for b, r := range l.pending {
		if b.tenant != user.Tenant || b.user != user.ID {
			continue
		}
		delete(l.pending, b)
		r.User, r.Conversation = "", ""
		nb := r.bucket()
		if p := l.pending[nb]; p != nil {
			p.Calls += r.Calls
			p.Tokens = p.Tokens.Add(r.Tokens)
		} else {
			l.pending[nb] = r
		}
	}
	l.mu.Unlock()
	return l.store.AnonymizeUsage(ctx, user)
}

// Allow returns nil if tenant may make a model call now: a memory call
// (summarize, extract, embed) under its Memory limit, a proxied one under
// its Proxy limit. Over it, it returns an error wrapping
// ErrBudgetExhausted and counts the refusal (Refused). The spend is the
// store's sums, read again at most once per FlushInterval (after writing
// this process's counts), plus what this process recorded since: other
// processes' calls count once they flushed, so a tenant shared by many
// may go over its limit by what they made in one FlushInterval.
func (l *Ledger) Allow(ctx context.Context, tenant string, memory bool) error {
	if l == nil || l.limits == nil {
		return nil
	}
	lims := l.limits(tenant)
	lim, what := lims.Proxy, "proxy"
	if memory {
		lim, what = lims.Memory, "memory"
	}
	if lim.IsZero() {
		return nil
	}
	now := l.now()
	start := periodStart(lim.Period, now)
	k := spentKey{tenant, memory}
	ttl := l.interval
	if ttl <= 0 {
		ttl = 5 * time.Second
	}
	l.mu.Lock()
	e := l.spent[k]
	stale := e == nil || !e.start.Equal(start) || now.Sub(e.fetched) >= ttl || now.Before(e.fetched)
	if stale && (e == nil || !e.refreshing) {
		if e == nil || !e.start.Equal(start) {
			e = &spentEntry{start: start, exhausted: e != nil && e.exhausted}
			l.spent[k] = e
		}
		e.refreshing, e.sinceTokens, e.sinceCost = true, 0, 0
		l.mu.Unlock()
		tokens, cost, err := l.spend(ctx, tenant, memory, start, now)
		l.mu.Lock()
		e.refreshing = false
		if err != nil {
			l.mu.Unlock()
			// Fail closed for memory calls, which wait; a proxied call is
			// the client's request and fails with the store.
			return fmt.Errorf("read the spend of tenant %s: %w", tenant, err)
		}
		e.tokens, e.cost, e.fetched = tokens+e.sinceTokens, cost+e.sinceCost, now
	}
	over := (lim.Tokens > 0 && e.tokens >= lim.Tokens) || (lim.Cost > 0 && e.cost >= lim.Cost)
	was := e.exhausted
	e.exhausted = over
	if over {
		l.refused[k]++
	}
	tokens, cost := e.tokens, e.cost
	l.mu.Unlock()
	switch {
	case over && !was:
		l.log.Warn("tenant over its "+what+" spend limit: its model calls stop until the limit allows",
			"tenant", tenant, "limit", lim.String(), "tokens", tokens, "cost", cost, "period_start", start)
	case !over && was:
		l.log.Info("tenant under its "+what+" spend limit again: its model calls resume", "tenant", tenant, "limit", lim.String())
	}
	if over {
		return fmt.Errorf("%w: tenant %s has spent %d tokens (cost %g) of its %s limit of %s", ErrBudgetExhausted, tenant, tokens, cost, what, lim)
	}
	return nil
}

// spend reads tenant's tokens and cost of memory (or proxied) calls from
// start to now, after writing this process's counts.
func (l *Ledger) spend(ctx context.Context, tenant string, memory bool, start, now time.Time) (int64, float64, error) {
	if err := l.Flush(ctx); err != nil {
		return 0, 0, err
	}
	rows, err := l.store.Usage(ctx, UsageQuery{Tenant: tenant, From: start, To: now.UTC().Truncate(time.Hour).Add(time.Hour), GroupBy: GroupByTenant})
	if err != nil {
		return 0, 0, err
	}
	var tokens int64
	var cost float64
	for _, r := range rows {
		if memoryCall(r.Kind) == memory {
			tokens += r.Tokens.Total()
			cost += l.cost(r.Model, r.Tokens)
		}
	}
	return tokens, cost, nil
}

// UsageCost is calls, tokens and their cost.
type UsageCost struct {
	Calls int64 `json:"calls"`
	Tokens
	// Cost is the cost of the tokens of priced models.
	Cost float64 `json:"cost"`
}

func (c *UsageCost) add(u Usage, cost float64) {
	c.Calls += u.Calls
	c.Tokens = c.Tokens.Add(u.Tokens)
	c.Cost += cost
}

// UsageGroup is one group of a UsageReport: its key (the tenant, user,
// conversation or model), its sums and their split by kind of call.
type UsageGroup struct {
	Key string `json:"key"`
	UsageCost
	ByKind map[string]UsageCost `json:"by_kind"`
}

// UsageReport answers Ledger.Query.
type UsageReport struct {
	From    time.Time    `json:"from"`
	To      time.Time    `json:"to"`
	GroupBy string       `json:"group_by"`
	Groups  []UsageGroup `json:"groups"`
	Total   UsageCost    `json:"total"`
	// Unpriced names the models counted that have no price: their
	// tokens are in the sums, their cost is not.
	Unpriced []string `json:"unpriced_models"`
}

// Query writes this process's counts, then sums the store's per group of
// q (see UsageQuery) with their cost, the groups in order of key.
func (l *Ledger) Query(ctx context.Context, q UsageQuery) (UsageReport, error) {
	if err := q.Validate(); err != nil {
		return UsageReport{}, err
	}
	if err := l.Flush(ctx); err != nil {
		return UsageReport{}, err
	}
	rows, err := l.store.Usage(ctx, q)
	if err != nil {
		return UsageReport{}, err
	}
	rep := UsageReport{From: q.From, To: q.To, GroupBy: q.GroupBy, Groups: []UsageGroup{}, Unpriced: []string{}}
	for _, r := range rows {
		key := r.group(q.GroupBy)
		if n := len(rep.Groups); n == 0 || rep.Groups[n-1].Key != key {
			rep.Groups = append(rep.Groups, UsageGroup{Key: key, ByKind: map[string]UsageCost{}})
		}
		g := &rep.Groups[len(rep.Groups)-1]
		cost := 0.0
		if p, ok := l.prices[r.Model]; ok {
			cost = p.Cost(r.Tokens)
		} else if !slices.Contains(rep.Unpriced, r.Model) {
			rep.Unpriced = append(rep.Unpriced, r.Model)
		}
		g.add(r, cost)
		k := g.ByKind[r.Kind]
		k.add(r, cost)
		g.ByKind[r.Kind] = k
		rep.Total.add(r, cost)
	}
	slices.Sort(rep.Unpriced)
	return rep, nil
}

// Prices returns a copy of the ledger's prices (none configured: an empty
// map), for showing what a call costs.
func (l *Ledger) Prices() Prices {
	out := make(Prices, len(l.prices))
	for m, p := range l.prices {
		out[m] = p
	}
	return out
}

// Totals calls f with this process's counts since it started, by tenant,
// model and kind (for metrics: they only grow).
func (l *Ledger) Totals(f func(u Usage)) {
	l.mu.Lock()
	all := make([]Usage, 0, len(l.totals))
	for _, t := range l.totals {
		all = append(all, *t)
	}
	l.mu.Unlock()
	for _, u := range all {
		f(u)
	}
}

// Refused calls f with the model calls Allow refused, by tenant and limit
// ("memory" or "proxy"), since the process started.
func (l *Ledger) Refused(f func(tenant, limit string, n int64)) {
	l.mu.Lock()
	type row struct {
		k spentKey
		n int64
	}
	var rows []row
	for k, n := range l.refused {
		rows = append(rows, row{k, n})
	}
	l.mu.Unlock()
	for _, r := range rows {
		limit := "proxy"
		if r.k.memory {
			limit = "memory"
		}
		f(r.k.tenant, limit, r.n)
	}
}

// FlushErrors returns how many flushes failed since the process started.
func (l *Ledger) FlushErrors() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushErr
}

// localUsage is the UsageStore of a Ledger without one: the process's
// buckets in a map.
type localUsage struct {
	mu      sync.Mutex
	buckets map[bucketOf]UsageRecord
}

func (s *localUsage) AddUsage(ctx context.Context, recs []UsageRecord) error {
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets == nil {
		s.buckets = map[bucketOf]UsageRecord{}
	}
	for _, r := range recs {
		b := r.bucket()
		p := s.buckets[b]
		r.Calls += p.Calls
		r.Tokens = r.Tokens.Add(p.Tokens)
		s.buckets[b] = r
	}
	return nil
}

func (s *localUsage) Usage(ctx context.Context, q UsageQuery) ([]Usage, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	recs := make([]UsageRecord, 0, len(s.buckets))
	for _, r := range s.buckets {
		recs = append(recs, r)
	}
	s.mu.Unlock()
	return GroupUsage(recs, q), nil
}

func (s *localUsage) AnonymizeUsage(ctx context.Context, user Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for b, r := range s.buckets {
		if b.tenant != user.Tenant || b.user != user.ID {
			continue
		}
		delete(s.buckets, b)
		r.User, r.Conversation = "", ""
		nb := r.bucket()
		p := s.buckets[nb]
		r.Calls += p.Calls
		r.Tokens = r.Tokens.Add(p.Tokens)
		s.buckets[nb] = r
	}
	return nil
}

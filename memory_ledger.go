package chatmem

import (
	"context"
	"time"
)

// resumeInterval is how often the worker queues again the work it holds
// for tenants over their memory spend limit, for the ledger to allow or
// hold again.
const resumeInterval = time.Minute

// maxHeld bounds the conversations whose work the worker holds; beyond
// it, work is dropped (and logged) as a full queue drops it: the summary
// and the facts catch up from their watermarks at the conversation's next
// append.
const maxHeld = derivedCacheEntries

// usageCtx returns ctx with a reporter that records the usage of the
// model calls of kind made under it for key's tenant, user and
// conversation (Options.Ledger; none: ctx itself).
func (m *Memory) usageCtx(ctx context.Context, key Key, user, kind string) context.Context {
	if m.ledger == nil {
		return ctx
	}
	return WithUsageReport(ctx, func(u ModelUsage) {
		m.ledger.Record(ctx, Usage{Tenant: key.Tenant, User: user, Conversation: key.ID, Model: u.Model, Kind: kind, Tokens: u.Tokens})
	})
}

// allowModels returns nil if the memory may call its models for tenant
// (Ledger.Allow). A Memory whose summarizer, extractors and embedder call
// no model (Local) is always allowed.
func (m *Memory) allowModels(ctx context.Context, tenant string) error {
	if m.ledger == nil || !m.callsModels() {
		return nil
	}
	return m.ledger.Allow(ctx, tenant, true)
}

// callsModels reports whether any of the summarizer, the extractors and
// the embedder is not Local.
func (m *Memory) callsModels() bool {
	if m.summarizer != nil && !local(m.summarizer) {
		return true
	}
	if m.embedder != nil && !local(m.embedder) {
		return true
	}
	for _, x := range m.extractors {
		if !local(x) {
			return true
		}
	}
	return false
}

// hold keeps j, refused by the tenant's memory spend limit (why), for
// later: the conversation's next append merges it into its own work, and
// resumeEvery queues it again. Nothing of it is lost: its messages are
// stored, and the summary and facts start from their watermarks.
func (m *Memory) hold(j job, why error) {
	w := &m.worker
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.held[j.key]; p != nil {
		p.merge(j)
		return
	}
	if len(w.held) >= maxHeld {
		w.heldDropped++
		m.log.Warn("work held for a tenant over its memory spend limit dropped (too many held): it catches up at the next append",
			"key", j.key.String(), "dropped", w.heldDropped)
		return
	}
	m.log.Debug("memory model calls held", "key", j.key.String(), "reason", why.Error())
	w.held[j.key] = &j
}

// unhold returns j merged after the work held for its conversation, if
// any, which it takes out of held. Called with w.mu held.
func (w *worker) unhold(j job) job {
	p := w.held[j.key]
	if p == nil {
		return j
	}
	delete(w.held, j.key)
	p.merge(j)
	return *p
}

// Held returns how many conversations have work held for tenants over
// their memory spend limit, for metrics.
func (m *Memory) Held() int {
	m.worker.mu.Lock()
	defer m.worker.mu.Unlock()
	return len(m.worker.held)
}

// Resume queues again the work held for tenants over their memory spend
// limit: the worker asks the ledger again, and does it or holds it. The
// worker calls it every minute; a program that raised a limit may call it
// at once.
func (m *Memory) Resume() {
	w := &m.worker
	w.mu.Lock()
	held := w.held
	w.held = make(map[Key]*job)
	w.mu.Unlock()
	for _, j := range held {
		m.enqueue(*j)
	}
}

// resumeEvery calls Resume every interval until stop is closed.
func (m *Memory) resumeEvery(stop chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			m.Resume()
		}
	}
}

package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatmem/chatmem"
)

// maxUsageRange bounds the hours GET /v1/usage sums.
const maxUsageRange = 366 * 24 * time.Hour

// getUsage is GET /v1/usage?from=&to=&group_by=: the cost ledger's sums
// of the caller's tenant for the hours from from (included) to to
// (excluded), by tenant, user, conversation or model, with their cost at
// the configured prices. from defaults to the start of the current UTC
// month, to to the end of the current hour, group_by to tenant. Times are
// RFC 3339 or YYYY-MM-DD (midnight UTC), on the hour.
func (s *Server) getUsage(c *call) error {
	l := s.mem.Ledger()
	if l == nil {
		return fmt.Errorf("%w: this server keeps no usage ledger", chatmem.ErrUnavailable)
	}
	q, err := query(c.r, "from", "to", "group_by")
	if err != nil {
		return err
	}
	now := s.mem.Now().UTC()
	from, err := usageTime(q.Get("from"), "from", time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		return err
	}
	to, err := usageTime(q.Get("to"), "to", now.Truncate(time.Hour).Add(time.Hour))
	if err != nil {
		return err
	}
	if to.Sub(from) > maxUsageRange {
		return fmt.Errorf("%w: the usage range is over %d days", chatmem.ErrInvalid, maxUsageRange/(24*time.Hour))
	}
	group := q.Get("group_by")
	if group == "" {
		group = chatmem.GroupByTenant
	}
	rep, err := timed(s, "usage", func() (chatmem.UsageReport, error) {
		return l.Query(c.r.Context(), chatmem.UsageQuery{Tenant: c.tenant, From: from, To: to, GroupBy: group})
	})
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, rep)
	return nil
}

// usageTime parses a time parameter of GET /v1/usage: RFC 3339 or a date,
// on the hour; empty is def.
func usageTime(v, name string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		if t, err = time.Parse(time.DateOnly, v); err != nil {
			return time.Time{}, fmt.Errorf("%w: parameter %s: %q is neither an RFC 3339 time nor a YYYY-MM-DD date", chatmem.ErrInvalid, name, v)
		}
	}
	t = t.UTC()
	if !t.Equal(t.Truncate(time.Hour)) {
		return time.Time{}, fmt.Errorf("%w: parameter %s: %s is not on the hour (usage is kept by the hour)", chatmem.ErrInvalid, name, v)
	}
	return t, nil
}

// upstreamUsage is a chat completion's usage, as OpenAI reports it: the
// prompt's tokens (the cached ones among them) and the completion's (the
// reasoning ones among them).
type upstreamUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details,omitempty"`
	// model is the model the reply names (for the cached-tokens metric).
	model string
}

// tokens returns u as the ledger counts it (parts clamped to their
// wholes, negative counts to zero: the upstream's numbers are not
// trusted to be consistent).
func (u *upstreamUsage) tokens() chatmem.Tokens {
	t := chatmem.Tokens{Input: max(u.PromptTokens, 0), Output: max(u.CompletionTokens, 0)}
	if d := u.PromptTokensDetails; d != nil {
		t.CachedInput = min(max(d.CachedTokens, 0), t.Input)
	}
	if d := u.CompletionTokensDetails; d != nil {
		t.Reasoning = min(max(d.ReasoningTokens, 0), t.Output)
	}
	return t
}

// callInfo is who a proxied call is counted for.
type callInfo struct {
	tenant, user, conversation, model, kind string
}

// recordUsage counts a proxied call whose upstream reported u (nil: it
// reported none, and the call is counted with no tokens).
func (s *Server) recordUsage(ctx context.Context, ci callInfo, u *upstreamUsage) {
	l := s.mem.Ledger()
	if l == nil {
		return
	}
	var t chatmem.Tokens
	if u != nil {
		t = u.tokens()
	}
	model := ci.model
	if chatmem.ValidateModel(model) != nil {
		model = "unknown"
	}
	if u == nil {
		s.log.LogAttrs(ctx, slog.LevelDebug, "upstream reported no usage; the call is counted without tokens",
			slog.String("request_id", infoOf(ctx).id), slog.String("model", model))
	}
	l.Record(ctx, chatmem.Usage{Tenant: ci.tenant, User: ci.user, Conversation: ci.conversation, Model: model, Kind: ci.kind, Tokens: t})
}

// allowProxy refuses a proxied call of a tenant over its proxy spend
// limit (chatmem.ErrBudgetExhausted: 429 budget_exhausted).
func (s *Server) allowProxy(ctx context.Context, tenant string) error {
	return s.mem.Ledger().Allow(ctx, tenant, false)
}

// usageCollector exports the ledger's counts of this process as
// Prometheus counters: calls and tokens by tenant, model, kind of call
// and (for tokens) kind of token; the model calls refused by spend
// limits; the failed flushes.
type usageCollector struct {
	mem                             *chatmem.Memory
	calls, tokens, refused, flushes *prometheus.Desc
	held                            *prometheus.Desc
}

func newUsageCollector(mem *chatmem.Memory) *usageCollector {
	return &usageCollector{
		mem: mem,
		calls: prometheus.NewDesc("chatmem_usage_calls_total",
			"Model calls counted by the cost ledger, by tenant, model and call (chat, responses, summarize, extract, embed).",
			[]string{"tenant", "model", "call"}, nil),
		tokens: prometheus.NewDesc("chatmem_usage_tokens_total",
			"Tokens of model calls as the provider reported them, by tenant, model, call and token kind (input, cached_input, output, reasoning, embedding_input; cached_input is part of input, reasoning of output).",
			[]string{"tenant", "model", "call", "token"}, nil),
		refused: prometheus.NewDesc("chatmem_usage_limit_refused_total",
			"Model calls not made because the tenant was over its spend limit (limit=memory: the worker held the work; limit=proxy: the request got 429 budget_exhausted).",
			[]string{"tenant", "limit"}, nil),
		flushes: prometheus.NewDesc("chatmem_usage_flush_errors_total",
			"Writes of the ledger's counts to the store that failed (the counts are kept for the next write).", nil, nil),
		held: prometheus.NewDesc("chatmem_worker_held_conversations",
			"Conversations whose summary, fact or embedding work is held while their tenant is over its memory spend limit.", nil, nil),
	}
}

func (u *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- u.calls
	ch <- u.tokens
	ch <- u.refused
	ch <- u.flushes
	ch <- u.held
}

func (u *usageCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(u.held, prometheus.GaugeValue, float64(u.mem.Held()))
	l := u.mem.Ledger()
	if l == nil {
		return
	}
	l.Totals(func(t chatmem.Usage) {
		ch <- prometheus.MustNewConstMetric(u.calls, prometheus.CounterValue, float64(t.Calls), t.Tenant, t.Model, t.Kind)
		for _, k := range []struct {
			name string
			n    int64
		}{{"input", t.Input}, {"cached_input", t.CachedInput}, {"output", t.Output}, {"reasoning", t.Reasoning}, {"embedding_input", t.EmbeddingInput}} {
			ch <- prometheus.MustNewConstMetric(u.tokens, prometheus.CounterValue, float64(k.n), t.Tenant, t.Model, t.Kind, k.name)
		}
	})
	l.Refused(func(tenant, limit string, n int64) {
		ch <- prometheus.MustNewConstMetric(u.refused, prometheus.CounterValue, float64(n), tenant, limit)
	})
	ch <- prometheus.MustNewConstMetric(u.flushes, prometheus.CounterValue, float64(l.FlushErrors()))
}

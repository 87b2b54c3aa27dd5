package chatmem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Price is what a model's tokens cost, per million tokens of each kind, in
// the unit of the prices file (chatmem assumes no currency). A kind whose
// price is not given costs what its whole costs: CachedInput and
// EmbeddingInput default to Input, Reasoning to Output.
type Price struct {
	Input          float64
	CachedInput    float64
	Output         float64
	Reasoning      float64
	EmbeddingInput float64
}

// Cost returns what t costs at p: uncached input at Input, cached input at
// CachedInput, output other than reasoning at Output, reasoning at
// Reasoning and embedding input at EmbeddingInput, per million tokens.
func (p Price) Cost(t Tokens) float64 {
	c := float64(t.Input-t.CachedInput)*p.Input + float64(t.CachedInput)*p.CachedInput +
		float64(t.Output-t.Reasoning)*p.Output + float64(t.Reasoning)*p.Reasoning +
		float64(t.EmbeddingInput)*p.EmbeddingInput
	return c / 1e6
}

// Prices are the prices of models by name, as the model is named in the
// calls (Usage.Model). None are built in: a model without a price has no
// cost (Ledger reports it as unpriced).
type Prices map[string]Price

// priceJSON is one model's entry of a prices file; a missing kind takes
// its default (Price).
type priceJSON struct {
	Input          *float64 `json:"input"`
	CachedInput    *float64 `json:"cached_input"`
	Output         *float64 `json:"output"`
	Reasoning      *float64 `json:"reasoning"`
	EmbeddingInput *float64 `json:"embedding_input"`
}

// ParsePrices reads a prices file in JSON: an object of models, each an
// object of per-million-token prices by token kind (input, cached_input,
// output, reasoning, embedding_input), such as
//
//	{"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
//	 "text-embedding-3-small": {"embedding_input": 0.02}}
//
// An unknown key, a negative or non-finite price, a model with no price
// or an invalid model name wraps ErrInvalid.
func ParsePrices(b []byte) (Prices, error) {
	var raw map[string]priceJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: prices: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: prices: data after the object", ErrInvalid)
	}
	out := make(Prices, len(raw))
	for model, p := range raw {
		if err := ValidateModel(model); err != nil {
			return nil, fmt.Errorf("prices: %w", err)
		}
		for _, v := range []*float64{p.Input, p.CachedInput, p.Output, p.Reasoning, p.EmbeddingInput} {
			if v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
				return nil, fmt.Errorf("%w: prices of %s: a price must be a number >= 0", ErrInvalid, model)
			}
		}
		if p.Input == nil && p.CachedInput == nil && p.Output == nil && p.Reasoning == nil && p.EmbeddingInput == nil {
			return nil, fmt.Errorf("%w: prices of %s: no price given", ErrInvalid, model)
		}
		val := func(v *float64, def float64) float64 {
			if v == nil {
				return def
			}
			return *v
		}
		var pr Price
		pr.Input = val(p.Input, 0)
		pr.Output = val(p.Output, 0)
		pr.CachedInput = val(p.CachedInput, pr.Input)
		pr.Reasoning = val(p.Reasoning, pr.Output)
		pr.EmbeddingInput = val(p.EmbeddingInput, pr.Input)
		out[model] = pr
	}
	return out, nil
}

// Periods of a Limit.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Limit bounds a tenant's spend per period: Tokens (Tokens.Total) or Cost
// (at the Ledger's prices), or both; zero means no bound of that kind, and
// the zero Limit none at all.
type Limit struct {
	Tokens int64
	Cost   float64
	// Period is PeriodDay (a UTC day) or PeriodMonth (a UTC month).
	Period string
}

// IsZero reports whether l bounds nothing.
func (l Limit) IsZero() bool { return l.Tokens == 0 && l.Cost == 0 }

// String formats l as ParseLimit reads it ("" for the zero Limit).
func (l Limit) String() string {
	var parts []string
	if l.Tokens > 0 {
		parts = append(parts, strconv.FormatInt(l.Tokens, 10)+" tokens")
	}
	if l.Cost > 0 {
		parts = append(parts, strconv.FormatFloat(l.Cost, 'f', -1, 64)+" cost")
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ", ") + " per " + l.Period
}

// ParseLimit reads a limit as "N tokens per day", "C cost per month" or
// both, separated by a comma ("2000000 tokens, 5 cost per month"). The
// empty string is the zero Limit. Anything else wraps ErrInvalid.
func ParseLimit(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Limit{}, nil
	}
	bad := func(why string) (Limit, error) {
		return Limit{}, fmt.Errorf("%w: limit %q: %s (want \"N tokens per day|month\", \"C cost per day|month\" or both, comma-separated)", ErrInvalid, s, why)
	}
	amounts, period, ok := strings.Cut(s, " per ")
	if !ok {
		return bad("no period")
	}
	l := Limit{Period: strings.TrimSpace(period)}
	if l.Period != PeriodDay && l.Period != PeriodMonth {
		return bad("the period must be day or month")
	}
	for part := range strings.SplitSeq(amounts, ",") {
		f := strings.Fields(part)
		if len(f) != 2 {
			return bad("an amount is a number and a unit")
		}
		switch f[1] {
		case "tokens":
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || n <= 0 || l.Tokens != 0 {
				return bad("tokens must be given once, as a whole number > 0")
			}
			l.Tokens = n
		case "cost":
			c, err := strconv.ParseFloat(f[0], 64)
			if err != nil || c <= 0 || math.IsInf(c, 0) || l.Cost != 0 {
				return bad("cost must be given once, as a number > 0")
			}
			l.Cost = c
		default:
			return bad("the unit must be tokens or cost")
		}
	}
	return l, nil
}

// periodStart returns the start of the period of l that holds t (UTC).
func periodStart(period string, t time.Time) time.Time {
	t = t.UTC()
	if period == PeriodMonth {
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// TenantLimits are the limits of one tenant's spend: Memory on the
// memory's own model calls (summarize, extract, embed), Proxy on the
// proxied ones (chat, responses).
type TenantLimits struct {
	Memory Limit
	Proxy  Limit
}

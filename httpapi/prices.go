package httpapi

import (
	"net/http"

	"github.com/chatmem/chatmem"
)

// PricesAnswer answers GET /v1/prices: the configured per-million-token
// prices by model, every token kind filled in (a kind the prices file did
// not give has its default); empty when none are configured.
type PricesAnswer struct {
	Prices map[string]PriceJSON `json:"prices"`
}

// PriceJSON is one model's prices per million tokens, by token kind.
type PriceJSON struct {
	Input          float64 `json:"input"`
	CachedInput    float64 `json:"cached_input"`
	Output         float64 `json:"output"`
	Reasoning      float64 `json:"reasoning"`
	EmbeddingInput float64 `json:"embedding_input"`
}

// getPrices answers GET /v1/prices, so that a client (the inspector) can
// price one call as GET /v1/usage prices its sums. A server without a
// ledger has no prices.
func (s *Server) getPrices(c *call) error {
	var ps chatmem.Prices
	if l := s.mem.Ledger(); l != nil {
		ps = l.Prices()
	}
	out := PricesAnswer{Prices: make(map[string]PriceJSON, len(ps))}
	for m, p := range ps {
		out.Prices[m] = PriceJSON{Input: p.Input, CachedInput: p.CachedInput, Output: p.Output, Reasoning: p.Reasoning, EmbeddingInput: p.EmbeddingInput}
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

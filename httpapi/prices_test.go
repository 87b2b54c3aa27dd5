package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
)

// TestPrices: GET /v1/prices gives the ledger's prices with every token
// kind filled in by its default, and none without prices or a ledger.
func TestPrices(t *testing.T) {
	prices, err := chatmem.ParsePrices([]byte(`{"gpt-4o-mini": {"input": 0.15, "output": 0.6}, "text-embedding-3-small": {"embedding_input": 0.02}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		ledger *chatmem.Ledger
		want   map[string]PriceJSON
	}{
		{"priced", chatmem.NewLedger(chatmem.LedgerOptions{Prices: prices}), map[string]PriceJSON{
			"gpt-4o-mini":            {Input: 0.15, CachedInput: 0.15, Output: 0.6, Reasoning: 0.6, EmbeddingInput: 0.15},
			"text-embedding-3-small": {EmbeddingInput: 0.02},
		}},
		{"no prices", chatmem.NewLedger(chatmem.LedgerOptions{}), map[string]PriceJSON{}},
		{"no ledger", nil, map[string]PriceJSON{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := newMemory(t, memstore.New(), func(o *chatmem.Options) { o.Ledger = tt.ledger })
			ts := newTestServer(t, mem, Options{})
			r := ts.raw(t, http.MethodGet, "/v1/prices", acmeKey, nil, "")
			var got PricesAnswer
			if r.status != http.StatusOK || json.Unmarshal(r.body, &got) != nil || got.Prices == nil {
				t.Fatalf("GET /v1/prices = %d %s", r.status, r.body)
			}
			if len(got.Prices) != len(tt.want) {
				t.Fatalf("GET /v1/prices = %+v, want %+v", got.Prices, tt.want)
			}
			for m, w := range tt.want {
				if got.Prices[m] != w {
					t.Errorf("price of %s = %+v, want %+v", m, got.Prices[m], w)
				}
			}
			if r := ts.raw(t, http.MethodGet, "/v1/prices", "", nil, ""); r.status != http.StatusUnauthorized {
				t.Errorf("GET /v1/prices without a key = %d, want 401", r.status)
			}
		})
	}
}

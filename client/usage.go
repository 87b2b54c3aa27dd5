package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/chatmem/chatmem"
)

// Usage returns the cost ledger's sums for the hours from from (included)
// to to (excluded), both on the hour, of the caller's tenant (every
// tenant's on a server without API keys), by groupBy (chatmem.GroupByTenant,
// GroupByUser, GroupByConversation or GroupByModel), as GET /v1/usage
// answers them.
func (c *Client) Usage(ctx context.Context, from, to time.Time, groupBy string) (chatmem.UsageReport, error) {
	q := url.Values{
		"from":     {from.UTC().Format(time.RFC3339)},
		"to":       {to.UTC().Format(time.RFC3339)},
		"group_by": {groupBy},
	}
	var out chatmem.UsageReport
	_, err := c.do(ctx, http.MethodGet, "/v1/usage", q, nil, nil, &out)
	return out, err
}

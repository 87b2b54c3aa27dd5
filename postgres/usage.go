package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.UsageStore = (*Store)(nil)

// usageSQL is the cost ledger's SQL for schema s (sanitized).
func usageSQL(s, sql string) string { return strings.ReplaceAll(sql, "{s}", s) }

const (
	// addUsage adds the records $1..$12 (arrays, one element per
	// record, buckets unique) to their buckets.
	addUsage = `
INSERT INTO {s}.usage AS u (tenant, hour, user_id, conversation, model, kind,
    calls, input, cached_input, output, reasoning, embedding_input)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[],
    $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[])
ON CONFLICT (tenant, hour, user_id, conversation, model, kind) DO UPDATE SET
    calls = u.calls + excluded.calls, input = u.input + excluded.input,
    cached_input = u.cached_input + excluded.cached_input, output = u.output + excluded.output,
    reasoning = u.reasoning + excluded.reasoning, embedding_input = u.embedding_input + excluded.embedding_input`

	// anonymizeUsage deletes the user's rows and adds them to the rows
	// with no user and no conversation, in one statement.
	anonymizeUsage = `
WITH gone AS (
    DELETE FROM {s}.usage WHERE tenant = $1 AND user_id = $2
    RETURNING tenant, hour, model, kind, calls, input, cached_input, output, reasoning, embedding_input
)
INSERT INTO {s}.usage AS u (tenant, hour, user_id, conversation, model, kind,
    calls, input, cached_input, output, reasoning, embedding_input)
SELECT tenant, hour, '', '', model, kind, SUM(calls), SUM(input), SUM(cached_input), SUM(output),
    SUM(reasoning), SUM(embedding_input)
FROM gone GROUP BY tenant, hour, model, kind
ON CONFLICT (tenant, hour, user_id, conversation, model, kind) DO UPDATE SET
    calls = u.calls + excluded.calls, input = u.input + excluded.input,
    cached_input = u.cached_input + excluded.cached_input, output = u.output + excluded.output,
    reasoning = u.reasoning + excluded.reasoning, embedding_input = u.embedding_input + excluded.embedding_input`
)

// usageColumn is the column of each chatmem.UsageQuery.GroupBy.
var usageColumn = map[string]string{
	chatmem.GroupByTenant:       "tenant",
	chatmem.GroupByUser:         "user_id",
	chatmem.GroupByConversation: "conversation",
	chatmem.GroupByModel:        "model",
}

// selectUsage sums the buckets by col (a column of usageColumn), model
// and kind, of tenant $1 (or, with all, every tenant) and hours $2..$3.
func selectUsage(col string, all bool) string {
	where := "tenant = $1 AND hour >= $2 AND hour < $3"
	if all {
		where = "$1 = '' AND hour >= $2 AND hour < $3"
	}
	return fmt.Sprintf(`
SELECT %[1]s, model, kind, SUM(calls)::bigint, SUM(input)::bigint, SUM(cached_input)::bigint, SUM(output)::bigint,
    SUM(reasoning)::bigint, SUM(embedding_input)::bigint
FROM {s}.usage WHERE %[2]s
GROUP BY %[1]s, model, kind ORDER BY %[1]s, model, kind`, col, where)
}

// AddUsage adds each record to its hour bucket in one statement; see
// chatmem.UsageStore.
func (s *Store) AddUsage(ctx context.Context, recs []chatmem.UsageRecord) error {
	const op = "postgres: add usage"
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	if len(recs) == 0 {
		return nil
	}
	// One row per bucket: an upsert may not touch a row twice.
	type bucket struct {
		hour                                    int64
		tenant, user, conversation, model, kind string
	}
	sums := map[bucket]*chatmem.UsageRecord{}
	var order []bucket
	for _, r := range recs {
		b := bucket{r.Hour.Unix(), r.Tenant, r.User, r.Conversation, r.Model, r.Kind}
		if p := sums[b]; p != nil {
			p.Calls += r.Calls
			p.Tokens = p.Tokens.Add(r.Tokens)
			continue
		}
		sums[b] = &r
		order = append(order, b)
	}
	// A fixed order of rows, so that concurrent batches lock in one order.
	slices.SortFunc(order, func(a, b bucket) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	n := len(order)
	tenants, users, convs, models, kinds := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	hours := make([]time.Time, n)
	calls, in, cached, out, reasoning, emb := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, b := range order {
		r := sums[b]
		tenants[i], users[i], convs[i], models[i], kinds[i] = r.Tenant, r.User, r.Conversation, r.Model, r.Kind
		hours[i] = r.Hour.UTC()
		calls[i], in[i], cached[i], out[i], reasoning[i], emb[i] = r.Calls, r.Input, r.CachedInput, r.Output, r.Reasoning, r.EmbeddingInput
	}
	sql := usageSQL(pgx.Identifier{s.schema}.Sanitize(), addUsage)
	if _, err := s.pool.Exec(ctx, sql, tenants, hours, users, convs, models, kinds, calls, in, cached, out, reasoning, emb); err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

// Usage sums the buckets q selects; see chatmem.UsageStore.
func (s *Store) Usage(ctx context.Context, q chatmem.UsageQuery) ([]chatmem.Usage, error) {
	const op = "postgres: usage"
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	sql := usageSQL(pgx.Identifier{s.schema}.Sanitize(), selectUsage(usageColumn[q.GroupBy], q.Tenant == ""))
	rows, err := s.pool.Query(ctx, sql, q.Tenant, q.From.UTC(), q.To.UTC())
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (chatmem.Usage, error) {
		var u chatmem.Usage
		var g string
		err := row.Scan(&g, &u.Model, &u.Kind, &u.Calls, &u.Input, &u.CachedInput, &u.Output, &u.Reasoning, &u.EmbeddingInput)
		switch q.GroupBy {
		case chatmem.GroupByTenant:
			u.Tenant = g
		case chatmem.GroupByUser:
			u.User = g
		case chatmem.GroupByConversation:
			u.Conversation = g
		}
		return u, err
	})
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	if out == nil {
		out = []chatmem.Usage{}
	}
	return out, nil
}

// AnonymizeUsage moves the user's buckets to the ones with no user and no
// conversation, in one statement; see chatmem.UsageStore.
func (s *Store) AnonymizeUsage(ctx context.Context, user chatmem.Key) error {
	op := "postgres: anonymize the usage of " + user.String()
	if err := storekit.CheckUser(user); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	sql := usageSQL(pgx.Identifier{s.schema}.Sanitize(), anonymizeUsage)
	if _, err := s.pool.Exec(ctx, sql, user.Tenant, user.ID); err != nil {
		return wrap(ctx, op, err)
	}
	return nil
}

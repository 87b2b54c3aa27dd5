package sqlite

import (
	"context"
	"fmt"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

var _ chatmem.UsageStore = (*Store)(nil)

const (
	addUsage = `INSERT INTO usage (tenant, hour, user_id, conversation, model, kind,
    calls, input, cached_input, output, reasoning, embedding_input)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
ON CONFLICT (tenant, hour, user_id, conversation, model, kind) DO UPDATE SET
    calls = calls + excluded.calls, input = input + excluded.input,
    cached_input = cached_input + excluded.cached_input, output = output + excluded.output,
    reasoning = reasoning + excluded.reasoning, embedding_input = embedding_input + excluded.embedding_input`

	// anonymizeUsage adds the user's rows to the rows with no user and
	// no conversation; deleteUserUsage then deletes them.
	anonymizeUsage = `INSERT INTO usage (tenant, hour, user_id, conversation, model, kind,
    calls, input, cached_input, output, reasoning, embedding_input)
SELECT tenant, hour, '', '', model, kind, SUM(calls), SUM(input), SUM(cached_input), SUM(output),
    SUM(reasoning), SUM(embedding_input)
FROM usage INDEXED BY usage_by_user WHERE tenant = ?1 AND user_id = ?2
GROUP BY hour, model, kind
ON CONFLICT (tenant, hour, user_id, conversation, model, kind) DO UPDATE SET
    calls = calls + excluded.calls, input = input + excluded.input,
    cached_input = cached_input + excluded.cached_input, output = output + excluded.output,
    reasoning = reasoning + excluded.reasoning, embedding_input = embedding_input + excluded.embedding_input`
	deleteUserUsage = `DELETE FROM usage INDEXED BY usage_by_user WHERE tenant = ?1 AND user_id = ?2`
)

// usageColumn is the column of each chatmem.UsageQuery.GroupBy.
var usageColumn = map[string]string{
	chatmem.GroupByTenant:       "tenant",
	chatmem.GroupByUser:         "user_id",
	chatmem.GroupByConversation: "conversation",
	chatmem.GroupByModel:        "model",
}

// selectUsage returns the query summing the buckets by col (a column of
// usageColumn), model and kind, of one tenant (?1) or all.
func selectUsage(col string, oneTenant bool) string {
	where := "hour >= ?2 AND hour < ?3"
	if oneTenant {
		where = "tenant = ?1 AND " + where
	} else {
		where = "?1 = '' AND " + where
	}
	return fmt.Sprintf(`SELECT %[1]s, model, kind, SUM(calls), SUM(input), SUM(cached_input), SUM(output),
    SUM(reasoning), SUM(embedding_input)
FROM usage WHERE %[2]s
GROUP BY %[1]s, model, kind ORDER BY %[1]s, model, kind`, col, where)
}

// usageWriteStatements are the ledger's statements prepared on the write
// pool; usageReadStatements returns those of the read pool.
var usageWriteStatements = []string{addUsage, anonymizeUsage, deleteUserUsage}

func usageReadStatements() []string {
	var out []string
	for _, g := range chatmem.UsageGroups {
		out = append(out, selectUsage(usageColumn[g], true), selectUsage(usageColumn[g], false))
	}
	return out
}

// AddUsage adds each record to its hour bucket in one transaction; see
// chatmem.UsageStore.
func (s *Store) AddUsage(ctx context.Context, recs []chatmem.UsageRecord) error {
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	if len(recs) == 0 {
		return nil
	}
	err := s.write(ctx, func(t tx) error {
		for _, r := range recs {
			if _, err := t.exec(addUsage, r.Tenant, r.Hour.Unix(), r.User, r.Conversation, r.Model, r.Kind,
				r.Calls, r.Input, r.CachedInput, r.Output, r.Reasoning, r.EmbeddingInput); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("add usage: %w", translate(ctx, err))
	}
	return nil
}

// Usage sums the buckets q selects; see chatmem.UsageStore.
func (s *Store) Usage(ctx context.Context, q chatmem.UsageQuery) ([]chatmem.Usage, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	col := usageColumn[q.GroupBy]
	rows, err := s.r.query(ctx, selectUsage(col, q.Tenant != ""), q.Tenant, q.From.Unix(), q.To.Unix())
	if err != nil {
		return nil, translate(ctx, err)
	}
	defer rows.Close()
	out := []chatmem.Usage{}
	for rows.Next() {
		var u chatmem.Usage
		var g string
		if err := rows.Scan(&g, &u.Model, &u.Kind, &u.Calls, &u.Input, &u.CachedInput, &u.Output, &u.Reasoning, &u.EmbeddingInput); err != nil {
			return nil, translate(ctx, err)
		}
		setGroup(&u, q.GroupBy, g)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(ctx, err)
	}
	return out, nil
}

// setGroup sets u's field that group names to g.
func setGroup(u *chatmem.Usage, group, g string) {
	switch group {
	case chatmem.GroupByTenant:
		u.Tenant = g
	case chatmem.GroupByUser:
		u.User = g
	case chatmem.GroupByConversation:
		u.Conversation = g
	}
}

// AnonymizeUsage moves the user's buckets to the ones with no user and no
// conversation, in one transaction; see chatmem.UsageStore.
func (s *Store) AnonymizeUsage(ctx context.Context, user chatmem.Key) error {
	if err := storekit.CheckUser(user); err != nil {
		return err
	}
	err := s.write(ctx, func(t tx) error {
		if _, err := t.exec(anonymizeUsage, user.Tenant, user.ID); err != nil {
			return err
		}
		_, err := t.exec(deleteUserUsage, user.Tenant, user.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("anonymize the usage of %s: %w", user, translate(ctx, err))
	}
	return nil
}

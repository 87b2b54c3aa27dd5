package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/vectors"
)

var _ chatmem.VectorStore = (*Store)(nil)

// vectorQueries are the statements of PutVectors and NearestVectors.
type vectorQueries struct{ put, nearest string }

// vectorQueries returns the vector statements with the schema filled in.
// They are built per call rather than kept in queries: a few hundred
// bytes replaced, next to a round trip that moves kilobytes of vectors.
func (s *Store) vectorQueries() vectorQueries {
	return buildVectorQueries(s.schema)
}

func buildVectorQueries(schema string) vectorQueries {
	sc := pgx.Identifier{schema}.Sanitize()
	q := func(sql string) string { return strings.ReplaceAll(sql, "{s}", sc) }
	return vectorQueries{
		// put writes the vectors ($5[i] for seq $4[i]) of the live
		// conversation ($1, $2) under model $6 in one statement, and
		// none if the conversation is missing or expired. FOR SHARE holds
		// the conversation row until the statement ends: Delete, the
		// sweeps and an append that restarts the conversation wait for
		// it, and then delete what it wrote; if one of them went first,
		// the row is gone and nothing is written.
		put: q(`
WITH c AS (SELECT num FROM {s}.conversations
           WHERE tenant = $1 AND id = $2 AND (expires_at IS NULL OR expires_at > $3)
           FOR SHARE)
INSERT INTO {s}.message_vectors (conv, model, seq, vec)
SELECT c.num, $6, u.seq, u.vec FROM c, unnest($4::bigint[], $5::bytea[]) AS u (seq, vec)
ON CONFLICT (conv, model, seq) DO UPDATE SET vec = EXCLUDED.vec`),

		// nearest reads the vectors under model $4 of the messages with
		// $5 <= seq < $6 that are $7 bytes long: one range scan of
		// message_vectors_pkey. A live conversation with none returns one
		// row of NULLs; a missing or expired one returns no row.
		nearest: q(`
SELECT v.seq, v.vec
FROM {s}.conversations c
LEFT JOIN {s}.message_vectors v
       ON v.conv = c.num AND v.model = $4 AND v.seq >= $5 AND v.seq < $6 AND length(v.vec) = $7
WHERE c.tenant = $1 AND c.id = $2 AND (c.expires_at IS NULL OR c.expires_at > $3)`),
	}
}

// PutVectors stores vecs[i] as message seqs[i]'s vector under model,
// replacing any stored one (see chatmem.VectorStore), in one statement:
// all of them or, on an error, none. Besides mismatched lengths, an empty
// model and an empty vector, a seq below 1 or given twice, vectors of
// different lengths in one call, a NaN or infinite component and a model
// name text cannot hold (NUL, invalid UTF-8) wrap chatmem.ErrInvalid; a
// missing or expired conversation wraps chatmem.ErrNotFound. It is safe
// for concurrent use.
func (s *Store) PutVectors(ctx context.Context, key chatmem.Key, model string, seqs []int64, vecs [][]float32) error {
	op := "postgres: put vectors of " + key.String()
	if err := key.Validate(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := vectors.Check(model, seqs, vecs); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := storableText("vector model", model); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if len(seqs) == 0 {
		return s.live(ctx, op, key)
	}
	// Rows go in seq order, so that two puts sharing seqs lock them in
	// the same order and cannot deadlock.
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(seqs[a], seqs[b]) })
	sorted := make([]int64, len(seqs))
	encoded := make([][]byte, len(seqs))
	buf := make([]byte, 4*len(vecs[0])*len(vecs))
	for i, j := range order {
		sorted[i] = seqs[j]
		encoded[i], buf = vectors.Encode(buf, vecs[j])
	}
	tag, err := s.pool.Exec(ctx, s.vectorQueries().put, key.Tenant, key.ID, s.now(), sorted, encoded, model)
	if err != nil {
		return wrap(ctx, op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", op, chatmem.ErrNotFound)
	}
	return nil
}

// NearestVectors returns the limit messages with before-span <= Seq <
// before whose vectors under model are most similar to query, best first
// (see chatmem.VectorStore). Equal similarities put the higher seq first;
// stored vectors of another length than query are skipped. It is one
// statement, a range scan of message_vectors' primary key over at most
// span rows; the cosines are computed here, on the rows as they arrive,
// keeping the best in a heap of limit. The arguments are checked as
// chatmem.VectorStore says (a model name text cannot hold finds nothing);
// a missing or expired conversation wraps chatmem.ErrNotFound. It is safe
// for concurrent use.
func (s *Store) NearestVectors(ctx context.Context, key chatmem.Key, model string, query []float32, before int64, span, limit int) ([]chatmem.VectorHit, error) {
	op := "postgres: nearest vectors in " + key.String()
	if err := key.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if err := vectors.CheckQuery(model, query, span, limit); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if before <= 1 || storableText("vector model", model) != nil {
		// No message is before seq 1, and no vector was stored under a
		// model text cannot hold.
		if err := s.live(ctx, op, key); err != nil {
			return nil, err
		}
		return []chatmem.VectorHit{}, nil
	}
	lo := max(before-int64(span), 1)
	rows, err := s.pool.Query(ctx, s.vectorQueries().nearest, key.Tenant, key.ID, s.now(), model, lo, before, 4*len(query))
	if err != nil {
		return nil, wrap(ctx, op, err)
	}
	defer rows.Close()
	top := vectors.NewNearest(limit)
	qq := vectors.Norm2(query)
	found := false
	var seq pgtype.Int8
	var vec pgtype.DriverBytes // the row's own bytes, valid until Next: no copy
	dest := []any{&seq, &vec}  // one slice for all rows, not one per Scan
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, wrap(ctx, op, err)
		}
		found = true
		if seq.Valid && len(vec) == 4*len(query) {
			top.Add(chatmem.VectorHit{Seq: seq.Int64, Similarity: vectors.CosineBytes(query, qq, vec)})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(ctx, op, err)
	}
	if !found {
		return nil, fmt.Errorf("%s: %w", op, chatmem.ErrNotFound)
	}
	return top.Sorted(), nil
}

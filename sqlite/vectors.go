package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/vectors"
)

var _ chatmem.VectorStore = (*Store)(nil)

// The vectors of the embedding retriever (migrations/0004_vectors.sql). The
// statements are not among those Open prepares: a vector write or search
// moves kilobytes per row, next to which parsing the statement once per
// call is noise.
const (
	// upsertVector stores one vector of conversation ?1 under model ?2.
	upsertVector = `INSERT INTO message_vectors (conv, model, seq, vec) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (conv, model, seq) DO UPDATE SET vec = excluded.vec`

	// selectVectors reads the vectors of conversation ?1 under model ?2
	// with ?3 <= seq < ?4 that are ?5 bytes long: one range of the
	// primary key's index.
	selectVectors = `SELECT seq, vec FROM message_vectors
		WHERE conv = ?1 AND model = ?2 AND seq >= ?3 AND seq < ?4 AND length(vec) = ?5`
)

// PutVectors stores vecs[i] as message seqs[i]'s vector under model,
// replacing any stored one (chatmem.VectorStore), in one IMMEDIATE
// transaction: all of them or, on an error, none. The arguments are
// checked first, as chatmem.VectorStore says; a conversation that does not
// exist or has expired returns chatmem.ErrNotFound. The vectors go with their
// conversation by ON DELETE CASCADE, however it ends. It is safe for
// concurrent use.
func (s *Store) PutVectors(ctx context.Context, key chatmem.Key, model string, seqs []int64, vecs [][]float32) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := vectors.Check(model, seqs, vecs); err != nil {
		return err
	}
	now := s.now()
	if len(seqs) == 0 {
		return s.read(ctx, func(t tx) error {
			_, err := liveNum(t, key, now)
			return err
		})
	}
	buf := make([]byte, 4*len(vecs[0])*len(vecs))
	encoded := make([][]byte, len(vecs))
	for i, v := range vecs {
		encoded[i], buf = vectors.Encode(buf, v)
	}
	return s.write(ctx, func(t tx) error {
		num, err := liveNum(t, key, now)
		if err != nil {
			return err
		}
		st, err := t.tx.PrepareContext(t.ctx, upsertVector)
		if err != nil {
			return err
		}
		defer st.Close()
		for i, seq := range seqs {
			if _, err := st.ExecContext(t.ctx, num, model, seq, encoded[i]); err != nil {
				return fmt.Errorf("put vector of seq %d: %w", seq, err)
			}
		}
		return nil
	})
}

// liveNum returns the number of the conversation at key, which must not
// have expired by now.
func liveNum(t tx, key chatmem.Key, now time.Time) (int64, error) {
	var num int64
	err := t.tx.QueryRowContext(t.ctx, selectLiveConversationNum, key.Tenant, key.ID, clampedNanos(now)).Scan(&num)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, notFound(key)
	}
	return num, err
}

// NearestVectors returns the limit messages with before-span <= Seq <
// before whose vectors under model are most similar to query, best first
// (chatmem.VectorStore). Equal similarities put the higher seq first;
// stored vectors of another length than query are skipped. It reads, in
// one snapshot, the conversation's number and then one range of
// message_vectors' primary key, at most span rows; the cosines are
// computed here, on the rows as they arrive, keeping the best in a heap of
// limit. The arguments are checked as chatmem.VectorStore says; a
// conversation that does not exist or has expired returns
// chatmem.ErrNotFound. It is safe for concurrent use.
func (s *Store) NearestVectors(ctx context.Context, key chatmem.Key, model string, query []float32, before int64, span, limit int) ([]chatmem.VectorHit, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if err := vectors.CheckQuery(model, query, span, limit); err != nil {
		return nil, err
	}
	now := s.now()
	top := vectors.NewNearest(limit)
	err := s.read(ctx, func(t tx) error {
		num, err := liveNum(t, key, now)
		if err != nil || before <= 1 {
			return err
		}
		lo := max(before-int64(span), 1)
		rows, err := t.tx.QueryContext(t.ctx, selectVectors, num, model, lo, before, 4*len(query))
		if err != nil {
			return err
		}
		defer rows.Close()
		qq := vectors.Norm2(query)
		var seq int64
		var vec sql.RawBytes // the driver's bytes, valid until Next: no copy
		dest := []any{&seq, &vec}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			if len(vec) == 4*len(query) {
				top.Add(chatmem.VectorHit{Seq: seq, Similarity: vectors.CosineBytes(query, qq, vec)})
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return top.Sorted(), nil
}

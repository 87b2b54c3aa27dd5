package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"chatmem"
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
// transaction: all of them or, on an error, none. Besides mismatched
// lengths, an empty model and an empty vector, a seq below 1 or given
// twice, vectors of different lengths in one call and a NaN or infinite
// component wrap chatmem.ErrInvalid; a conversation that does not exist or
// has expired returns chatmem.ErrNotFound. The vectors go with their
// conversation by ON DELETE CASCADE, however it ends. It is safe for
// concurrent use.
func (s *Store) PutVectors(ctx context.Context, key chatmem.Key, model string, seqs []int64, vecs [][]float32) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if err := checkVectors(model, seqs, vecs); err != nil {
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
		encoded[i], buf = encodeVector(buf, v)
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

// encodeVector writes v into the front of buf as little-endian float32s
// and returns those bytes and the rest of buf.
func encodeVector(buf []byte, v []float32) (enc, rest []byte) {
	enc = buf[: 4*len(v) : 4*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint32(enc[4*i:], math.Float32bits(x))
	}
	return enc, buf[4*len(v):]
}

// NearestVectors returns the limit messages with before-span <= Seq <
// before whose vectors under model are most similar to query, best first
// (chatmem.VectorStore). Equal similarities put the higher seq first;
// stored vectors of another length than query are skipped. It reads, in
// one snapshot, the conversation's number and then one range of
// message_vectors' primary key, at most span rows; the cosines are
// computed here, on the rows as they arrive, keeping the best in a heap of
// limit. An empty model or query, a NaN or infinite component in query,
// span < 1 or limit < 1 wraps chatmem.ErrInvalid; a conversation that does
// not exist or has expired returns chatmem.ErrNotFound. It is safe for
// concurrent use.
func (s *Store) NearestVectors(ctx context.Context, key chatmem.Key, model string, query []float32, before int64, span, limit int) ([]chatmem.VectorHit, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if err := checkQuery(model, query, span, limit); err != nil {
		return nil, err
	}
	now := s.now()
	top := nearest{limit: limit}
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
		qq := norm2(query)
		var seq int64
		var vec sql.RawBytes // the driver's bytes, valid until Next: no copy
		dest := []any{&seq, &vec}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			if len(vec) == 4*len(query) {
				top.add(chatmem.VectorHit{Seq: seq, Similarity: cosineBytes(query, qq, vec)})
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return top.sorted(), nil
}

// checkVectors returns the error PutVectors gives for its arguments, or
// nil.
func checkVectors(model string, seqs []int64, vecs [][]float32) error {
	if model == "" {
		return fmt.Errorf("%w: vector model is empty", chatmem.ErrInvalid)
	}
	if len(seqs) != len(vecs) {
		return fmt.Errorf("%w: %d seqs for %d vectors", chatmem.ErrInvalid, len(seqs), len(vecs))
	}
	seen := make(map[int64]bool, len(seqs))
	for i, v := range vecs {
		switch seq := seqs[i]; {
		case seq < 1:
			return fmt.Errorf("%w: vector %d is for seq %d", chatmem.ErrInvalid, i, seq)
		case seen[seq]:
			return fmt.Errorf("%w: two vectors for seq %d", chatmem.ErrInvalid, seq)
		case len(v) == 0:
			return fmt.Errorf("%w: vector %d (seq %d) is empty", chatmem.ErrInvalid, i, seq)
		case len(v) != len(vecs[0]):
			return fmt.Errorf("%w: vector %d (seq %d) has %d dimensions, vector 0 has %d", chatmem.ErrInvalid, i, seq, len(v), len(vecs[0]))
		case !finite(v):
			return fmt.Errorf("%w: vector %d (seq %d) has a NaN or infinite component", chatmem.ErrInvalid, i, seq)
		}
		seen[seqs[i]] = true
	}
	return nil
}

// checkQuery returns the error NearestVectors gives for its arguments, or
// nil.
func checkQuery(model string, query []float32, span, limit int) error {
	switch {
	case model == "":
		return fmt.Errorf("%w: vector model is empty", chatmem.ErrInvalid)
	case len(query) == 0:
		return fmt.Errorf("%w: query vector is empty", chatmem.ErrInvalid)
	case !finite(query):
		return fmt.Errorf("%w: query vector has a NaN or infinite component", chatmem.ErrInvalid)
	case span < 1:
		return fmt.Errorf("%w: vector search span must be at least 1, not %d", chatmem.ErrInvalid, span)
	case limit < 1:
		return fmt.Errorf("%w: vector search limit must be at least 1, not %d", chatmem.ErrInvalid, limit)
	}
	return nil
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

// norm2 is the squared length of v.
func norm2(v []float32) float64 {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	return n
}

// cosineBytes is the cosine similarity of q (whose squared length is qq)
// and the vector b encodes (little-endian float32s, as many as q has),
// summed in float64 as the other stores do; 0 if either is zero.
func cosineBytes(q []float32, qq float64, b []byte) float32 {
	b = b[:4*len(q)]
	var dot, vv float64
	for i, y := range q {
		x := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		dot += float64(y) * x
		vv += x * x
	}
	if qq == 0 || vv == 0 {
		return 0
	}
	return float32(min(max(dot/math.Sqrt(qq*vv), -1), 1))
}

// nearest keeps the limit best hits it is given: a heap whose root is the
// worst of them, so a hit no better than the root costs one comparison.
type nearest struct {
	limit int
	hits  []chatmem.VectorHit
}

// better orders hits: the higher similarity, then the higher seq.
func better(a, b chatmem.VectorHit) bool {
	return a.Similarity > b.Similarity || a.Similarity == b.Similarity && a.Seq > b.Seq
}

func (n *nearest) add(h chatmem.VectorHit) {
	hs := n.hits
	if len(hs) < n.limit {
		hs = append(hs, h)
		for i := len(hs) - 1; i > 0; {
			p := (i - 1) / 2
			if !better(hs[p], hs[i]) {
				break
			}
			hs[p], hs[i] = hs[i], hs[p]
			i = p
		}
		n.hits = hs
		return
	}
	if !better(h, hs[0]) {
		return
	}
	hs[0] = h
	for i := 0; ; {
		w := 2*i + 1 // the worse child
		if w >= len(hs) {
			break
		}
		if r := w + 1; r < len(hs) && better(hs[w], hs[r]) {
			w = r
		}
		if !better(hs[i], hs[w]) {
			break
		}
		hs[i], hs[w] = hs[w], hs[i]
		i = w
	}
}

// sorted returns the hits kept, best first.
func (n *nearest) sorted() []chatmem.VectorHit {
	if n.hits == nil {
		return []chatmem.VectorHit{}
	}
	slices.SortFunc(n.hits, func(a, b chatmem.VectorHit) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	return n.hits
}

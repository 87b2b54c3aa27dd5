package chatmem

import "context"

// Embedder turns texts into vectors, for the optional embedding retriever
// that PolicyRecall fuses with its lexical ranking (Options.Embedder). An
// implementation calls a model (package openai has one for any
// OpenAI-compatible /v1/embeddings endpoint); it is safe for concurrent use
// and returns one vector per text, all of one dimension.
type Embedder interface {
	// Name identifies the model ("openai:text-embedding-3-small"); vectors
	// are stored and searched under it, so a store can hold two models'.
	Name() string
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// VectorHit is one message found by a vector search and its cosine
// similarity to the query.
type VectorHit struct {
	Seq        int64
	Similarity float32
}

// VectorStore keeps message vectors for the embedding retriever. Deleting
// the conversation deletes its vectors.
type VectorStore interface {
	// PutVectors stores vecs[i] as message seqs[i]'s vector under model,
	// replacing any stored one. The conversation must exist (ErrNotFound,
	// checked after the input); len(seqs) != len(vecs), an empty model, an
	// empty vector, vectors of different lengths, a NaN or infinite
	// component, a seq below 1 or the same seq twice wrap ErrInvalid, and
	// nothing is stored.
	PutVectors(ctx context.Context, key Key, model string, seqs []int64, vecs [][]float32) error

	// NearestVectors returns the limit messages, among those with
	// before-span <= Seq < before that have a vector under model, whose
	// vectors are most similar to query (cosine), best first, the newer
	// first among equals. span bounds the search, so its cost does not grow
	// with the history. Stored vectors of another length than query's are
	// skipped; a zero vector has similarity 0. An empty model, an empty or
	// NaN query, or span or limit below 1 wrap ErrInvalid; a missing
	// conversation is ErrNotFound; no hits is an empty, non-nil slice.
	NearestVectors(ctx context.Context, key Key, model string, query []float32, before int64, span, limit int) ([]VectorHit, error)
}

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
	// replacing any stored one. The conversation must exist (ErrNotFound);
	// mismatched lengths, an empty model or an empty vector wrap
	// ErrInvalid.
	PutVectors(ctx context.Context, key Key, model string, seqs []int64, vecs [][]float32) error

	// NearestVectors returns the limit messages, among those with
	// before-span <= Seq < before that have a vector under model, whose
	// vectors are most similar to query (cosine), best first. span bounds
	// the search, so its cost does not grow with the history; a missing
	// conversation is ErrNotFound.
	NearestVectors(ctx context.Context, key Key, model string, query []float32, before int64, span, limit int) ([]VectorHit, error)
}

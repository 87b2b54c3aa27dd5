package openai

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"

	sdk "github.com/openai/openai-go/v3"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/genai"
)

// DefaultEmbedBatch is the most texts one embeddings request carries when
// EmbedderOptions.BatchSize is zero.
const DefaultEmbedBatch = 256

// maxEmbedBatch is the most inputs the OpenAI API takes in one request.
const maxEmbedBatch = 2048

// EmbedderOptions configure an Embedder. Model is required, and so is
// APIKey when BaseURL is the default; the zero value of every other field
// means its default.
type EmbedderOptions struct {
	// BaseURL, APIKey, MaxRetries and HTTPClient are as in Options.
	BaseURL    string
	APIKey     string
	MaxRetries int
	HTTPClient *http.Client
	// Tracer is as in Options: each request is a span ("embeddings" and
	// the model).
	Tracer chatmem.Tracer
	// Model names the embedding model, e.g. "text-embedding-3-small".
	Model string
	// Dimensions, if above zero, is sent as "dimensions": the length the
	// model shortens its vectors to. Only text-embedding-3 and later
	// models accept it. Zero sends none: the model's own length.
	Dimensions int
	// BatchSize is the most texts one request carries; Embed splits longer
	// lists. Zero means DefaultEmbedBatch; the API takes at most 2048.
	BatchSize int
	// Base64 asks for the vectors as base64 of little-endian float32s
	// (encoding_format "base64"): about a quarter of the bytes of JSON
	// numbers, and exact. OpenAI, vLLM and llama.cpp's server accept it;
	// off by default, as some OpenAI-compatible servers do not.
	Base64 bool
}

// Embedder is a chatmem.Embedder that asks a model for vectors over the
// OpenAI embeddings API (POST /embeddings). It is safe for concurrent use.
type Embedder struct {
	svc  sdk.EmbeddingService
	opts EmbedderOptions
	name string
}

var _ chatmem.Embedder = (*Embedder)(nil)

// NewEmbedder returns an Embedder for opts. It makes no request. A missing
// model, a missing API key for the default base URL, negative Dimensions
// or a BatchSize outside 0..2048 wraps chatmem.ErrInvalid.
func NewEmbedder(opts EmbedderOptions) (*Embedder, error) {
	if opts.Dimensions < 0 {
		return nil, fmt.Errorf("%w: openai: dimensions %d is negative", chatmem.ErrInvalid, opts.Dimensions)
	}
	if opts.BatchSize < 0 || opts.BatchSize > maxEmbedBatch {
		return nil, fmt.Errorf("%w: openai: batch size %d is not in 0..%d", chatmem.ErrInvalid, opts.BatchSize, maxEmbedBatch)
	}
	if opts.BatchSize == 0 {
		opts.BatchSize = DefaultEmbedBatch
	}
	// newClient validates the connection settings and turns them into the
	// SDK's request options, which the embeddings service shares.
	c, err := newClient(Options{
		BaseURL: opts.BaseURL, APIKey: opts.APIKey, Model: opts.Model,
		MaxRetries: opts.MaxRetries, HTTPClient: opts.HTTPClient,
	})
	if err != nil {
		return nil, err
	}
	name := provider + ":" + opts.Model
	if opts.Dimensions > 0 {
		name += ":" + strconv.Itoa(opts.Dimensions)
	}
	return &Embedder{svc: sdk.NewEmbeddingService(c.chat.Options...), opts: opts, name: name}, nil
}

// Name returns "openai:" and the model, and ":" and Dimensions when set:
// "openai:text-embedding-3-small:256". Vectors of another length are
// another model's, and are stored apart.
func (e *Embedder) Name() string { return e.name }

// Embed returns one vector per text, in the order of texts, all of one
// length. It sends the texts in requests of at most BatchSize, one after
// another; an empty list makes no request. An empty text wraps
// chatmem.ErrInvalid before any request (the API refuses it). An answer
// that does not hold exactly one finite, non-empty vector per input, each
// of the same length (Dimensions when set), wraps chatmem.ErrUnavailable;
// request errors are classified as the package doc says.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	for i, t := range texts {
		if t == "" {
			return nil, fmt.Errorf("openai: embed: %w: text %d is empty", chatmem.ErrInvalid, i)
		}
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.opts.BatchSize {
		batch := texts[start:min(start+e.opts.BatchSize, len(texts))]
		vecs, err := e.embed(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("openai: embed texts %d..%d of %d: %w", start, start+len(batch)-1, len(texts), err)
		}
		if len(out) > 0 && len(vecs[0]) != len(out[0]) {
			return nil, fmt.Errorf("openai: embed texts %d..%d of %d: %w: vectors of %d dimensions after %d", start, start+len(batch)-1, len(texts), chatmem.ErrUnavailable, len(vecs[0]), len(out[0]))
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// embed sends one request and returns its vectors in input order: the API
// numbers each by its input's index, and the order of the list is not
// promised.
func (e *Embedder) embed(ctx context.Context, texts []string) (out [][]float32, err error) {
	ctx, call := genai.Start(ctx, e.opts.Tracer, genai.Request{
		Operation: genai.OpEmbeddings, Provider: genai.ProviderOpenAI, Model: e.opts.Model,
		ServerURL: e.opts.BaseURL, Purpose: "embedder",
	})
	var res *sdk.CreateEmbeddingResponse
	defer func() {
		r := genai.Response{}
		if res != nil {
			r.Model, r.InputTokens = res.Model, int(res.Usage.PromptTokens)
		}
		if len(out) > 0 {
			r.Dimensions = len(out[0])
		}
		call.End(r, err)
	}()
	p := sdk.EmbeddingNewParams{
		Model: e.opts.Model,
		Input: sdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
	}
	if e.opts.Dimensions > 0 {
		p.Dimensions = sdk.Int(int64(e.opts.Dimensions))
	}
	if e.opts.Base64 {
		p.EncodingFormat = sdk.EmbeddingNewParamsEncodingFormatBase64
	}
	res, err = e.svc.New(ctx, p, traceHeaders(ctx, e.opts.Tracer)...)
	if err != nil {
		return nil, classify(ctx, err)
	}
	chatmem.ReportUsage(ctx, chatmem.ModelUsage{Model: e.opts.Model, Tokens: chatmem.Tokens{EmbeddingInput: res.Usage.PromptTokens}})
	if len(res.Data) != len(texts) {
		return nil, fmt.Errorf("%w: %d embeddings for %d inputs", chatmem.ErrUnavailable, len(res.Data), len(texts))
	}
	out = make([][]float32, len(texts))
	dims := e.opts.Dimensions
	for _, d := range res.Data {
		i := d.Index
		switch {
		case i < 0 || i >= int64(len(texts)):
			return nil, fmt.Errorf("%w: embedding index %d is not in 0..%d", chatmem.ErrUnavailable, i, len(texts)-1)
		case out[i] != nil:
			return nil, fmt.Errorf("%w: two embeddings of index %d", chatmem.ErrUnavailable, i)
		case len(d.Embedding) == 0:
			return nil, fmt.Errorf("%w: embedding %d is empty", chatmem.ErrUnavailable, i)
		case dims == 0:
			dims = len(d.Embedding)
		}
		if len(d.Embedding) != dims {
			return nil, fmt.Errorf("%w: embedding %d has %d dimensions, want %d", chatmem.ErrUnavailable, i, len(d.Embedding), dims)
		}
		v := make([]float32, dims)
		for j, x := range d.Embedding {
			v[j] = float32(x)
			if math.IsNaN(x) || math.IsInf(float64(v[j]), 0) {
				return nil, fmt.Errorf("%w: embedding %d has a non-finite component %v", chatmem.ErrUnavailable, i, x)
			}
		}
		out[i] = v
	}
	return out, nil
}

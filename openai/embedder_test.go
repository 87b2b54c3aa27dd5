package openai

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// fakeEmbeddings is an httptest server that speaks the wire format of the
// OpenAI embeddings API, POST /v1/embeddings: it decodes the request body as
// the API defines it ({"model","input","dimensions","encoding_format"},
// input a string or an array of strings), checks the key and the JSON
// content type, and answers {"object":"list","data":[{"object":"embedding",
// "index":i,"embedding":[...]}],"model","usage"} with the vectors as JSON
// numbers, or as base64 of little-endian float32s when encoding_format is
// "base64", or with the API's error body and status. Like the real API it
// answers 401 to a wrong key, 404 to an unknown model, and 400 to an empty
// input, an empty string, more than 2048 inputs, or dimensions above the
// model's or for a model that cannot shorten (not text-embedding-3).
type fakeEmbeddings struct {
	*httptest.Server
	key string

	mu   sync.Mutex
	reqs []embedRequest
	// reply, if set, may change the n-th answer (from 1): reorder or spoil
	// its data, or answer with an error.
	reply func(n int, req embedRequest, data []embedDatum) embedReply
}

// embedRequest is the request body as the API defines it.
type embedRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat *string         `json:"encoding_format"`

	inputs []string // Input decoded
	raw    map[string]json.RawMessage
}

// embedDatum is one item of the answer's data, before encoding.
type embedDatum struct {
	Index     int
	Embedding []float32
}

type embedReply struct {
	data    []embedDatum
	status  int // not 0 or 200: errBody with this status
	errBody string
	hang    bool
}

// fakeModels are the models the fake knows, with the length of their
// vectors; only text-embedding-3 models take dimensions.
var fakeModels = map[string]int{"text-embedding-3-test": 12, "nomic-embed-text": 6}

func newFakeEmbeddings(t *testing.T) *fakeEmbeddings {
	t.Helper()
	f := &fakeEmbeddings{key: "sk-test"}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeEmbeddings) options() EmbedderOptions {
	return EmbedderOptions{BaseURL: f.URL + "/v1", APIKey: f.key, Model: "text-embedding-3-test", MaxRetries: -1}
}

func (f *fakeEmbeddings) embedder(t *testing.T, mod func(*EmbedderOptions)) *Embedder {
	t.Helper()
	opts := f.options()
	if mod != nil {
		mod(&opts)
	}
	e, err := NewEmbedder(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (f *fakeEmbeddings) requests() []embedRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// fakeVector is the fake model's vector for text: dims numbers in [-1, 1)
// drawn from its hash, each exact as a float32, so that JSON and base64
// carry them unchanged.
func fakeVector(text string, dims int) []float32 {
	h := fnv.New64a()
	io.WriteString(h, text)
	x := h.Sum64()
	v := make([]float32, dims)
	for i := range v {
		x = x*6364136223846793005 + 1442695040888963407
		v[i] = float32(int32(x>>40)) / (1 << 23) // in [-1, 1)
	}
	return v
}

func (f *fakeEmbeddings) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/embeddings" {
		writeError(w, http.StatusNotFound, apiError("Invalid URL ("+r.Method+" "+r.URL.Path+")", "invalid_request_error", ""))
		return
	}
	var req embedRequest
	body, _ := io.ReadAll(r.Body)
	parseErr := json.Unmarshal(body, &req)
	if parseErr == nil {
		parseErr = json.Unmarshal(body, &req.raw)
	}
	if parseErr == nil {
		var one string
		if json.Unmarshal(req.Input, &one) == nil {
			req.inputs = []string{one}
		} else {
			parseErr = json.Unmarshal(req.Input, &req.inputs)
		}
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	n := len(f.reqs)
	reply := f.reply
	f.mu.Unlock()

	if !admitted(w, r, f.key, parseErr) {
		return
	}
	native, ok := fakeModels[req.Model]
	if !ok {
		writeError(w, http.StatusNotFound, apiError("The model `"+req.Model+"` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"))
		return
	}
	if len(req.inputs) == 0 || len(req.inputs) > 2048 || slices.Contains(req.inputs, "") {
		writeError(w, http.StatusBadRequest, apiError("'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", "invalid_request_error", ""))
		return
	}
	dims := native
	if req.Dimensions != nil {
		if !strings.HasPrefix(req.Model, "text-embedding-3") {
			writeError(w, http.StatusBadRequest, apiError("This model does not support specifying dimensions.", "invalid_request_error", ""))
			return
		}
		if *req.Dimensions < 1 || *req.Dimensions > native {
			writeError(w, http.StatusBadRequest, apiError(fmt.Sprintf("Invalid value for 'dimensions' = %d.", *req.Dimensions), "invalid_request_error", ""))
			return
		}
		dims = *req.Dimensions
	}
	format := "float"
	if req.EncodingFormat != nil {
		format = *req.EncodingFormat
		if format != "float" && format != "base64" {
			writeError(w, http.StatusBadRequest, apiError("Invalid value for 'encoding_format'.", "invalid_request_error", ""))
			return
		}
	}
	rep := embedReply{}
	for i, text := range req.inputs {
		rep.data = append(rep.data, embedDatum{Index: i, Embedding: fakeVector(text, dims)})
	}
	if reply != nil {
		rep = reply(n, req, rep.data)
	}
	if rep.hang {
		<-r.Context().Done()
		return
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		writeError(w, rep.status, rep.errBody)
		return
	}
	data := make([]any, len(rep.data))
	for i, d := range rep.data {
		var vec any = d.Embedding
		if format == "base64" {
			b := make([]byte, 4*len(d.Embedding))
			for j, x := range d.Embedding {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			vec = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = map[string]any{"object": "embedding", "index": d.Index, "embedding": vec}
	}
	tokens := len(body) / 4
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data":   data,
		"model":  req.Model,
		"usage":  map[string]any{"prompt_tokens": tokens, "total_tokens": tokens},
	})
}

func TestEmbedRequestAndAnswer(t *testing.T) {
	f := newFakeEmbeddings(t)
	e := f.embedder(t, nil)
	texts := []string{"My order SE-10423 has not arrived.", "Where is it now?", "東京"}
	got, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(texts) {
		t.Fatalf("Embed(%d texts) = %d vectors", len(texts), len(got))
	}
	for i, text := range texts {
		if want := fakeVector(text, 12); !slices.Equal(got[i], want) {
			t.Errorf("vector %d = %v, want %v", i, got[i], want)
		}
	}
	if got, want := e.Name(), "openai:text-embedding-3-test"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	req := reqs[0]
	if req.Model != "text-embedding-3-test" || !slices.Equal(req.inputs, texts) {
		t.Errorf("request model %q, input %q; want text-embedding-3-test, %q", req.Model, req.inputs, texts)
	}
	if !strings.HasPrefix(strings.TrimSpace(string(req.Input)), "[") {
		t.Errorf("input = %s, want an array", req.Input)
	}
	// Without options, the request holds model and input only: the server's
	// defaults are float vectors of the model's own length.
	for field := range req.raw {
		if field != "model" && field != "input" {
			t.Errorf("request has %q = %s, want only model and input", field, req.raw[field])
		}
	}

	if got, err := e.Embed(context.Background(), nil); err != nil || len(got) != 0 {
		t.Errorf("Embed(nothing) = %v, %v; want no vectors, nil", got, err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("Embed(nothing) sent a request")
	}
}

func TestEmbedDimensionsAndBase64(t *testing.T) {
	f := newFakeEmbeddings(t)
	for _, b64 := range []bool{false, true} {
		e := f.embedder(t, func(o *EmbedderOptions) { o.Dimensions = 5; o.Base64 = b64 })
		if got, want := e.Name(), "openai:text-embedding-3-test:5"; got != want {
			t.Errorf("Name = %q, want %q", got, want)
		}
		got, err := e.Embed(context.Background(), []string{"a", "b"})
		if err != nil {
			t.Fatalf("base64 %v: %v", b64, err)
		}
		for i, text := range []string{"a", "b"} {
			if want := fakeVector(text, 5); !slices.Equal(got[i], want) {
				t.Errorf("base64 %v: vector %d = %v, want %v", b64, i, got[i], want)
			}
		}
		reqs := f.requests()
		req := reqs[len(reqs)-1]
		if req.Dimensions == nil || *req.Dimensions != 5 {
			t.Errorf("dimensions = %v, want 5", req.Dimensions)
		}
		switch {
		case b64 && (req.EncodingFormat == nil || *req.EncodingFormat != "base64"):
			t.Errorf("Base64: encoding_format = %v, want base64", req.EncodingFormat)
		case !b64 && req.EncodingFormat != nil:
			t.Errorf("encoding_format = %q, want none", *req.EncodingFormat)
		}
	}

	// A server refusing dimensions (not a text-embedding-3 model) is the
	// caller's mistake.
	e := f.embedder(t, func(o *EmbedderOptions) { o.Model = "nomic-embed-text"; o.Dimensions = 4 })
	if _, err := e.Embed(context.Background(), []string{"a"}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("dimensions for nomic-embed-text: error = %v, want ErrInvalid", err)
	}
}

// Texts go in batches of BatchSize, in order, and the vectors come back in
// the order of the texts.
func TestEmbedBatches(t *testing.T) {
	for _, tc := range []struct {
		batch, texts int
		want         []int // inputs per request
	}{
		{0, 600, []int{256, 256, 88}},
		{2, 5, []int{2, 2, 1}},
		{3, 3, []int{3}},
		{2048, 2049, []int{2048, 1}},
	} {
		t.Run(fmt.Sprintf("batch=%d,texts=%d", tc.batch, tc.texts), func(t *testing.T) {
			f := newFakeEmbeddings(t)
			e := f.embedder(t, func(o *EmbedderOptions) { o.BatchSize = tc.batch })
			texts := make([]string, tc.texts)
			for i := range texts {
				texts[i] = fmt.Sprintf("message %d", i)
			}
			got, err := e.Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			for i, text := range texts {
				if !slices.Equal(got[i], fakeVector(text, 12)) {
					t.Fatalf("vector %d is not text %d's", i, i)
				}
			}
			var sizes []int
			next := 0
			for _, r := range f.requests() {
				sizes = append(sizes, len(r.inputs))
				if !slices.Equal(r.inputs, texts[next:next+len(r.inputs)]) {
					t.Errorf("request %d holds texts out of order", len(sizes))
				}
				next += len(r.inputs)
			}
			if !slices.Equal(sizes, tc.want) {
				t.Errorf("inputs per request = %v, want %v", sizes, tc.want)
			}
		})
	}
}

// The API numbers each embedding by its input; the list's order is not
// promised, so the index decides.
func TestEmbedOrderByIndex(t *testing.T) {
	f := newFakeEmbeddings(t)
	f.reply = func(_ int, _ embedRequest, data []embedDatum) embedReply {
		slices.Reverse(data)
		return embedReply{data: data}
	}
	texts := []string{"one", "two", "three", "four"}
	got, err := f.embedder(t, nil).Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		if !slices.Equal(got[i], fakeVector(text, 12)) {
			t.Errorf("vector %d is not %q's", i, text)
		}
	}
}

// An answer that does not give one usable vector per input is
// ErrUnavailable, whatever it holds.
func TestEmbedUnusableAnswers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(data []embedDatum) []embedDatum
	}{
		{"one missing", func(d []embedDatum) []embedDatum { return d[:len(d)-1] }},
		{"one too many", func(d []embedDatum) []embedDatum { return append(d, embedDatum{Index: 3, Embedding: d[0].Embedding}) }},
		{"index twice", func(d []embedDatum) []embedDatum { d[1].Index = 0; return d }},
		{"index out of range", func(d []embedDatum) []embedDatum { d[2].Index = 3; return d }},
		{"negative index", func(d []embedDatum) []embedDatum { d[0].Index = -1; return d }},
		{"empty vector", func(d []embedDatum) []embedDatum { d[1].Embedding = []float32{}; return d }},
		{"lengths differ", func(d []embedDatum) []embedDatum { d[2].Embedding = d[2].Embedding[:5]; return d }},
		{"none", func([]embedDatum) []embedDatum { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEmbeddings(t)
			f.reply = func(_ int, _ embedRequest, data []embedDatum) embedReply { return embedReply{data: tc.spoil(data)} }
			got, err := f.embedder(t, nil).Embed(context.Background(), []string{"a", "b", "c"})
			if !errors.Is(err, chatmem.ErrUnavailable) {
				t.Errorf("Embed = %v, %v; want ErrUnavailable", got, err)
			}
		})
	}

	// Two batches answering vectors of different lengths.
	f := newFakeEmbeddings(t)
	f.reply = func(n int, _ embedRequest, data []embedDatum) embedReply {
		if n == 2 {
			data[0].Embedding = data[0].Embedding[:4]
		}
		return embedReply{data: data}
	}
	e := f.embedder(t, func(o *EmbedderOptions) { o.BatchSize = 1 })
	if _, err := e.Embed(context.Background(), []string{"a", "b"}); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("batches of 12 and 4 dimensions: error = %v, want ErrUnavailable", err)
	}
	// With Dimensions set, a vector of another length (a server that
	// ignores the field) is refused too.
	f.reply = func(_ int, req embedRequest, data []embedDatum) embedReply {
		for i := range data {
			data[i].Embedding = fakeVector(req.inputs[i], 12)
		}
		return embedReply{data: data}
	}
	e = f.embedder(t, func(o *EmbedderOptions) { o.Dimensions = 5 })
	if _, err := e.Embed(context.Background(), []string{"a"}); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("12 dimensions for Dimensions 5: error = %v, want ErrUnavailable", err)
	}
}

func TestEmbedErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   error
	}{
		{"429 rate limit", http.StatusTooManyRequests, apiError("Rate limit reached for text-embedding-3-test.", "requests", "rate_limit_exceeded"), chatmem.ErrUnavailable},
		{"500 server error", http.StatusInternalServerError, apiError("The server had an error while processing your request.", "server_error", ""), chatmem.ErrUnavailable},
		{"502 from a proxy, not JSON", http.StatusBadGateway, "<html><body>502 Bad Gateway</body></html>", chatmem.ErrUnavailable},
		{"400 too many tokens", http.StatusBadRequest, apiError("This model's maximum context length is 8192 tokens, however you requested 9000 tokens.", "invalid_request_error", ""), chatmem.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEmbeddings(t)
			f.reply = func(int, embedRequest, []embedDatum) embedReply {
				return embedReply{status: tc.status, errBody: tc.body}
			}
			_, err := f.embedder(t, nil).Embed(context.Background(), []string{"a"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests with retries off, want 1", n)
			}
		})
	}

	f := newFakeEmbeddings(t)
	for what, mod := range map[string]func(*EmbedderOptions){
		"401 bad key":       func(o *EmbedderOptions) { o.APIKey = "sk-wrong" },
		"404 unknown model": func(o *EmbedderOptions) { o.Model = "text-embedding-9" },
	} {
		if _, err := f.embedder(t, mod).Embed(context.Background(), []string{"a"}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: error = %v, want ErrInvalid", what, err)
		}
	}

	// An empty text is refused before any request, as the API would.
	n := len(f.requests())
	if _, err := f.embedder(t, nil).Embed(context.Background(), []string{"a", ""}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("empty text: error = %v, want ErrInvalid", err)
	}
	if len(f.requests()) != n {
		t.Error("an empty text was sent")
	}
}

func TestEmbedTimeoutCancelAndNetwork(t *testing.T) {
	f := newFakeEmbeddings(t)
	f.reply = func(int, embedRequest, []embedDatum) embedReply { return embedReply{hang: true} }
	e := f.embedder(t, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := e.Embed(ctx, []string{"a"})
	if !errors.Is(err, chatmem.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after the deadline: error = %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	_, err = e.Embed(ctx, []string{"a"})
	if !errors.Is(err, context.Canceled) || errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("after cancel: error = %v, want context.Canceled only", err)
	}

	f.Close()
	if _, err := e.Embed(context.Background(), []string{"a"}); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("with the server gone: error = %v, want ErrUnavailable", err)
	}
}

func TestNewEmbedderValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts EmbedderOptions
	}{
		{"no model", EmbedderOptions{BaseURL: "http://localhost:11434/v1"}},
		{"no key for OpenAI", EmbedderOptions{Model: "text-embedding-3-small"}},
		{"negative dimensions", EmbedderOptions{BaseURL: "http://localhost:11434/v1", Model: "m", Dimensions: -1}},
		{"negative batch", EmbedderOptions{BaseURL: "http://localhost:11434/v1", Model: "m", BatchSize: -1}},
		{"batch over 2048", EmbedderOptions{BaseURL: "http://localhost:11434/v1", Model: "m", BatchSize: 2049}},
	} {
		if _, err := NewEmbedder(tc.opts); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: NewEmbedder error = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := NewEmbedder(EmbedderOptions{APIKey: "sk-x", Model: "text-embedding-3-small"}); err != nil {
		t.Errorf("OpenAI with a key: %v", err)
	}
}

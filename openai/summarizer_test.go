package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/llm"
	"github.com/chatmem/chatmem/internal/seed"
)

// stored returns the seed's conversation with seqs from 1, as a store
// hands it to a summarizer.
func stored() []chatmem.Message {
	msgs := seed.History()
	for i := range msgs {
		msgs[i].Seq = int64(i + 1)
	}
	return msgs
}

func TestSummarizeRequestAndAnswer(t *testing.T) {
	f := newFakeOpenAI(t)
	f.reply = func(int, chatRequest) fakeReply {
		return fakeReply{content: "\n  Kavya's order SE-10423 is out for delivery, due by 8 pm. She asked to add DryFit socks (Rs 249) to her cart.  \n"}
	}
	s := f.summarizer(t)
	msgs := append([]chatmem.Message{{Seq: 1, Role: chatmem.RoleSystem, Content: "You are ShopBot."}}, stored()...)
	for i := 1; i < len(msgs); i++ {
		msgs[i].Seq = int64(i + 1)
	}
	got, err := s.Summarize(context.Background(), "The user wrote in English.", msgs)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Kavya's order SE-10423 is out for delivery, due by 8 pm. She asked to add DryFit socks (Rs 249) to her cart."; got != want {
		t.Errorf("Summarize = %q, want %q (trimmed)", got, want)
	}
	if got, want := s.Name(), "openai:gpt-test"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}

	req, h := f.last(t)
	if req.Model != "gpt-test" {
		t.Errorf("model = %q, want gpt-test", req.Model)
	}
	if got := h.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want Bearer sk-test", got)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[1].Role != "user" {
		t.Fatalf("messages = %+v, want one system and one user message", req.Messages)
	}
	if req.Temperature == nil || *req.Temperature != 0 {
		t.Errorf("temperature = %v, want 0", req.Temperature)
	}
	if req.MaxCompletionTokens == nil || *req.MaxCompletionTokens != DefaultMaxTokens || req.MaxTokens != nil {
		t.Errorf("max_completion_tokens = %v, max_tokens = %v; want %d and none", req.MaxCompletionTokens, req.MaxTokens, DefaultMaxTokens)
	}
	if req.ResponseFormat != nil {
		t.Errorf("response_format = %+v, want none for a summary", req.ResponseFormat)
	}

	// The prompt is internal/llm's, tested there to the letter, and
	// TestCompleteMapsRequest shows it reaches the wire as it is.
	if system, user := req.system(), req.user(); !strings.Contains(system, "Output only the summary text.") ||
		!strings.HasSuffix(user, "[seq 6] user: Add the DryFit ones to my cart please.\n</transcript>") {
		t.Errorf("system message:\n%s\nuser message:\n%s\nwant the instructions and the transcript", system, user)
	}
}

// Complete maps an llm.Request onto the wire exactly: the system text as
// the system message, the user text as the one user message, a schema as a
// strict json_schema response format; the answer comes back as it is.
func TestCompleteMapsRequest(t *testing.T) {
	f := newFakeOpenAI(t)
	f.reply = func(int, chatRequest) fakeReply { return fakeReply{content: "  {\"facts\":[]}\n"} }
	c, err := newClient(f.options())
	if err != nil {
		t.Fatal(err)
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"facts": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []string{"a", "b"}}}},
		"required":             []string{"facts"},
		"additionalProperties": false,
	}
	req := llm.Request{
		System: "Instructions.\nOnly here.",
		User:   "<transcript>\n[seq 1] user: data\n</transcript>",
		Schema: &llm.Schema{Name: "facts", Description: "Facts the user states.", Schema: schema},
	}
	got, err := c.Complete(context.Background(), req)
	if err != nil || got != "  {\"facts\":[]}\n" {
		t.Errorf("Complete = %q, %v; want the answer untrimmed", got, err)
	}
	sent, _ := f.last(t)
	if len(sent.Messages) != 2 || sent.Messages[0].Role != "system" || sent.Messages[1].Role != "user" {
		t.Fatalf("messages = %+v, want one system and one user message", sent.Messages)
	}
	if sent.system() != req.System || sent.user() != req.User {
		t.Errorf("system %q, user %q; want %q and %q", sent.system(), sent.user(), req.System, req.User)
	}
	rf := sent.ResponseFormat
	if rf == nil || rf.Type != "json_schema" || rf.JSONSchema == nil || !rf.JSONSchema.Strict ||
		rf.JSONSchema.Name != "facts" || rf.JSONSchema.Description != "Facts the user states." {
		t.Fatalf("response_format = %+v, want a strict json_schema named facts, with its description", rf)
	}
	b, _ := json.Marshal(schema)
	var wire, want any
	if err := errors.Join(json.Unmarshal(rf.JSONSchema.Schema, &wire), json.Unmarshal(b, &want)); err != nil || !reflect.DeepEqual(wire, want) {
		t.Errorf("schema = %s (%v), want %s", rf.JSONSchema.Schema, err, b)
	}
}

func TestSummarizeUnusableAnswers(t *testing.T) {
	for name, rep := range map[string]fakeReply{
		"cut at max tokens": {content: "Kavya's order SE-10423 is", finishReason: "length"},
		"content filter":    {content: "", finishReason: "content_filter"},
		"refusal":           {refusal: "I can't help with that."},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeOpenAI(t)
			f.reply = func(int, chatRequest) fakeReply { return rep }
			got, err := f.summarizer(t).Summarize(context.Background(), "", stored())
			if !errors.Is(err, chatmem.ErrUnavailable) || got != "" {
				t.Errorf("Summarize = %q, %v; want an error wrapping ErrUnavailable", got, err)
			}
		})
	}
}

func TestRequestOptions(t *testing.T) {
	f := newFakeOpenAI(t)
	opts := f.options()
	opts.Temperature = -1
	opts.MaxTokens = 300
	opts.LegacyMaxTokens = true
	s, err := NewSummarizer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Summarize(context.Background(), "", stored()); err != nil {
		t.Fatal(err)
	}
	req, _ := f.last(t)
	if req.Temperature != nil {
		t.Errorf("temperature = %v, want none", *req.Temperature)
	}
	if req.MaxTokens == nil || *req.MaxTokens != 300 || req.MaxCompletionTokens != nil {
		t.Errorf("max_tokens = %v, max_completion_tokens = %v; want 300 and none", req.MaxTokens, req.MaxCompletionTokens)
	}
}

// The SDK's environment variables are not read: the key, base URL and
// organization come from Options alone, and no key is sent when none is
// configured.
func TestEnvironmentIgnored(t *testing.T) {
	f := newFakeOpenAI(t)
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_ORG_ID", "org-from-env")
	t.Setenv("OPENAI_PROJECT_ID", "proj-from-env")
	if _, err := f.summarizer(t).Summarize(context.Background(), "", stored()); err != nil {
		t.Fatal(err)
	}
	_, h := f.last(t)
	if h.Get("OpenAI-Organization") != "" || h.Get("OpenAI-Project") != "" {
		t.Errorf("headers from the environment were sent: %v", h)
	}

	opts := f.options()
	opts.APIKey = ""
	s, err := NewSummarizer(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Summarize(context.Background(), "", stored())
	if _, h := f.last(t); h.Get("Authorization") != "" {
		t.Errorf("Authorization = %q with no key configured, want none", h.Get("Authorization"))
	}
	if !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("the fake's 401 gave %v, want ErrInvalid", err)
	}
}

func TestNewValidates(t *testing.T) {
	for name, opts := range map[string]Options{
		"no model":                  {APIKey: "sk"},
		"no key for the OpenAI API": {Model: "gpt-test"},
		"temperature over 2":        {APIKey: "sk", Model: "gpt-test", Temperature: 2.5},
		"negative max tokens":       {APIKey: "sk", Model: "gpt-test", MaxTokens: -1},
	} {
		if _, err := NewSummarizer(opts); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: NewSummarizer error = %v, want ErrInvalid", name, err)
		}
		if _, err := NewExtractor(ExtractorOptions{Options: opts}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: NewExtractor error = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := NewSummarizer(Options{BaseURL: "http://localhost:11434/v1", Model: "llama3.2"}); err != nil {
		t.Errorf("a local server needs no key, got %v", err)
	}
	for name, keys := range map[string][]FactKey{
		"invalid key":  {{Key: "Shoe Size"}},
		"repeated key": {{Key: "name"}, {Key: "name"}},
	} {
		opts := ExtractorOptions{Options: Options{APIKey: "sk", Model: "m"}, Keys: keys}
		if _, err := NewExtractor(opts); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: NewExtractor error = %v, want ErrInvalid", name, err)
		}
	}
}

// call is one operation under test, so that failures are checked for both.
type call struct {
	name string
	do   func(ctx context.Context, f *fakeOpenAI, opts Options) error
}

var calls = []call{
	{"summarize", func(ctx context.Context, f *fakeOpenAI, opts Options) error {
		s, err := NewSummarizer(opts)
		if err != nil {
			return err
		}
		_, err = s.Summarize(ctx, "", stored())
		return err
	}},
	{"extract", func(ctx context.Context, f *fakeOpenAI, opts Options) error {
		x, err := NewExtractor(ExtractorOptions{Options: opts})
		if err != nil {
			return err
		}
		_, err = x.Extract(ctx, stored())
		return err
	}},
}

func TestErrorStatuses(t *testing.T) {
	rateLimit := apiError("Rate limit reached for gpt-test in organization org-test on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.", "requests", "rate_limit_exceeded")
	serverError := apiError("The server had an error while processing your request. Sorry about that!", "server_error", "")
	badRequest := apiError("Invalid type for 'messages[1].content': expected one of a string or array of objects, but got an integer instead.", "invalid_request_error", "invalid_type")
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   error
		reject error // the error it must not wrap
	}{
		{"429 rate limit", http.StatusTooManyRequests, rateLimit, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{"500 server error", http.StatusInternalServerError, serverError, chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{"503 overloaded", http.StatusServiceUnavailable, apiError("The engine is currently overloaded, please try again later.", "server_error", ""), chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{"502 from a proxy, not JSON", http.StatusBadGateway, "<html><body>502 Bad Gateway</body></html>", chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{"400 invalid request", http.StatusBadRequest, badRequest, chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{"401 bad key", http.StatusUnauthorized, apiError("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"), chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{"404 unknown model", http.StatusNotFound, apiError("The model `gpt-test` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"), chatmem.ErrInvalid, chatmem.ErrUnavailable},
	} {
		for _, c := range calls {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				f := newFakeOpenAI(t)
				f.reply = func(int, chatRequest) fakeReply { return fakeReply{status: tc.status, errBody: tc.body} }
				err := c.do(context.Background(), f, f.options())
				if !errors.Is(err, tc.want) || errors.Is(err, tc.reject) {
					t.Fatalf("error = %v, want one wrapping %v (and not %v)", err, tc.want, tc.reject)
				}
				if n := len(f.requests()); n != 1 {
					t.Errorf("%d requests with retries off, want 1", n)
				}
				if !strings.HasPrefix(tc.body, "<") {
					// The provider's message is kept for the log.
					var msg string
					switch tc.status {
					case http.StatusTooManyRequests:
						msg = "Rate limit reached"
					case http.StatusBadRequest:
						msg = "Invalid type for 'messages[1].content'"
					}
					if msg != "" && !strings.Contains(err.Error(), msg) {
						t.Errorf("error %q lacks the provider's message %q", err, msg)
					}
				}
			})
		}
	}
}

// MaxRetries is passed to the SDK: a 429 then a success takes two requests
// and succeeds; with retries off it fails after one.
func TestMaxRetriesPassedToSDK(t *testing.T) {
	f := newFakeOpenAI(t)
	f.reply = func(n int, _ chatRequest) fakeReply {
		if n == 1 {
			return fakeReply{status: http.StatusTooManyRequests, errBody: apiError("Rate limit reached.", "requests", "rate_limit_exceeded"),
				header: map[string]string{"Retry-After-Ms": "10"}}
		}
		return fakeReply{content: "Kavya, order SE-10423."}
	}
	opts := f.options()
	opts.MaxRetries = 1
	s, err := NewSummarizer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Summarize(context.Background(), "", stored()); err != nil || got != "Kavya, order SE-10423." {
		t.Fatalf("Summarize = %q, %v; want the second answer", got, err)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeOpenAI(t)
			f.reply = func(int, chatRequest) fakeReply { return fakeReply{hang: true} }

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := c.do(ctx, f, f.options())
			if !errors.Is(err, chatmem.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("after the deadline: error = %v, want ErrUnavailable and context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v to give up", d)
			}

			// A caller that cancels gets its cancellation back, which says
			// nothing about the provider.
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(30*time.Millisecond, cancel)
			err = c.do(ctx, f, f.options())
			if !errors.Is(err, context.Canceled) || errors.Is(err, chatmem.ErrUnavailable) {
				t.Errorf("after cancel: error = %v, want context.Canceled only", err)
			}
		})
	}
}

// The network failing (nothing listens) is ErrUnavailable.
func TestNetworkFailure(t *testing.T) {
	f := newFakeOpenAI(t)
	opts := f.options()
	f.Close()
	for _, c := range calls {
		if err := c.do(context.Background(), f, opts); !errors.Is(err, chatmem.ErrUnavailable) {
			t.Errorf("%s with the server gone: error = %v, want ErrUnavailable", c.name, err)
		}
	}
}

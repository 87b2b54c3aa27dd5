package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/genai"
	"github.com/chatmem/chatmem/internal/llm"
)

// DefaultBaseURL is the API address a zero Options.BaseURL stands for.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultMaxTokens is the answer cap a zero Options.MaxTokens stands for. It
// leaves room for the reasoning tokens that reasoning models count in it.
const DefaultMaxTokens = 4096

// Options configure a Summarizer or an Extractor. Model is required, and so
// is APIKey when BaseURL is the default; the zero value of every other field
// means its default.
type Options struct {
	// BaseURL is the API's address up to and including the version, e.g.
	// "http://localhost:8000/v1" for vLLM or "http://localhost:11434/v1" for
	// Ollama. Empty means DefaultBaseURL.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer KEY". Empty sends no
	// Authorization header, for local servers that need none.
	APIKey string
	// Model names the model, e.g. "gpt-4o-mini".
	Model string
	// Temperature is the sampling temperature. Zero sends 0, for answers
	// as repeatable as the server allows; a negative value sends none, for
	// models that accept only their default (reasoning models).
	Temperature float64
	// MaxTokens caps the answer, sent as max_completion_tokens. Zero means
	// DefaultMaxTokens.
	MaxTokens int
	// LegacyMaxTokens sends the cap as max_tokens instead, for servers that
	// know only the older field.
	LegacyMaxTokens bool
	// MaxRetries is how often the SDK retries a request that failed with a
	// network error, 408, 409, 429 or 5xx, with backoff. Zero means the
	// SDK's default (2); negative means no retries.
	MaxRetries int
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Tracer, if set, traces each request as a span that follows the
	// OpenTelemetry GenAI conventions, and sends its trace context
	// (traceparent) with it. Nil traces nothing.
	Tracer chatmem.Tracer
}

// provider names the package in Name and in errors.
const provider = "openai"

// client is the llm.Completer that Summarizer and Extractor share: the
// SDK's chat completion service and the request settings.
type client struct {
	chat sdk.ChatCompletionService
	opts Options
	// purpose is what the calls are for, on their spans: "summarizer",
	// "extractor".
	purpose string
}

var _ llm.Completer = (*client)(nil)

func newClient(opts Options) (*client, error) {
	if opts.Model == "" {
		return nil, fmt.Errorf("%w: openai: a model is required", chatmem.ErrInvalid)
	}
	if opts.BaseURL == "" {
		if opts.APIKey == "" {
			return nil, fmt.Errorf("%w: openai: an API key is required for %s", chatmem.ErrInvalid, DefaultBaseURL)
		}
		opts.BaseURL = DefaultBaseURL
	}
	if opts.Temperature > 2 {
		return nil, fmt.Errorf("%w: openai: temperature %v is over 2", chatmem.ErrInvalid, opts.Temperature)
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("%w: openai: max tokens %d is negative", chatmem.ErrInvalid, opts.MaxTokens)
	}
	if opts.MaxTokens == 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	reqOpts := []option.RequestOption{option.WithBaseURL(opts.BaseURL)}
	if opts.APIKey != "" {
		reqOpts = append(reqOpts, option.WithAPIKey(opts.APIKey))
	}
	switch {
	case opts.MaxRetries < 0:
		reqOpts = append(reqOpts, option.WithMaxRetries(0))
	case opts.MaxRetries > 0:
		reqOpts = append(reqOpts, option.WithMaxRetries(opts.MaxRetries))
	}
	if opts.HTTPClient != nil {
		reqOpts = append(reqOpts, option.WithHTTPClient(opts.HTTPClient))
	}
	// The service, unlike sdk.NewClient, reads nothing from the
	// environment: configuration comes from opts alone.
	return &client{chat: sdk.NewChatCompletionService(reqOpts...), opts: opts}, nil
}

// Name returns "openai:" and the model.
func (c *client) Name() string { return provider + ":" + c.opts.Model }

// params returns the request for req: the instructions in the system
// message, the data in the user message, and req.Schema, if any, as a
// strict json_schema response format.
func (c *client) params(req llm.Request) sdk.ChatCompletionNewParams {
	p := sdk.ChatCompletionNewParams{
		Model: c.opts.Model,
		Messages: []sdk.ChatCompletionMessageParamUnion{
			sdk.SystemMessage(req.System),
			sdk.UserMessage(req.User),
		},
	}
	if c.opts.Temperature >= 0 {
		p.Temperature = sdk.Float(c.opts.Temperature)
	}
	if c.opts.LegacyMaxTokens {
		p.MaxTokens = sdk.Int(int64(c.opts.MaxTokens))
	} else {
		p.MaxCompletionTokens = sdk.Int(int64(c.opts.MaxTokens))
	}
	if req.Schema != nil {
		p.ResponseFormat = sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name:        req.Schema.Name,
				Description: sdk.String(req.Schema.Description),
				Strict:      sdk.Bool(true),
				Schema:      req.Schema.Schema,
			},
		}}
	}
	return p
}

// Complete sends req and returns the first choice's text. An answer that
// was cut, filtered or refused is an error, whatever text it holds.
func (c *client) Complete(ctx context.Context, req llm.Request) (text string, err error) {
	ctx, call := genai.Start(ctx, c.opts.Tracer, genai.Request{
		Operation: genai.OpChat, Provider: genai.ProviderOpenAI, Model: c.opts.Model,
		MaxTokens: c.opts.MaxTokens, Temperature: c.opts.Temperature, ServerURL: c.opts.BaseURL, Purpose: c.purpose,
	})
	var res *sdk.ChatCompletion
	defer func() { call.End(chatResponse(res), err) }()
	res, err = c.chat.New(ctx, c.params(req), traceHeaders(ctx, c.opts.Tracer)...)
	if err != nil {
		return "", classify(ctx, err)
	}
	u := res.Usage
	chatmem.ReportUsage(ctx, chatmem.ModelUsage{Model: c.opts.Model, Tokens: chatmem.Tokens{
		Input: u.PromptTokens, CachedInput: min(u.PromptTokensDetails.CachedTokens, u.PromptTokens),
		Output: u.CompletionTokens, Reasoning: min(u.CompletionTokensDetails.ReasoningTokens, u.CompletionTokens),
	}})
	if len(res.Choices) == 0 {
		return "", fmt.Errorf("%w: the answer has no choices", chatmem.ErrUnavailable)
	}
	choice := res.Choices[0]
	if r := strings.TrimSpace(choice.Message.Refusal); r != "" {
		return "", fmt.Errorf("%w: the model refused: %s", chatmem.ErrUnavailable, r)
	}
	switch choice.FinishReason {
	case "length":
		return "", fmt.Errorf("%w: the answer was cut at %d tokens; raise MaxTokens", chatmem.ErrUnavailable, c.opts.MaxTokens)
	case "content_filter":
		return "", fmt.Errorf("%w: the answer was withheld by the content filter", chatmem.ErrUnavailable)
	}
	return choice.Message.Content, nil
}

// chatResponse is what a traced call reports of res (nil: no answer).
func chatResponse(res *sdk.ChatCompletion) genai.Response {
	if res == nil {
		return genai.Response{}
	}
	r := genai.Response{
		ID: res.ID, Model: res.Model,
		InputTokens: int(res.Usage.PromptTokens), OutputTokens: int(res.Usage.CompletionTokens),
		CachedInputTokens: int(res.Usage.PromptTokensDetails.CachedTokens),
	}
	for _, ch := range res.Choices {
		r.FinishReasons = append(r.FinishReasons, string(ch.FinishReason))
	}
	return r
}

// traceHeaders are the request options that send ctx's trace context with
// a request; none without a tracer.
func traceHeaders(ctx context.Context, t chatmem.Tracer) []option.RequestOption {
	var opts []option.RequestOption
	genai.Inject(ctx, t, func(k, v string) { opts = append(opts, option.WithHeader(k, v)) })
	return opts
}

// classify wraps an SDK error in the chatmem sentinel it stands for.
func classify(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return llm.RequestError(ctx, err)
	}
	code := apiErr.StatusCode
	detail := fmt.Sprintf("%d %s", code, http.StatusText(code))
	if apiErr.Type != "" {
		detail += " " + apiErr.Type
	}
	if apiErr.Code != "" && apiErr.Code != apiErr.Type {
		detail += " (" + apiErr.Code + ")"
	}
	if apiErr.Message != "" {
		detail += ": " + apiErr.Message
	}
	return llm.StatusError(code, detail)
}

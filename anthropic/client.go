package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/genai"
	"github.com/chatmem/chatmem/internal/llm"
)

// DefaultBaseURL is the API address a zero Options.BaseURL stands for.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is the answer cap a zero Options.MaxTokens stands for.
// It leaves room for thinking, which some models do by default and which
// counts in the cap.
const DefaultMaxTokens = 4096

// Options configure a Summarizer or an Extractor. Model is required, and so
// is APIKey when BaseURL is the default; the zero value of every other field
// means its default.
//
// There is no temperature: the Messages API version the SDK sends
// (anthropic-version 2026-10-21) no longer accepts one.
type Options struct {
	// BaseURL is the API's address, without the "/v1"; empty means
	// DefaultBaseURL.
	BaseURL string
	// APIKey is sent in the x-api-key header. Empty sends none, for a
	// gateway that adds its own.
	APIKey string
	// Model names the model, e.g. "claude-haiku-4-5".
	Model string
	// MaxTokens caps the answer (max_tokens). Zero means DefaultMaxTokens.
	// A cap so large that the SDK would require streaming is refused.
	MaxTokens int
	// MaxRetries is how often the SDK retries a request that failed with a
	// network error, 408, 409, 429 or 5xx (529 overloaded included), with
	// backoff. Zero means the SDK's default (2); negative means no retries.
	MaxRetries int
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Tracer, if set, traces each request as a span that follows the
	// OpenTelemetry GenAI conventions, and sends its trace context
	// (traceparent) with it. Nil traces nothing.
	Tracer chatmem.Tracer
}

// provider names the package in Name and in errors.
const provider = "anthropic"

// client is the llm.Completer that Summarizer and Extractor share: the
// SDK's message service and the request settings.
type client struct {
	messages sdk.MessageService
	opts     Options
	// purpose is what the calls are for, on their spans: "summarizer",
	// "extractor".
	purpose string
}

var _ llm.Completer = (*client)(nil)

func newClient(opts Options) (*client, error) {
	if opts.Model == "" {
		return nil, fmt.Errorf("%w: anthropic: a model is required", chatmem.ErrInvalid)
	}
	if opts.BaseURL == "" && opts.APIKey == "" {
		return nil, fmt.Errorf("%w: anthropic: an API key is required for %s", chatmem.ErrInvalid, DefaultBaseURL)
	}
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("%w: anthropic: max tokens %d is negative", chatmem.ErrInvalid, opts.MaxTokens)
	}
	if opts.MaxTokens == 0 {
		opts.MaxTokens = DefaultMaxTokens
	}
	// The SDK refuses, at each call, a non-streaming request whose max_tokens
	// could take over 10 minutes; ask it now, so the mistake shows at setup.
	if _, err := sdk.CalculateNonStreamingTimeout(opts.MaxTokens, sdk.Model(opts.Model), nil); err != nil {
		return nil, fmt.Errorf("%w: anthropic: max tokens %d: %v", chatmem.ErrInvalid, opts.MaxTokens, err)
	}
	reqOpts := []option.RequestOption{
		// Configuration comes from opts alone: no ANTHROPIC_API_KEY,
		// ANTHROPIC_BASE_URL or profile from the environment.
		option.WithoutEnvironmentDefaults(),
		// option.WithAPIKey sends the key as a bearer token in this SDK
		// version; the Messages API documents the x-api-key header.
		option.WithHeaderDel("Authorization"),
	}
	if opts.APIKey != "" {
		reqOpts = append(reqOpts, option.WithHeader("X-Api-Key", opts.APIKey))
	}
	if opts.BaseURL != "" {
		reqOpts = append(reqOpts, option.WithBaseURL(opts.BaseURL))
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
	return &client{messages: sdk.NewClient(reqOpts...).Messages, opts: opts}, nil
}

// baseURL is the API's address, for the spans.
func (c *client) baseURL() string {
	if c.opts.BaseURL == "" {
		return DefaultBaseURL
	}
	return c.opts.BaseURL
}

// messageResponse is what a traced call reports of res (nil: no answer).
func messageResponse(res *sdk.Message) genai.Response {
	if res == nil {
		return genai.Response{}
	}
	r := genai.Response{
		ID: res.ID, Model: string(res.Model),
		InputTokens:       int(res.Usage.InputTokens + res.Usage.CacheReadInputTokens + res.Usage.CacheCreationInputTokens),
		OutputTokens:      int(res.Usage.OutputTokens),
		CachedInputTokens: int(res.Usage.CacheReadInputTokens),
	}
	if res.StopReason != "" {
		r.FinishReasons = []string{string(res.StopReason)}
	}
	return r
}

// Name returns "anthropic:" and the model.
func (c *client) Name() string { return provider + ":" + c.opts.Model }

// params returns the request for req: the instructions in the system field
// and the data in the one user message. req.Schema is not sent: the answer
// is asked for as JSON text (see Extractor for why) and checked all the
// same.
func (c *client) params(req llm.Request) sdk.MessageNewParams {
	return sdk.MessageNewParams{
		Model:     sdk.Model(c.opts.Model),
		MaxTokens: int64(c.opts.MaxTokens),
		System:    []sdk.TextBlockParam{{Text: req.System}},
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(req.User))},
	}
}

// Complete sends req and returns the text of the answer's text blocks,
// joined (thinking blocks are skipped). An answer that did not end its turn
// normally (cut at max_tokens, refused, a tool call asked for) is an error,
// whatever text it holds.
func (c *client) Complete(ctx context.Context, req llm.Request) (text string, err error) {
	ctx, call := genai.Start(ctx, c.opts.Tracer, genai.Request{
		Operation: genai.OpChat, Provider: genai.ProviderAnthropic, Model: c.opts.Model,
		MaxTokens: c.opts.MaxTokens, Temperature: -1, ServerURL: c.baseURL(), Purpose: c.purpose,
	})
	var res *sdk.Message
	defer func() { call.End(messageResponse(res), err) }()
	var trace []option.RequestOption
	genai.Inject(ctx, c.opts.Tracer, func(k, v string) { trace = append(trace, option.WithHeader(k, v)) })
	res, err = c.messages.New(ctx, c.params(req), trace...)
	if err != nil {
		return "", classify(ctx, err)
	}
	// Anthropic counts cache reads and writes apart from input_tokens;
	// the ledger's input holds them all, the reads as cached input.
	u := res.Usage
	chatmem.ReportUsage(ctx, chatmem.ModelUsage{Model: c.opts.Model, Tokens: chatmem.Tokens{
		Input:       u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		CachedInput: u.CacheReadInputTokens, Output: u.OutputTokens,
	}})
	switch res.StopReason {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence, "":
	case sdk.StopReasonMaxTokens:
		return "", fmt.Errorf("%w: the answer was cut at %d tokens; raise MaxTokens", chatmem.ErrUnavailable, c.opts.MaxTokens)
	case sdk.StopReasonRefusal:
		return "", fmt.Errorf("%w: the model refused to answer", chatmem.ErrUnavailable)
	default:
		return "", fmt.Errorf("%w: the answer stopped with %q", chatmem.ErrUnavailable, res.StopReason)
	}
	var b strings.Builder
	for _, block := range res.Content {
		if block.Type == "text" {
			b.WriteString(block.Text)
		}
	}
	return b.String(), nil
}

// classify wraps an SDK error in the chatmem sentinel it stands for.
func classify(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return llm.RequestError(ctx, err)
	}
	code := apiErr.StatusCode
	detail := fmt.Sprintf("%d %s", code, http.StatusText(code))
	if code == 529 {
		detail = "529 Overloaded"
	}
	if t := string(apiErr.Type()); t != "" {
		detail += " " + t
	}
	if apiErr.Message != "" {
		detail += ": " + apiErr.Message
	}
	if apiErr.RequestID != "" {
		detail += " (request " + apiErr.RequestID + ")"
	}
	return llm.StatusError(code, detail)
}

package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"chatmem"
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
}

// client is what Summarizer and Extractor share: the SDK's chat completion
// service and the request settings.
type client struct {
	chat sdk.ChatCompletionService
	opts Options
}

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

// name is what Name returns: "openai:" and the model.
func (c *client) name() string { return "openai:" + c.opts.Model }

// params returns a request with the system instructions in the system
// message and the data in the user message.
func (c *client) params(system, user string) sdk.ChatCompletionNewParams {
	p := sdk.ChatCompletionNewParams{
		Model: c.opts.Model,
		Messages: []sdk.ChatCompletionMessageParamUnion{
			sdk.SystemMessage(system),
			sdk.UserMessage(user),
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
	return p
}

// complete sends p and returns the first choice's text. An answer that was
// cut, filtered or refused is an error, whatever text it holds.
func (c *client) complete(ctx context.Context, what string, p sdk.ChatCompletionNewParams) (string, error) {
	res, err := c.chat.New(ctx, p)
	if err != nil {
		return "", classify(ctx, what, err)
	}
	if len(res.Choices) == 0 {
		return "", fmt.Errorf("openai %s: %w: the answer has no choices", what, chatmem.ErrUnavailable)
	}
	choice := res.Choices[0]
	if r := strings.TrimSpace(choice.Message.Refusal); r != "" {
		return "", fmt.Errorf("openai %s: %w: the model refused: %s", what, chatmem.ErrUnavailable, r)
	}
	switch choice.FinishReason {
	case "length":
		return "", fmt.Errorf("openai %s: %w: the answer was cut at %d tokens; raise MaxTokens", what, chatmem.ErrUnavailable, c.opts.MaxTokens)
	case "content_filter":
		return "", fmt.Errorf("openai %s: %w: the answer was withheld by the content filter", what, chatmem.ErrUnavailable)
	}
	return choice.Message.Content, nil
}

// classify wraps an SDK error in the chatmem sentinel it stands for.
func classify(ctx context.Context, what string, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
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
		switch {
		case code == http.StatusRequestTimeout || code == http.StatusConflict ||
			code == http.StatusTooManyRequests || code >= 500:
			return fmt.Errorf("openai %s: %w: %s", what, chatmem.ErrUnavailable, detail)
		case code >= 400:
			return fmt.Errorf("openai %s: %w: %s", what, chatmem.ErrInvalid, detail)
		}
		return fmt.Errorf("openai %s: unexpected %s", what, detail)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		// The caller gave up; that says nothing about the service.
		return fmt.Errorf("openai %s: %w", what, err)
	}
	// A network failure, a deadline that passed, an unreadable answer.
	return fmt.Errorf("openai %s: %w: %w", what, chatmem.ErrUnavailable, err)
}

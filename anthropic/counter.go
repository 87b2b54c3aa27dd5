package anthropic

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/tokenizer"
)

// CounterName is the registry name of the Anthropic counter
// (tokenizer.AnthropicName). The counter's own Name is "anthropic:"
// followed by its model.
const CounterName = tokenizer.AnthropicName

// Counters returns what tokenizer.Options.Anthropic takes: a function that
// builds a Counter with opts for a model (the model of a recorded
// "anthropic:MODEL"; "" keeps opts.Model).
func Counters(opts CounterOptions) func(model string) (chatmem.Counter, error) {
	return func(model string) (chatmem.Counter, error) {
		o := opts
		if model != "" {
			o.Model = model
		}
		return NewCounter(o)
	}
}

// DefaultCounterCacheSize is the number of count_tokens answers an
// Anthropic counter keeps when CounterOptions.CacheSize is zero.
const DefaultCounterCacheSize = 10000

// CounterOptions configure an Anthropic counter. APIKey and Model are
// required; the zero value of every other field means its default.
type CounterOptions struct {
	// APIKey is sent in the x-api-key header. The environment
	// (ANTHROPIC_API_KEY and the like) is not consulted: configuration comes
	// from the caller only.
	APIKey string
	// Model names the model whose tokenizer counts, e.g. "claude-sonnet-4-5".
	Model string
	// BaseURL is the API's address; empty means https://api.sdk.com.
	BaseURL string
	// CacheSize bounds the answers kept in memory (least recently used go
	// first). Zero means DefaultCounterCacheSize; negative disables the
	// cache.
	CacheSize int
	// MaxRetries is how often the SDK retries a request that failed with a
	// network error, 408, 409, 429 or 5xx, with backoff. Zero means the SDK's
	// default (2); negative means no retries.
	MaxRetries int
	// HTTPClient sends the requests; nil means the SDK's default client.
	HTTPClient *http.Client
}

// Anthropic counts tokens with Anthropic's token counting API
// (POST /v1/messages/count_tokens), through the official Go SDK, for one
// model. The API counts whole requests, not messages, so Anthropic sends each
// message in the smallest valid request that holds it and, where that request
// needs scaffolding around the message, subtracts the count of the same
// request without the message (its baseline):
//
//   - user: [user(content)], counted as is. The count includes the request's
//     fixed framing, so a window's sum over-counts by that framing once per
//     user message after the first: a few tokens, on the safe side for a
//     budget.
//   - system: system=content with messages [user(".")], minus [user(".")].
//   - assistant: [user("."), assistant(content, tool_use blocks),
//     user(".")] minus [user("."), user(".")] (the API merges the two user
//     messages into one turn). The request ends with a user message because
//     newer models refuse a conversation that ends with an assistant message
//     (prefill). The count includes the framing of the user turn that follows
//     the assistant's, which the next user message's count includes too: a
//     few tokens over, again on the safe side. When the message carries tool
//     calls, each becomes a tool_use block (its arguments as the input object,
//     or {"arguments": "..."} when they are not a JSON object), the user
//     message after it holds one empty tool_result per call, and both the
//     request and its baseline declare each function as a tool taking any
//     object, so the tool declarations cancel out.
//   - tool: [user("."), assistant(tool_use), user(tool_result(content))]
//     minus the same request with an empty tool_result, so a tool message
//     costs its content; the result block's framing was counted with the
//     assistant message that made the call.
//
// Tool call IDs are replaced by fixed ones ("toolu_0", ...) and a message's
// name is not sent (the Messages API has neither), so neither changes a count.
// A negative difference counts as 0.
//
// Answers are cached per request: the key is a SHA-256 hash of the request
// body, which is a function of the model and of the message's role, content
// and tool calls (name and arguments) alone. Counting a message that was
// counted before, and every baseline after its first use, makes no request.
// The cache is bounded (CounterOptions.CacheSize, least recently used
// evicted). Concurrent first counts of one message may each ask the API.
//
// Errors: a network failure, 408, 429, 5xx or 529 wraps
// chatmem.ErrUnavailable (retry later); any other 4xx (bad key, unknown model,
// invalid content) wraps chatmem.ErrInvalid. An Anthropic is safe for
// concurrent use.
type Counter struct {
	client sdk.Client
	model  string
	cache  *lru
}

var _ chatmem.Counter = (*Counter)(nil)

// NewCounter returns a counter for opts.Model. It makes no request. A
// missing APIKey or Model wraps chatmem.ErrInvalid.
func NewCounter(opts CounterOptions) (*Counter, error) {
	if opts.APIKey == "" {
		return nil, fmt.Errorf("%w: the anthropic tokenizer needs an API key", chatmem.ErrInvalid)
	}
	if opts.Model == "" {
		return nil, fmt.Errorf("%w: the anthropic tokenizer needs a model", chatmem.ErrInvalid)
	}
	reqOpts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithHeader("X-Api-Key", opts.APIKey),
		option.WithHeaderDel("Authorization"),
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
	size := opts.CacheSize
	if size == 0 {
		size = DefaultCounterCacheSize
	}
	return &Counter{client: sdk.NewClient(reqOpts...), model: opts.Model, cache: newLRU(size)}, nil
}

// Name returns "anthropic:" and the model, e.g. "anthropic:claude-sonnet-4-5":
// counts from different models' tokenizers must not be mixed.
func (a *Counter) Name() string { return CounterName + ":" + a.model }

// Count returns the tokens of m as the type's doc describes, from the cache
// when it can.
func (a *Counter) Count(ctx context.Context, m chatmem.Message) (int, error) {
	req, base, err := a.requests(m)
	if err != nil {
		return 0, err
	}
	n, err := a.count(ctx, req)
	if err != nil {
		return 0, err
	}
	if base == nil {
		return n, nil
	}
	b, err := a.count(ctx, *base)
	if err != nil {
		return 0, err
	}
	return max(0, n-b), nil
}

// The scaffolding of the requests Count sends.
const (
	fillerText     = "."
	toolResultName = "tool" // the function a tool message answers, in its scaffold
)

func countToolUseID(i int) string { return "toolu_" + strconv.Itoa(i) }

// requests returns the request that holds m and, when m needs scaffolding, the
// baseline to subtract from it.
func (a *Counter) requests(m chatmem.Message) (req sdk.MessageCountTokensParams, base *sdk.MessageCountTokensParams, err error) {
	filler := sdk.NewUserMessage(sdk.NewTextBlock(fillerText))
	params := func(msgs ...sdk.MessageParam) sdk.MessageCountTokensParams {
		return sdk.MessageCountTokensParams{Model: sdk.Model(a.model), Messages: msgs}
	}
	switch m.Role {
	case chatmem.RoleUser:
		return params(sdk.NewUserMessage(sdk.NewTextBlock(m.Content))), nil, nil

	case chatmem.RoleSystem:
		req = params(filler)
		req.System.OfTextBlockArray = []sdk.TextBlockParam{{Text: m.Content}}
		b := params(filler)
		return req, &b, nil

	case chatmem.RoleAssistant:
		var blocks, results []sdk.ContentBlockParamUnion
		if m.Content != "" {
			blocks = append(blocks, sdk.NewTextBlock(m.Content))
		}
		var names []string
		for i, c := range m.ToolCalls {
			blocks = append(blocks, sdk.NewToolUseBlock(countToolUseID(i), countToolInput(c.Function.Arguments), c.Function.Name))
			results = append(results, countToolResult(countToolUseID(i), ""))
			names = append(names, c.Function.Name)
		}
		if len(blocks) == 0 {
			return req, nil, fmt.Errorf("%w: assistant message has neither content nor tool calls", chatmem.ErrInvalid)
		}
		next := filler
		if len(results) > 0 {
			next = sdk.NewUserMessage(results...)
		}
		req = params(filler, sdk.NewAssistantMessage(blocks...), next)
		b := params(filler, filler)
		req.Tools, b.Tools = countToolDecls(names), countToolDecls(names)
		return req, &b, nil

	case chatmem.RoleTool:
		call := sdk.NewAssistantMessage(sdk.NewToolUseBlock(countToolUseID(0), json.RawMessage("{}"), toolResultName))
		req = params(filler, call, sdk.NewUserMessage(countToolResult(countToolUseID(0), m.Content)))
		b := params(filler, call, sdk.NewUserMessage(countToolResult(countToolUseID(0), "")))
		req.Tools, b.Tools = countToolDecls([]string{toolResultName}), countToolDecls([]string{toolResultName})
		return req, &b, nil
	}
	return req, nil, fmt.Errorf("%w: unknown role %q", chatmem.ErrInvalid, m.Role)
}

// countToolInput returns a tool call's arguments as a tool_use input, which must be
// a JSON object.
func countToolInput(args string) any {
	raw := bytes.TrimSpace([]byte(args))
	if len(raw) == 0 {
		return json.RawMessage("{}")
	}
	if raw[0] == '{' && json.Valid(raw) {
		return json.RawMessage(raw)
	}
	return map[string]string{"arguments": args}
}

// countToolResult returns a tool_result block answering the call id; empty content
// leaves the block without content, as the API requires text blocks to be
// non-empty.
func countToolResult(id, content string) sdk.ContentBlockParamUnion {
	b := &sdk.ToolResultBlockParam{ToolUseID: id}
	if content != "" {
		b.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: content}}}
	}
	return sdk.ContentBlockParamUnion{OfToolResult: b}
}

// countToolDecls declares each distinct function name as a tool taking any object,
// in sorted order so that equal messages make equal requests.
func countToolDecls(names []string) []sdk.MessageCountTokensToolUnionParam {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	tools := make([]sdk.MessageCountTokensToolUnionParam, 0, len(names))
	for _, n := range names {
		// An empty properties object keeps input_schema from being left out
		// as a zero value; the API requires it.
		schema := sdk.ToolInputSchemaParam{Properties: map[string]any{}}
		tools = append(tools, sdk.MessageCountTokensToolUnionParam{OfTool: &sdk.ToolParam{Name: n, InputSchema: schema}})
	}
	return tools
}

// count returns the input tokens of one request, from the cache or the API.
func (a *Counter) count(ctx context.Context, req sdk.MessageCountTokensParams) (int, error) {
	body, err := req.MarshalJSON()
	if err != nil {
		return 0, fmt.Errorf("anthropic count_tokens: encode request: %w", err)
	}
	key := sha256.Sum256(body)
	if n, ok := a.cache.get(key); ok {
		return n, nil
	}
	res, err := a.client.Messages.CountTokens(ctx, req)
	if err != nil {
		return 0, classifyCount(ctx, err)
	}
	n := int(res.InputTokens)
	a.cache.put(key, n)
	return n, nil
}

// classify wraps an SDK error in the chatmem sentinel it stands for.
func classifyCount(ctx context.Context, err error) error {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		code := apiErr.StatusCode
		detail := fmt.Sprintf("%d %s", code, http.StatusText(code))
		if t := string(apiErr.Type()); t != "" {
			detail += " " + t
		}
		if apiErr.Message != "" {
			detail += ": " + apiErr.Message
		}
		switch {
		case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
			return fmt.Errorf("anthropic count_tokens: %w: %s", chatmem.ErrUnavailable, detail)
		case code >= 400:
			return fmt.Errorf("anthropic count_tokens: %w: %s", chatmem.ErrInvalid, detail)
		}
		return fmt.Errorf("anthropic count_tokens: unexpected %s", detail)
	}
	if ctx.Err() != nil {
		// The caller gave up; that says nothing about the service.
		return fmt.Errorf("anthropic count_tokens: %w", err)
	}
	return fmt.Errorf("anthropic count_tokens: %w: %w", chatmem.ErrUnavailable, err)
}

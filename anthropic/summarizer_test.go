package anthropic

import (
	"context"
	"errors"
	"net/http"
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
	f := newFakeAnthropic(t)
	f.reply = func(int, messagesRequest) fakeReply {
		return fakeReply{
			thinking: "The user is Kavya; keep the order ID.",
			text:     "\n  Kavya's order SE-10423 is out for delivery, due by 8 pm. She asked to add DryFit socks (Rs 249) to her cart.  \n",
		}
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
		t.Errorf("Summarize = %q, want %q (trimmed, thinking skipped)", got, want)
	}
	if got, want := s.Name(), "anthropic:claude-test"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}

	req, h := f.last(t)
	if req.Model != "claude-test" {
		t.Errorf("model = %q, want claude-test", req.Model)
	}
	if got := h.Get("X-Api-Key"); got != "sk-ant-test" {
		t.Errorf("x-api-key = %q, want sk-ant-test", got)
	}
	if got := h.Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none (the key goes in x-api-key)", got)
	}
	if got := h.Get("Anthropic-Version"); !apiVersion.MatchString(got) {
		t.Errorf("anthropic-version = %q, want a dated version", got)
	}
	if req.MaxTokens == nil || *req.MaxTokens != DefaultMaxTokens {
		t.Errorf("max_tokens = %v, want %d", req.MaxTokens, DefaultMaxTokens)
	}
	if req.Temperature != nil || req.ToolChoice != nil || req.Tools != nil {
		t.Errorf("temperature %v, tool_choice %s, tools %s; want none", req.Temperature, req.ToolChoice, req.Tools)
	}
	if len(req.Messages) != 1 || req.Messages[0].Role != "user" {
		t.Fatalf("messages = %+v, want one user message", req.Messages)
	}

	// The prompt is internal/llm's, tested there to the letter, and
	// TestCompleteMapsRequest shows it reaches the wire as it is.
	if system, user := req.system(), req.user(); !strings.Contains(system, "Output only the summary text.") ||
		!strings.HasSuffix(user, "[seq 6] user: Add the DryFit ones to my cart please.\n</transcript>") {
		t.Errorf("system field:\n%s\nuser message:\n%s\nwant the instructions and the transcript", system, user)
	}
}

// Complete maps an llm.Request onto the wire exactly: the system text as
// the system field, the user text as the one user message; a schema is not
// sent (no tool, no output_config: see Extractor); the text comes back as
// it is.
func TestCompleteMapsRequest(t *testing.T) {
	f := newFakeAnthropic(t)
	f.reply = func(int, messagesRequest) fakeReply { return fakeReply{text: "  {\"facts\":[]}\n"} }
	c, err := newClient(f.options())
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{
		System: "Instructions.\nOnly here.",
		User:   "<transcript>\n[seq 1] user: data\n</transcript>",
		Schema: &llm.Schema{Name: "facts", Description: "Facts the user states.", Schema: map[string]any{"type": "object"}},
	}
	got, err := c.Complete(context.Background(), req)
	if err != nil || got != "  {\"facts\":[]}\n" {
		t.Errorf("Complete = %q, %v; want the answer untrimmed", got, err)
	}
	sent, _ := f.last(t)
	if len(sent.Messages) != 1 || sent.Messages[0].Role != "user" {
		t.Fatalf("messages = %+v, want one user message", sent.Messages)
	}
	if sent.system() != req.System || sent.user() != req.User {
		t.Errorf("system %q, user %q; want %q and %q", sent.system(), sent.user(), req.System, req.User)
	}
	if sent.ToolChoice != nil || sent.Tools != nil || sent.OutputConfig != nil {
		t.Errorf("tool_choice %s, tools %s, output_config %s; want none", sent.ToolChoice, sent.Tools, sent.OutputConfig)
	}
}

func TestSummarizeEmptyAnswerIsAnError(t *testing.T) {
	for _, rep := range []fakeReply{{text: ""}, {text: "  \n\t "}, {thinking: "Nothing to say.", text: " "}} {
		f := newFakeAnthropic(t)
		f.reply = func(int, messagesRequest) fakeReply { return rep }
		got, err := f.summarizer(t).Summarize(context.Background(), "", stored())
		if err == nil || !errors.Is(err, chatmem.ErrUnavailable) || got != "" {
			t.Errorf("answer %+v: Summarize = %q, %v; want an error wrapping ErrUnavailable", rep, got, err)
		}
	}
}

func TestSummarizeUnusableAnswers(t *testing.T) {
	for _, stop := range []string{"max_tokens", "refusal", "model_context_window_exceeded", "tool_use", "pause_turn"} {
		t.Run(stop, func(t *testing.T) {
			f := newFakeAnthropic(t)
			f.reply = func(int, messagesRequest) fakeReply {
				return fakeReply{text: "Kavya's order SE-10423 is", stopReason: stop}
			}
			got, err := f.summarizer(t).Summarize(context.Background(), "", stored())
			if !errors.Is(err, chatmem.ErrUnavailable) || got != "" {
				t.Errorf("Summarize = %q, %v; want an error wrapping ErrUnavailable", got, err)
			}
		})
	}
	f := newFakeAnthropic(t)
	f.reply = func(int, messagesRequest) fakeReply {
		return fakeReply{text: "Kavya, order SE-10423.", stopReason: "stop_sequence"}
	}
	if got, err := f.summarizer(t).Summarize(context.Background(), "", stored()); err != nil || got != "Kavya, order SE-10423." {
		t.Errorf("stop_sequence: Summarize = %q, %v; want the text", got, err)
	}
}

func TestMaxTokensOption(t *testing.T) {
	f := newFakeAnthropic(t)
	opts := f.options()
	opts.MaxTokens = 300
	s, err := NewSummarizer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Summarize(context.Background(), "", stored()); err != nil {
		t.Fatal(err)
	}
	if req, _ := f.last(t); req.MaxTokens == nil || *req.MaxTokens != 300 {
		t.Errorf("max_tokens = %v, want 300", req.MaxTokens)
	}
}

// The SDK's environment defaults are off: the key and base URL come from
// Options alone, and no key is sent when none is configured.
func TestEnvironmentIgnored(t *testing.T) {
	f := newFakeAnthropic(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-env")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	if _, err := f.summarizer(t).Summarize(context.Background(), "", stored()); err != nil {
		t.Fatal(err)
	}
	if _, h := f.last(t); h.Get("Authorization") != "" || h.Get("X-Api-Key") != "sk-ant-test" {
		t.Errorf("Authorization %q, x-api-key %q; want none and the configured key", h.Get("Authorization"), h.Get("X-Api-Key"))
	}

	opts := f.options()
	opts.APIKey = ""
	s, err := NewSummarizer(opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Summarize(context.Background(), "", stored())
	if _, h := f.last(t); h.Get("X-Api-Key") != "" || h.Get("Authorization") != "" {
		t.Errorf("x-api-key %q, Authorization %q with no key configured; want none", h.Get("X-Api-Key"), h.Get("Authorization"))
	}
	if !errors.Is(err, chatmem.ErrInvalid) {
		t.Errorf("the fake's 401 gave %v, want ErrInvalid", err)
	}
}

func TestNewValidates(t *testing.T) {
	for name, opts := range map[string]Options{
		"no model":                     {APIKey: "sk-ant"},
		"no key for the Anthropic API": {Model: "claude-test"},
		"negative max tokens":          {APIKey: "sk-ant", Model: "claude-test", MaxTokens: -1},
		"max tokens needing streaming": {APIKey: "sk-ant", Model: "claude-test", MaxTokens: 64000},
	} {
		if _, err := NewSummarizer(opts); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: NewSummarizer error = %v, want ErrInvalid", name, err)
		}
		if _, err := NewExtractor(ExtractorOptions{Options: opts}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("%s: NewExtractor error = %v, want ErrInvalid", name, err)
		}
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
	do   func(ctx context.Context, opts Options) error
}

var calls = []call{
	{"summarize", func(ctx context.Context, opts Options) error {
		s, err := NewSummarizer(opts)
		if err != nil {
			return err
		}
		_, err = s.Summarize(ctx, "", stored())
		return err
	}},
	{"extract", func(ctx context.Context, opts Options) error {
		x, err := NewExtractor(ExtractorOptions{Options: opts})
		if err != nil {
			return err
		}
		_, err = x.Extract(ctx, stored())
		return err
	}},
}

func TestErrorStatuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		errType string
		msg     string
		raw     string
		want    error
		reject  error
	}{
		{"429 rate_limit_error", http.StatusTooManyRequests, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", "", chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{"529 overloaded_error", 529, "overloaded_error", "Overloaded", "", chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{"500 api_error", http.StatusInternalServerError, "api_error", "Internal server error", "", chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{"502 from a proxy, not JSON", http.StatusBadGateway, "", "", "<html><body>502 Bad Gateway</body></html>", chatmem.ErrUnavailable, chatmem.ErrInvalid},
		{"400 invalid_request_error", http.StatusBadRequest, "invalid_request_error", "messages.0.content: Input should be a valid list", "", chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{"401 authentication_error", http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "", chatmem.ErrInvalid, chatmem.ErrUnavailable},
		{"404 not_found_error", http.StatusNotFound, "not_found_error", "model: claude-test", "", chatmem.ErrInvalid, chatmem.ErrUnavailable},
	} {
		for _, c := range calls {
			t.Run(tc.name+"/"+c.name, func(t *testing.T) {
				f := newFakeAnthropic(t)
				f.reply = func(int, messagesRequest) fakeReply {
					return fakeReply{status: tc.status, errType: tc.errType, errMsg: tc.msg, raw: tc.raw}
				}
				err := c.do(context.Background(), f.options())
				if !errors.Is(err, tc.want) || errors.Is(err, tc.reject) {
					t.Fatalf("error = %v, want one wrapping %v (and not %v)", err, tc.want, tc.reject)
				}
				if n := len(f.requests()); n != 1 {
					t.Errorf("%d requests with retries off, want 1", n)
				}
				if tc.raw == "" && (!strings.Contains(err.Error(), tc.errType) || !strings.Contains(err.Error(), tc.msg)) {
					t.Errorf("error %q lacks the provider's type %q and message %q", err, tc.errType, tc.msg)
				}
			})
		}
	}
}

// The real API's own refusals of a malformed request reach the caller as
// ErrInvalid; the fake enforces them, so this also shows the requests the
// package sends are well-formed.
func TestWellFormedRequests(t *testing.T) {
	for _, c := range calls {
		f := newFakeAnthropic(t)
		f.reply = func(int, messagesRequest) fakeReply { return fakeReply{text: `{"facts":[]}`} }
		if err := c.do(context.Background(), f.options()); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// MaxRetries is passed to the SDK: a 529 then a success takes two requests
// and succeeds; with retries off it fails after one.
func TestMaxRetriesPassedToSDK(t *testing.T) {
	f := newFakeAnthropic(t)
	f.reply = func(n int, _ messagesRequest) fakeReply {
		if n == 1 {
			return fakeReply{status: 529, errType: "overloaded_error", errMsg: "Overloaded", header: map[string]string{"Retry-After-Ms": "10"}}
		}
		return fakeReply{text: "Kavya, order SE-10423."}
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
			f := newFakeAnthropic(t)
			f.reply = func(int, messagesRequest) fakeReply { return fakeReply{hang: true} }

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := c.do(ctx, f.options())
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
			err = c.do(ctx, f.options())
			if !errors.Is(err, context.Canceled) || errors.Is(err, chatmem.ErrUnavailable) {
				t.Errorf("after cancel: error = %v, want context.Canceled only", err)
			}
		})
	}
}

// The network failing (nothing listens) is ErrUnavailable.
func TestNetworkFailure(t *testing.T) {
	f := newFakeAnthropic(t)
	opts := f.options()
	f.Close()
	for _, c := range calls {
		if err := c.do(context.Background(), opts); !errors.Is(err, chatmem.ErrUnavailable) {
			t.Errorf("%s with the server gone: error = %v, want ErrUnavailable", c.name, err)
		}
	}
}

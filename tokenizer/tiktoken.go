package tokenizer

import (
	"context"
	"fmt"
	"sync"

	tiktoken "github.com/tiktoken-go/tokenizer"

	"github.com/chatmem/chatmem"
)

// The names of the tiktoken encodings chatmem supports.
const (
	// O200kBase is the encoding of GPT-4o, GPT-4.1, GPT-5 and the o-series.
	O200kBase = "o200k_base"
	// Cl100kBase is the encoding of GPT-4 and GPT-3.5-turbo.
	Cl100kBase = "cl100k_base"
)

// The OpenAI chat format's framing, from the OpenAI cookbook's "How to count
// tokens with tiktoken" (num_tokens_from_messages, for gpt-3.5-turbo-0613 and
// later, gpt-4 and gpt-4o): every message is wrapped in
// <|start|>{role/name}\n{content}<|end|>\n, a name costs one token more, and
// every reply is primed with <|start|>assistant<|message|>.
const (
	tokensPerMessage = 3
	tokensPerName    = 1
	tokensPerReply   = 3
	// tokensPerToolCall is chatmem's estimate of the framing around one tool
	// call (the separators between the call's name and its arguments and the
	// call's delimiters). OpenAI does not document how tool calls are
	// rendered; 3 mirrors tokensPerMessage and was not checked against the API.
	tokensPerToolCall = 3
)

// codecs holds one lazily built codec per supported encoding. The map is never
// written after package initialisation; each entry is built once, under its
// sync.Once, and the codec is immutable after that (its error mode is never
// changed), so concurrent Encode and Count calls are safe.
var codecs = map[string]*lazyCodec{
	O200kBase:  {encoding: tiktoken.O200kBase},
	Cl100kBase: {encoding: tiktoken.Cl100kBase},
}

type lazyCodec struct {
	encoding tiktoken.Encoding
	once     sync.Once
	codec    tiktoken.Codec
	err      error
}

func (l *lazyCodec) get() (tiktoken.Codec, error) {
	l.once.Do(func() { l.codec, l.err = tiktoken.Get(l.encoding) })
	return l.codec, l.err
}

// Tiktoken counts tokens with one of OpenAI's BPE encodings ("o200k_base" or
// "cl100k_base") and adds the OpenAI chat format's framing, following the
// OpenAI cookbook's "How to count tokens with tiktoken" for gpt-3.5-turbo-0613
// and later, gpt-4 and gpt-4o:
//
//	Count(m) = 3                                  // tokens_per_message
//	         + tokens(role) + tokens(content)     // every value of the message dict
//	         + tokens(name) + 1                   // only when m.Name is set (tokens_per_name)
//	         + for each tool call: tokens(function name) + tokens(arguments) + 3
//
// and RequestOverhead returns 3, the tokens that prime every reply, which a
// window adds once per request. With these rules the cookbook's example
// conversation comes to the prompt_tokens the OpenAI API reported for it
// (129 under cl100k_base for gpt-3.5-turbo and gpt-4, 124 under o200k_base
// for gpt-4o); the tests hold both.
//
// The cookbook does not cover tool calls. Counting each call's function name
// and arguments is exact; the 3 tokens of framing per call are chatmem's
// estimate, not a figure OpenAI publishes. A tool message's tool_call_id is
// not counted: it is an opaque ID that the cookbook's formula does not include.
// Text that looks like a special token ("<|endoftext|>") is counted as
// ordinary text, as tiktoken's encode_ordinary does.
//
// A Tiktoken is safe for concurrent use; all Tiktokens of one encoding share
// one codec, built on first use.
type Tiktoken struct {
	name  string
	codec tiktoken.Codec
}

var (
	_ chatmem.Counter         = (*Tiktoken)(nil)
	_ chatmem.RequestOverhead = (*Tiktoken)(nil)
	_ chatmem.TextCounter     = (*Tiktoken)(nil)
)

// NewTiktoken returns the counter for the named encoding, "o200k_base" or
// "cl100k_base". Any other name wraps chatmem.ErrInvalid.
func NewTiktoken(name string) (*Tiktoken, error) {
	l, ok := codecs[name]
	if !ok {
		return nil, fmt.Errorf("%w: unknown tiktoken encoding %q (want %s or %s)", chatmem.ErrInvalid, name, O200kBase, Cl100kBase)
	}
	c, err := l.get()
	if err != nil {
		return nil, fmt.Errorf("load tiktoken encoding %s: %w", name, err)
	}
	return &Tiktoken{name: name, codec: c}, nil
}

// Name returns the encoding's name, "o200k_base" or "cl100k_base".
func (t *Tiktoken) Name() string { return t.name }

// Count returns the tokens of m under the OpenAI chat format, as the type's
// doc describes. It fails only if the tokenizer itself fails, which valid
// UTF-8 text does not make it do.
func (t *Tiktoken) Count(_ context.Context, m chatmem.Message) (int, error) {
	n := tokensPerMessage
	for _, s := range [...]string{string(m.Role), m.Content} {
		k, err := t.text(s)
		if err != nil {
			return 0, err
		}
		n += k
	}
	if m.Name != "" {
		k, err := t.text(m.Name)
		if err != nil {
			return 0, err
		}
		n += k + tokensPerName
	}
	for _, c := range m.ToolCalls {
		name, err := t.text(c.Function.Name)
		if err != nil {
			return 0, err
		}
		args, err := t.text(c.Function.Arguments)
		if err != nil {
			return 0, err
		}
		n += name + args + tokensPerToolCall
	}
	return n, nil
}

// RequestOverhead returns 3: OpenAI primes every reply with
// <|start|>assistant<|message|>, once per request.
func (t *Tiktoken) RequestOverhead() int { return tokensPerReply }

// CountText returns the number of tokens of text alone, without any framing.
func (t *Tiktoken) CountText(text string) (int, error) { return t.text(text) }

func (t *Tiktoken) text(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := t.codec.Count(s)
	if err != nil {
		return 0, fmt.Errorf("%s: count tokens: %w", t.name, err)
	}
	return n, nil
}

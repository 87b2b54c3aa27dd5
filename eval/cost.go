package eval

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"

	"github.com/chatmem/chatmem"
)

// Cost is what a row's requests cost over the replays: every context read
// at a user turn, as a chatbot backend sends it, in the order a
// conversation's turns come, under two providers' prompt caches
// simulated over that sequence (see costSim). Effective costs are in
// tokens at the uncached input price; the ratios divide them by Tokens.
type Cost struct {
	// Requests is the number of requests; Tokens their input tokens.
	Requests int   `json:"requests"`
	Tokens   int64 `json:"tokens"`
	// PrefixShare is the share of Tokens in messages that repeat, from the
	// start, the previous request of the conversation.
	PrefixShare float64 `json:"prefix_share"`
	// OpenAI is the effective cost under OpenAI's automatic prompt cache:
	// a request's prefix repeated from the previous request is cached
	// from 1,024 tokens on, in steps of 128, and billed at a tenth.
	OpenAI      float64 `json:"openai"`
	OpenAIRatio float64 `json:"openai_ratio"`
	// Anthropic is the effective cost under Anthropic's cache_control
	// breakpoints, as chatmem's proxy sends them: for a cache-stable
	// window, at the end of the system prompt, at the end of the stable
	// part and at the last block (none for a plain window, which the
	// proxy leaves unmarked). A breakpoint's prefix of 1,024 tokens or
	// more is written at 1.25 times the price and read at a tenth; a read
	// finds an entry written up to 20 blocks before a breakpoint.
	Anthropic      float64 `json:"anthropic"`
	AnthropicRatio float64 `json:"anthropic_ratio"`
	// AnthropicMarked is the effective cost under Anthropic's cache with
	// a plain window marked too, at the end of the system prompt and at
	// the last block (as the proxy's Anthropic transport marks a request
	// whose client sets a prompt_cache_key of its own): what a plain
	// window can get at best. For a cache-stable row it is Anthropic.
	AnthropicMarked      float64 `json:"anthropic_marked"`
	AnthropicMarkedRatio float64 `json:"anthropic_marked_ratio"`

	// The sums, in hundredths of a token: integers, so that they do not
	// depend on the order conversations finish in.
	shared, openAI, anthropic, marked int64
}

// The providers' price model (see Cost), in hundredths of the uncached
// price.
const (
	cachedPrice   = 10
	writePrice    = 125
	fullPrice     = 100
	cacheMinimum  = 1024
	openAIStep    = 128
	lookbackBlock = 20
)

// costSim simulates both providers' caches over one conversation's
// sequence of requests under one row.
type costSim struct {
	stable  bool
	prev    []string          // the previous request, rendered per message
	entries map[[32]byte]bool // Anthropic cache entries: prefix digests
	marked  map[[32]byte]bool // the same, with a plain window marked
	sum     Cost              // accumulated over the requests
}

func newCostSim(stable bool) *costSim {
	return &costSim{stable: stable, entries: make(map[[32]byte]bool), marked: make(map[[32]byte]bool)}
}

// add accounts for one request.
func (s *costSim) add(msgs []chatmem.Message) {
	total := 0
	cur := make([]string, len(msgs))
	for i, m := range msgs {
		cur[i] = renderMessage(m)
		total += m.Tokens
	}
	prefix := 0
	for i := 0; i < len(cur) && i < len(s.prev) && cur[i] == s.prev[i]; i++ {
		prefix += msgs[i].Tokens
	}
	s.prev = cur
	s.sum.Requests++
	s.sum.Tokens += int64(total)
	s.sum.shared += int64(prefix) * fullPrice

	cached := 0
	if prefix >= cacheMinimum {
		cached = prefix / openAIStep * openAIStep
	}
	s.sum.openAI += int64(total-cached)*fullPrice + int64(cached)*cachedPrice
	if s.stable {
		c := anthropic(s.entries, msgs, cur, total, true)
		s.sum.anthropic += c
		s.sum.marked += c
	} else {
		s.sum.anthropic += int64(total) * fullPrice // the proxy marks no breakpoint
		s.sum.marked += anthropic(s.marked, msgs, cur, total, false)
	}
}

// anthropic returns the effective cost of one request under Anthropic's
// cache, with breakpoints at the end of the system prompt, at the last
// block and, if stable, at the end of the stable part; it records the
// entries they write in entries. The Messages API takes every system
// message as the system prompt, before the others: the request is
// simulated in that order, the system prompt as one block.
func anthropic(entries map[[32]byte]bool, msgs []chatmem.Message, cur []string, total int, stable bool) int64 {
	var sys strings.Builder
	sysTokens := 0
	type block struct {
		text   string
		tokens int
		stable bool // the last block of the stable part
	}
	var blocks []block
	stableEnd := chatmem.Window{Messages: msgs}.StableLen()
	for i, m := range msgs {
		if m.Role == chatmem.RoleSystem {
			sys.WriteString(cur[i])
			sysTokens += m.Tokens
			continue
		}
		blocks = append(blocks, block{text: cur[i], tokens: m.Tokens})
		if stable && i == stableEnd-1 {
			blocks[len(blocks)-1].stable = true
		}
	}
	if sysTokens > 0 {
		blocks = append([]block{{text: sys.String(), tokens: sysTokens}}, blocks...)
	}
	// Prefix digests and tokens after each block.
	digests := make([][32]byte, len(blocks))
	upTo := make([]int, len(blocks))
	h := sha256.New()
	n := 0
	for i, b := range blocks {
		var l [8]byte
		binary.LittleEndian.PutUint64(l[:], uint64(len(b.text)))
		h.Write(l[:])
		h.Write([]byte(b.text))
		h.Sum(digests[i][:0])
		n += b.tokens
		upTo[i] = n
	}
	var bps []int // breakpoints: block indexes, at most four
	if sysTokens > 0 {
		bps = append(bps, 0)
	}
	for i, b := range blocks {
		if b.stable && (len(bps) == 0 || bps[len(bps)-1] != i) {
			bps = append(bps, i)
		}
	}
	if last := len(blocks) - 1; last >= 0 && (len(bps) == 0 || bps[len(bps)-1] != last) {
		bps = append(bps, last)
	}
	read := 0 // tokens read from the cache
	for _, bp := range bps {
		for j := bp; j >= 0 && j >= bp-lookbackBlock; j-- {
			if upTo[j] >= cacheMinimum && entries[digests[j]] {
				read = max(read, upTo[j])
				break
			}
		}
	}
	written := 0 // tokens written: up to the last breakpoint that caches
	for _, bp := range bps {
		if upTo[bp] >= cacheMinimum {
			if !entries[digests[bp]] {
				written = max(written, upTo[bp]-read)
			}
			entries[digests[bp]] = true
		}
	}
	return int64(read)*cachedPrice + int64(written)*writePrice + int64(total-read-written)*fullPrice
}

// renderMessage is a message as a provider receives it: what a prefix
// match compares.
func renderMessage(m chatmem.Message) string {
	var b strings.Builder
	b.WriteString(string(m.Role))
	b.WriteByte(0)
	b.WriteString(m.Name)
	b.WriteByte(0)
	b.WriteString(m.Content)
	b.WriteByte(0)
	b.WriteString(m.ToolCallID)
	for _, tc := range m.ToolCalls {
		b.WriteByte(0)
		b.WriteString(tc.ID + "\x00" + tc.Function.Name + "\x00" + tc.Function.Arguments)
	}
	return b.String()
}

// merge adds o's requests to c.
func (c *Cost) merge(o *costSim) {
	c.Requests += o.sum.Requests
	c.Tokens += o.sum.Tokens
	c.shared += o.sum.shared
	c.openAI += o.sum.openAI
	c.anthropic += o.sum.anthropic
	c.marked += o.sum.marked
}

// finish turns the sums into shares and ratios.
func (c *Cost) finish() {
	if c.Tokens == 0 {
		return
	}
	t := float64(c.Tokens)
	c.OpenAI = float64(c.openAI) / fullPrice
	c.Anthropic = float64(c.anthropic) / fullPrice
	c.AnthropicMarked = float64(c.marked) / fullPrice
	c.PrefixShare = float64(c.shared) / fullPrice / t
	c.OpenAIRatio = c.OpenAI / t
	c.AnthropicRatio = c.Anthropic / t
	c.AnthropicMarkedRatio = c.AnthropicMarked / t
}

package chatmem

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Receipt explains one window: how it was assembled (the policy, the
// tokenizer, the tokens of each part), what it sent (ranges of sequence
// numbers, never copies of messages) and what it left out, the summary and
// facts it used, the turns it recalled, and how long the reads and the
// assembly took. Context fills Window.Receipt when ContextOptions.Receipt
// asks for it; the chat proxy stores one with each reply it stores,
// completed with what the upstream reported (Upstream) and what the
// request held besides the window (Request), so that the request can be
// rebuilt (Memory.Rebuild). Its JSON form is stable: fields are added,
// never renamed.
type Receipt struct {
	Policy    ReceiptPolicy `json:"policy"`
	Tokenizer string        `json:"tokenizer"`
	Tokens    ReceiptTokens `json:"tokens"`
	// Sent are the window's messages in the order they were sent, as runs.
	Sent []SentSpan `json:"sent"`
	// LeftOut counts the conversation's stored messages not sent.
	LeftOut int `json:"left_out"`
	// Summary is the range the summary sent covers (1..covers_seq), nil
	// if none was sent.
	Summary *SummaryUse `json:"summary,omitempty"`
	// Facts are the facts sent, each by key and version.
	Facts []FactUse `json:"facts,omitempty"`
	// Recalled are the recalled messages, each with the terms of the
	// question it matched.
	Recalled []RecallUse   `json:"recalled,omitempty"`
	Timings  ReceiptTiming `json:"timings"`
	// TailCache reports that the tail cache served the recent part.
	TailCache bool `json:"tail_cache,omitempty"`
	// Upstream is what the model's API reported for the request the
	// window went into (receipts stored with a reply).
	Upstream *UpstreamUse `json:"upstream,omitempty"`
	// Request is what the request held besides the window (receipts
	// stored with a reply).
	Request *RequestFrame `json:"request,omitempty"`
}

// ReceiptPolicy is the policy a window was assembled under.
type ReceiptPolicy struct {
	Kind     PolicyKind `json:"kind"`
	Budget   int        `json:"budget,omitempty"`
	Turns    int        `json:"turns,omitempty"`
	Facts    bool       `json:"facts,omitempty"`
	Recall   bool       `json:"recall,omitempty"`
	Recent   int        `json:"recent,omitempty"`
	Scope    string     `json:"scope,omitempty"`
	Cache    string     `json:"cache,omitempty"`
	LowWater int        `json:"low_water,omitempty"`
}

// ReceiptTokens are a window's tokens by part. Reserved (the request's own
// unstored messages, such as its system prompt) is not part of the
// window's Tokens; the rest sum to them.
type ReceiptTokens struct {
	Pinned   int `json:"pinned"`
	Facts    int `json:"facts,omitempty"`
	Summary  int `json:"summary,omitempty"`
	Recalled int `json:"recalled,omitempty"`
	Recent   int `json:"recent"`
	Reserved int `json:"reserved,omitempty"`
	Overhead int `json:"overhead,omitempty"`
}

// Parts of a window, as SentSpan.Part names them.
const (
	PartPinned   = "pinned"   // stored system messages
	PartFacts    = "facts"    // the facts block (made up, not stored)
	PartSummary  = "summary"  // the summary's message (made up from the stored summary)
	PartRecalled = "recalled" // stored messages recalled from further back
	PartRecent   = "recent"   // the window of newest stored messages
	PartPending  = "pending"  // messages sent before they were stored (ContextOptions.Pending)
)

// SentSpan is a run of messages sent: From..To of Conversation (empty:
// the window's own) for stored ones, none for the facts and summary blocks.
// Hash is a digest of what the run's messages held (role, name, content,
// tool calls), so a rebuild tells a message changed since from one that
// is the same.
type SentSpan struct {
	Part         string `json:"part"`
	From         int64  `json:"from,omitempty"`
	To           int64  `json:"to,omitempty"`
	Conversation string `json:"conversation,omitempty"`
	Hash         string `json:"hash"`
}

// SummaryUse is the summary a window sent.
type SummaryUse struct {
	CoversSeq int64 `json:"covers_seq"`
}

// FactUse is a fact a window sent: its key and its version (when the value
// became current).
type FactUse struct {
	Key          string    `json:"key"`
	Version      time.Time `json:"version"`
	Conversation string    `json:"conversation,omitempty"`
}

// RecallUse is a recalled message: where it is, and the terms of the
// question it shares.
type RecallUse struct {
	Seq          int64    `json:"seq"`
	Conversation string   `json:"conversation,omitempty"`
	Terms        []string `json:"terms,omitempty"`
}

// ReceiptTiming is how long a context read took: Read the store reads of
// the plan and read step, Assembly the rest (assembly, summary upkeep,
// recall), in microseconds.
type ReceiptTiming struct {
	ReadMicros     int64 `json:"read_us"`
	AssemblyMicros int64 `json:"assembly_us"`
}

// UpstreamUse is what a model's API reported for one request.
type UpstreamUse struct {
	Model           string `json:"model,omitempty"`
	InputTokens     int    `json:"input_tokens"`
	CachedTokens    int    `json:"cached_input_tokens,omitempty"`
	OutputTokens    int    `json:"output_tokens"`
	ReasoningTokens int    `json:"reasoning_tokens,omitempty"`
	LatencyMillis   int64  `json:"latency_ms"`
	RequestID       string `json:"request_id,omitempty"`
	ResponseID      string `json:"response_id,omitempty"`
	// ChatmemTokens is chatmem's count of the prompt, beside the
	// upstream's InputTokens.
	ChatmemTokens int `json:"chatmem_tokens,omitempty"`
}

// RequestFrame is what a proxied request held besides the window's
// messages, so that it can be rebuilt: Body is the request body sent
// upstream with the messages array cut out at At (its model, sampling
// parameters and every other field, byte for byte); the request's own
// system messages, not stored, went first in the array, and are kept
// only as their number and a digest of their JSON (System, SystemHash):
// a rebuild takes them from the caller and checks them.
type RequestFrame struct {
	Body       string `json:"body"`
	At         int    `json:"at"`
	System     int    `json:"system,omitempty"`
	SystemHash string `json:"system_hash,omitempty"`
}

// receiptOf is the receipt of window w of context read c.
func (c *contextRead) receiptOf(w Window, read, assembly time.Duration) *Receipt {
	p := c.plan.p
	r := &Receipt{
		Policy: ReceiptPolicy{
			Kind: p.Kind, Budget: p.Budget + c.reserved, Turns: p.Turns, Facts: p.Facts, Recall: p.Recall,
			Recent: p.Recent, Scope: p.Scope, Cache: p.Cache, LowWater: p.LowWater,
		},
		Tokenizer: c.plan.counter.Name(),
		Tokens: ReceiptTokens{
			Pinned: w.Parts.System, Facts: w.Parts.Facts, Summary: w.Parts.Summary, Recalled: w.Parts.Recalled,
			Recent: w.Parts.Recent, Reserved: w.Reserved, Overhead: w.Parts.Overhead,
		},
		LeftOut:   w.Dropped,
		TailCache: c.cached,
		Timings:   ReceiptTiming{ReadMicros: read.Microseconds(), AssemblyMicros: assembly.Microseconds()},
	}
	if w.Summary != nil {
		r.Summary = &SummaryUse{CoversSeq: w.Summary.CoversSeq}
	}
	for _, f := range w.Facts {
		v := f.ValidFrom
		if v.IsZero() {
			v = f.CreatedAt
		}
		r.Facts = append(r.Facts, FactUse{Key: f.Key, Version: v.UTC(), Conversation: f.Conversation})
	}
	r.Sent = SentSpans(w.Messages, c.last)
	if w.Parts.Recalled > 0 {
		query := Terms(newestUserText(w.Messages))
		for _, msg := range w.Messages {
			if part, conv, seq := partOf(msg, c.last); part == PartRecalled {
				r.Recalled = append(r.Recalled, RecallUse{Seq: seq, Conversation: conv, Terms: sharedTerms(query, msg.Content)})
			}
		}
	}
	return r
}

// sharedTerms returns the terms of query found in text, in query order.
func sharedTerms(query []string, text string) []string {
	have := make(map[string]bool)
	for _, t := range Terms(text) {
		have[t] = true
	}
	var out []string
	for _, t := range query {
		if have[t] {
			out = append(out, t)
			delete(have, t)
		}
	}
	return out
}

// partOf returns which part of a window msg is, and for a stored message
// its conversation (empty: the window's own) and sequence number. last is
// the conversation's last stored message: after it, messages are pending.
func partOf(msg Message, last int64) (part, conv string, seq int64) {
	switch msg.Metadata[MetaKey] {
	case MetaFacts:
		return PartFacts, "", 0
	case MetaSummary:
		return PartSummary, "", 0
	case MetaRecalled:
		if c, ok := msg.Metadata[MetaConversation]; ok && msg.Seq == 0 {
			// Recalled from another of the user's conversations.
			s, _ := strconv.ParseInt(msg.Metadata[MetaSeq], 10, 64)
			return PartRecalled, c, s
		}
		return PartRecalled, "", msg.Seq
	}
	if c, ok := msg.Metadata[MetaConversation]; ok {
		s, _ := strconv.ParseInt(msg.Metadata[MetaSeq], 10, 64)
		if msg.Seq != 0 {
			c = "" // the window's own conversation
		}
		return PartRecalled, c, s
	}
	switch {
	case last > 0 && msg.Seq > last:
		return PartPending, "", msg.Seq
	case msg.Role == RoleSystem:
		return PartPinned, "", msg.Seq
	}
	return PartRecent, "", msg.Seq
}

// SentSpans returns msgs, a window's messages as sent, as runs: stored
// messages of one part and conversation with consecutive sequence numbers
// make one run; a made-up block is a run of its own. last is the last
// stored message of the window's conversation (messages after it are
// pending; 0: none are).
func SentSpans(msgs []Message, last int64) []SentSpan {
	var out []SentSpan
	var h hash.Hash
	var buf []byte
	flush := func() {
		if n := len(out); n > 0 && h != nil {
			out[n-1].Hash = hex.EncodeToString(h.Sum(nil)[:8])
		}
	}
	for _, msg := range msgs {
		part, conv, seq := partOf(msg, last)
		if n := len(out); n > 0 && seq > 0 && out[n-1].Part == part && out[n-1].Conversation == conv && out[n-1].To == seq-1 {
			out[n-1].To = seq
		} else {
			flush()
			h = sha256.New()
			out = append(out, SentSpan{Part: part, From: seq, To: seq, Conversation: conv})
		}
		buf = hashMessage(h, buf, msg)
	}
	flush()
	return out
}

// hashMessage writes what of msg is sent to h, each field with its length
// (a little-endian uint64), in one Write of buf's space, which it returns
// for the next message: a window's messages are hashed without an
// allocation each.
func hashMessage(h io.Writer, buf []byte, msg Message) []byte {
	b := buf[:0]
	field := func(s string) {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	field(string(msg.Role))
	field(msg.Name)
	field(msg.ToolCallID)
	field(msg.Content)
	for _, tc := range msg.ToolCalls {
		field(tc.ID)
		field(tc.Type)
		field(tc.Function.Name)
		field(tc.Function.Arguments)
	}
	h.Write(b)
	return b
}

// ReceiptRecord is a receipt stored with a message: the reply at Seq.
type ReceiptRecord struct {
	Seq     int64   `json:"seq"`
	Receipt Receipt `json:"receipt"`
}

// KeepsReceipts reports whether the store keeps receipts (a
// ReceiptStore): AppendOptions.Receipt is dropped by one that does not.
func (m *Memory) KeepsReceipts() bool { return m.caps.receipts != nil }

// Receipts returns up to limit (1..10000; 0 means 50) receipts of the
// conversation stored with messages after seq after, oldest first. It
// wraps ErrNotFound for a conversation that does not exist, ErrInvalid
// for a bad limit or a store that keeps no receipts.
func (m *Memory) Receipts(ctx context.Context, key Key, after int64, limit int) ([]ReceiptRecord, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	rs := m.caps.receipts
	if rs == nil {
		return nil, fmt.Errorf("%w: this store keeps no receipts", ErrInvalid)
	}
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > 10000 || after < 0 {
		return nil, fmt.Errorf("%w: limit must be 1..10000 and after 0 or more", ErrInvalid)
	}
	stored, err := rs.Receipts(ctx, key, after, limit)
	if err != nil {
		return nil, fmt.Errorf("receipts of %s: %w", key, err)
	}
	out := make([]ReceiptRecord, len(stored))
	for i, s := range stored {
		r, err := DecodeReceipt(s.Data)
		if err != nil {
			return nil, fmt.Errorf("receipt of %s at %d: %w", key, s.Seq, err)
		}
		out[i] = ReceiptRecord{Seq: s.Seq, Receipt: r}
	}
	return out, nil
}

// Receipt returns the receipt stored with message seq. It wraps
// ErrNotFound for a conversation that does not exist and for a message
// without a receipt (ReceiptMissing says which).
func (m *Memory) Receipt(ctx context.Context, key Key, seq int64) (Receipt, error) {
	if seq < 1 {
		return Receipt{}, fmt.Errorf("%w: seq must be 1 or more", ErrInvalid)
	}
	rs, err := m.Receipts(ctx, key, seq-1, 1)
	if err != nil {
		return Receipt{}, err
	}
	if len(rs) == 1 && rs[0].Seq == seq {
		return rs[0].Receipt, nil
	}
	conv, err := m.store.Conversation(ctx, key)
	if err != nil {
		return Receipt{}, fmt.Errorf("receipt of %s: %w", key, err)
	}
	if seq > conv.LastSeq {
		return Receipt{}, fmt.Errorf("%w: message %d is not stored (the conversation ends at %d: rewound, or never written)", ErrNotFound, seq, conv.LastSeq)
	}
	return Receipt{}, fmt.Errorf("%w: message %d has no receipt (not a proxied reply, or stored again after a rewind)", ErrNotFound, seq)
}

// ReceiptStore is implemented by stores that keep receipts: an append
// whose AppendOptions.Receipt is set stores it with the batch's last
// message, in the same atomic write. A receipt is deleted with its
// message: by Delete, a rewind past it, a user's erasure, expiry.
type ReceiptStore interface {
	// Receipts returns up to limit receipts stored with messages after
	// seq after, oldest first. ErrNotFound for a conversation that does
	// not exist.
	Receipts(ctx context.Context, key Key, after int64, limit int) ([]StoredReceipt, error)
}

// StoredReceipt is a receipt as a store keeps it: EncodeReceipt's bytes,
// with the message it belongs to.
type StoredReceipt struct {
	Seq  int64
	Data []byte
}

// EncodeReceipt returns the stored form of r: its JSON, compressed with
// Zstandard against a dictionary of the JSON's usual text (receiptDict),
// after a first byte that names the form (receiptZstd). A receipt stored
// with every reply must stay small and cheap to make: a proxied turn's
// receipt of about 550 bytes of JSON is stored in about 125 bytes, in a
// few microseconds, by encoders kept for the life of the process (a
// DEFLATE writer costs hundreds of kilobytes to make or reset).
func EncodeReceipt(r *Receipt) ([]byte, error) {
	j, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if len(j) > maxReceiptJSON {
		// DecodeReceipt would refuse it: a receipt that cannot be read
		// back is not stored.
		return nil, fmt.Errorf("%w: receipt of %d bytes of JSON, at most %d", ErrTooLarge, len(j), maxReceiptJSON)
	}
	enc, err := receiptCodec()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1, len(j)/3+32)
	out[0] = receiptZstd
	return enc.enc.EncodeAll(j, out), nil
}

// The stored forms of a receipt, by first byte: plain JSON starts with
// '{'. Both compressed forms use receiptDict; another dictionary needs
// another first byte.
const (
	receiptDeflate1 = 1 // DEFLATE, as receipts were first stored: still read
	receiptZstd     = 2 // a Zstandard frame, dictionary ID receiptDictID
)

// receiptDictID is the ID of receiptDict in a receipt's Zstandard frame.
const receiptDictID = 1

// receiptCodec is the process's Zstandard encoder and decoder of
// receipts, made once: both are safe for concurrent use.
var receiptCodec = sync.OnceValues(func() (*receiptCoders, error) {
	// Two encoders and two decoders, whatever the cores: one costs about
	// 2 MiB once used, and a receipt takes microseconds.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderDictRaw(receiptDictID, receiptDict), zstd.WithWindowSize(1<<20),
		zstd.WithEncoderConcurrency(2), zstd.WithLowerEncoderMem(true),
		zstd.WithEncoderCRC(false)) // a receipt is JSON, checked as it is read
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(receiptDictID, receiptDict),
		zstd.WithDecoderMaxMemory(maxReceiptJSON), zstd.WithDecoderConcurrency(2))
	if err != nil {
		return nil, err
	}
	return &receiptCoders{enc: enc, dec: dec}, nil
})

type receiptCoders struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

// receiptDict is the preset dictionary of stored receipts: text a
// receipt's JSON usually holds, the most common last. It is part of the
// stored forms (receiptDeflate1, receiptZstd) and never changes; another
// dictionary needs another first byte.
var receiptDict = []byte(`"scope":"user","cache":"stable","low_water":60,"conversation":"","terms":["","recalled":[{"seq":` +
	`"facts":[{"key":"name","version":"2026-01-01T00:00:00Z"},{"key":"` + `"summary":{"covers_seq":` +
	`claude-sonnet-4-5gpt-4.1-minigpt-4.1gpt-5-minigpt-5cl100k_baseanthropic:"policy":{"kind":"summary_buffer","recall":true,"recent":` +
	`"policy":{"kind":"last_turns","turns":10,"facts":true,"policy":{"kind":"recall","budget":8000,"system":1,"system_hash":"` +
	`"request_id":"req_","response_id":"chatcmpl-","chatmem_tokens":` +
	`{"policy":{"kind":"token_budget","budget":4000},"tokenizer":"o200k_base","tokens":{"pinned":0,"facts":0,"summary":0,` +
	`"recalled":0,"recent":0,"reserved":0,"overhead":3},"sent":[{"part":"pinned","from":1,"to":1,"hash":"` +
	`"},{"part":"facts","hash":""},{"part":"summary","hash":"` +
	`"},{"part":"recent","from":1,"to":10,"hash":"` + `"},{"part":"pending","from":10,"to":10,"hash":"` +
	`"}],"left_out":0,"timings":{"read_us":10,"assembly_us":10},"tail_cache":true,"upstream":{"model":"gpt-4o-mini",` +
	`"input_tokens":100,"cached_input_tokens":100,"output_tokens":100,"reasoning_tokens":0,"latency_ms":1000,` +
	`"request_id":"req_","response_id":"chatcmpl-","chatmem_tokens":100},` +
	`"request":{"body":"{\"model\":\"gpt-4o-mini\",\"temperature\":0.2,\"messages\":}","at":40}}`)

// DecodeReceipt reads EncodeReceipt's bytes, or a receipt's plain JSON.
// It wraps ErrInvalid.
func DecodeReceipt(b []byte) (Receipt, error) {
	switch {
	case len(b) > 0 && b[0] == receiptZstd:
		c, err := receiptCodec()
		if err != nil {
			return Receipt{}, err
		}
		j, err := c.dec.DecodeAll(b[1:], nil)
		if err != nil || len(j) > maxReceiptJSON {
			return Receipt{}, fmt.Errorf("%w: receipt: not a stored receipt", ErrInvalid)
		}
		b = j
	case len(b) > 0 && b[0] == receiptDeflate1:
		zr := flate.NewReaderDict(bytes.NewReader(b[1:]), receiptDict)
		j, err := io.ReadAll(io.LimitReader(zr, maxReceiptJSON+1))
		if err != nil || len(j) > maxReceiptJSON {
			return Receipt{}, fmt.Errorf("%w: receipt: not a stored receipt", ErrInvalid)
		}
		b = j
	}
	var r Receipt
	if err := json.Unmarshal(b, &r); err != nil {
		return Receipt{}, fmt.Errorf("%w: receipt: %v", ErrInvalid, err)
	}
	return r, nil
}

// maxReceiptJSON bounds a stored receipt's JSON.
const maxReceiptJSON = 1 << 20

package transfer

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"strings"
	"time"

	"github.com/chatmem/chatmem"
)

// Conflict says what Import does with a conversation that exists in the
// store with other content.
type Conflict string

// The conflict policies.
const (
	// ConflictSkip leaves the stored conversation as it is and reports it.
	ConflictSkip Conflict = "skip"
	// ConflictFail stops the import at the first conflict.
	ConflictFail Conflict = "fail"
	// ConflictReplace deletes the stored conversation and imports the file's.
	ConflictReplace Conflict = "replace"
)

// ParseConflict returns the policy s names ("" is skip).
func ParseConflict(s string) (Conflict, error) {
	switch Conflict(s) {
	case "", ConflictSkip:
		return ConflictSkip, nil
	case ConflictFail, ConflictReplace:
		return Conflict(s), nil
	}
	return "", fmt.Errorf("%w: on-conflict %q (want skip, fail or replace)", chatmem.ErrInvalid, s)
}

// The statuses of a Result.
const (
	StatusCreated   = "created"   // the conversation did not exist
	StatusResumed   = "resumed"   // an earlier, interrupted import of it was finished
	StatusUnchanged = "unchanged" // the store already held exactly this
	StatusReplaced  = "replaced"  // it held other content, deleted (ConflictReplace)
	StatusConflict  = "conflict"  // it holds other content, left as it is
	StatusInvalid   = "invalid"   // a line of it is malformed: nothing of it was written
)

// Result is what Import did with one conversation of the file, or with
// one user's record (User set, Conversation empty).
type Result struct {
	Conversation string `json:"conversation"`
	User         string `json:"user,omitempty"`
	Status       string `json:"status"`
	// Messages is how many messages this import wrote.
	Messages int64 `json:"messages"`
	// Line is the line of the conversation's record, or for StatusInvalid
	// the line at fault.
	Line  int    `json:"line"`
	Error string `json:"error,omitempty"`
}

// Totals counts an import's results: Conversations and Users the records
// read, the statuses those of both.
type Totals struct {
	Conversations int   `json:"conversations"`
	Users         int   `json:"users"`
	Created       int   `json:"created"`
	Resumed       int   `json:"resumed"`
	Unchanged     int   `json:"unchanged"`
	Replaced      int   `json:"replaced"`
	Conflicts     int   `json:"conflicts"`
	Invalid       int   `json:"invalid"`
	Messages      int64 `json:"messages"`
}

func (t *Totals) add(r Result) {
	if r.User != "" {
		t.Users++
	} else {
		t.Conversations++
	}
	t.Messages += r.Messages
	switch r.Status {
	case StatusCreated:
		t.Created++
	case StatusResumed:
		t.Resumed++
	case StatusUnchanged:
		t.Unchanged++
	case StatusReplaced:
		t.Replaced++
	case StatusConflict:
		t.Conflicts++
	case StatusInvalid:
		t.Invalid++
	}
}

// ImportOptions qualify an import.
type ImportOptions struct {
	// OnConflict is the policy for a conversation stored with other
	// content. Zero: ConflictSkip.
	OnConflict Conflict
	// Limits bound each message as they bound an append through the API
	// (chatmem.Message.Validate): a message over them refuses its
	// conversation. The zero value is chatmem.DefaultLimits, the server's
	// defaults; a server run with larger limits passes its own, and
	// Migrate, which copies what a store holds, passes chatmem.NoLimits.
	// MaxBatch plays no part.
	Limits chatmem.Limits
	// MaxLineBytes bounds one line: a longer line refuses its
	// conversation (or its user) and the import goes on with the next.
	// Zero: the longest message record a message within Limits can make
	// (MaxLineBytes), and at least 16 MiB; negative: no bound.
	MaxLineBytes int
	// Tokenizer, if set, checks the tokenizer a conversation record
	// names, as the API resolves it (chatmem.Memory.Counter): a
	// conversation whose tokenizer it refuses is refused, since no append
	// to it could be counted. The name is always checked to be an ID
	// (chatmem.ValidateID).
	Tokenizer func(name string) error
}

// MaxLineBytes returns the longest line an export of messages within l
// can hold: every byte of their text may take six in JSON (a control
// character is written \u0001), plus the record's own fields. A negative
// limit among those that bound text gives -1, no bound.
func MaxLineBytes(l chatmem.Limits) int {
	d := chatmem.DefaultLimits
	pick := func(v, def int) int {
		if v == 0 {
			return def
		}
		return v
	}
	content, args, meta, names := pick(l.MaxContentBytes, d.MaxContentBytes), pick(l.MaxArgumentsBytes, d.MaxArgumentsBytes),
		pick(l.MaxMetadataBytes, d.MaxMetadataBytes), pick(l.MaxNameBytes, d.MaxNameBytes)
	calls, entries := pick(l.MaxToolCalls, d.MaxToolCalls), pick(l.MaxMetadata, d.MaxMetadata)
	if content < 0 || args < 0 || meta < 0 || names < 0 || calls < 0 || entries < 0 {
		return -1
	}
	// A tool call's id and function name are names (its type is not
	// bounded by the limits: a kilobyte is allowed for it), and so are
	// the message's name and tool_call_id.
	text := content + args + meta + (2+2*calls)*names + calls*1024
	framing := calls*64 + entries*8 + 4096
	return 6*text + framing
}

// minLineBytes is the least MaxLineBytes's zero value allows, the bound of
// earlier versions: a user's record, which holds every value of every fact
// of the user, is not bounded by the message limits.
const minLineBytes = 16 << 20

// errConflictStop is what Import's error under ConflictFail wraps, with
// chatmem.ErrConflict.
var errConflictStop = errors.New("import stopped at a conflict (on-conflict fail)")

// Import reads a chatmem/v1 file from r into the tenant's conversations of
// st, one conversation at a time, and calls each (if set) with what it did
// with each one; an error from each stops the import.
//
// Each conversation's records are checked before anything of it is
// written, against the limits and invariants the API keeps: every line
// valid UTF-8 (chatmem.CheckJSONText) and within MaxLineBytes, strict
// JSON, messages within Limits, token counts that fit their text (see
// docs/export-format.md) and add up, times that every store keeps, in
// order, and that an import can write back, a tokenizer that resolves. A
// conversation with a malformed, over-long or inconsistent line is
// refused whole (StatusInvalid), the line named, and the import goes on
// with the next conversation; the header must be right, or nothing is
// read.
//
// It is idempotent: a conversation the store already holds exactly is
// left alone (StatusUnchanged), so running an import twice changes
// nothing; and it resumes: a conversation that an interrupted import left
// part-written (its messages a prefix of the file's, then its summary,
// and no facts yet, since they are written last and at once) is finished
// (StatusResumed).
//
// A store error stops the import and is returned; what was written before
// stays, and a rerun continues from there.
func Import(ctx context.Context, st chatmem.Store, tenant string, r io.Reader, opts ImportOptions, each func(Result) error) (Totals, error) {
	var totals Totals
	if err := chatmem.ValidateID(tenant); err != nil {
		return totals, fmt.Errorf("tenant: %w", err)
	}
	if opts.OnConflict == "" {
		opts.OnConflict = ConflictSkip
	}
	if _, err := ParseConflict(string(opts.OnConflict)); err != nil {
		return totals, err
	}
	if opts.MaxLineBytes == 0 {
		opts.MaxLineBytes = MaxLineBytes(opts.Limits)
		if opts.MaxLineBytes >= 0 {
			opts.MaxLineBytes = max(opts.MaxLineBytes, minLineBytes)
		}
	}
	lr := &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: opts.MaxLineBytes}
	im := &importer{st: st, tenant: tenant, opts: opts, started: time.Now()}
	defer im.sp.reset()

	line := 1
	first, err := lr.next()
	if err == io.EOF {
		return totals, &LineError{Line: 1, Err: errors.New("empty input: want the header {\"format\":\"" + Format + "\"}")}
	}
	if err != nil {
		return totals, fmt.Errorf("line 1: %w", err)
	}
	var h Header
	if first.over || decodeStrict(first.b, &h) != nil || h.Format != Format {
		return totals, &LineError{Line: 1, Err: fmt.Errorf("want the header {\"format\":%q}, got %.80q", Format, first.b)}
	}

	report := func(res Result) error {
		totals.add(res)
		if each != nil {
			if err := each(res); err != nil {
				return err
			}
		}
		if res.Status == StatusConflict && opts.OnConflict == ConflictFail {
			if res.User != "" {
				return fmt.Errorf("%w: user %s (line %d): %w", chatmem.ErrConflict, res.User, res.Line, errConflictStop)
			}
			return fmt.Errorf("%w: conversation %s (line %d): %w", chatmem.ErrConflict, res.Conversation, res.Line, errConflictStop)
		}
		return nil
	}
	finish := func() error {
		if im.block == nil {
			return nil
		}
		res, err := im.finish(ctx)
		if err != nil {
			return err
		}
		return report(res)
	}
	for {
		ln, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return totals, fmt.Errorf("line %d: %w", line+1, err)
		}
		line++
		b := bytes.TrimSpace(ln.b)
		if len(b) == 0 && !ln.over {
			continue
		}
		typ, id := recordType(b, ln.over)
		// A line too long to hold, or text that decoding would rewrite,
		// is a fault of the record it belongs to.
		var fault error
		if ln.over {
			fault = fmt.Errorf("%w: the line is %d bytes, over the limit of %d", chatmem.ErrTooLarge, ln.size, opts.MaxLineBytes)
		} else if err := chatmem.CheckJSONText(b); err != nil {
			fault = err
		}
		switch typ {
		case TypeUser:
			// A user's record stands alone: it ends the block before it.
			if err := finish(); err != nil {
				return totals, err
			}
			var res Result
			if fault != nil {
				res = Result{User: cmp.Or(id, "?"), Line: line, Status: StatusInvalid, Error: (&LineError{Line: line, Err: fault}).Error()}
			} else if res, err = im.user(ctx, line, b); err != nil {
				return totals, err
			}
			if err := report(res); err != nil {
				return totals, err
			}
			continue
		case TypeConversation:
			if err := finish(); err != nil {
				return totals, err
			}
			im.start(line)
			if fault != nil {
				im.block.conv.ID = id
			}
		}
		if fault != nil {
			im.fault(line, fault)
			continue
		}
		if err := im.add(line, b); err != nil {
			return totals, err
		}
	}
	return totals, finish()
}

// recordType returns the type of the record on a line and its id, if it
// has one; of a line cut short (partial), from the fields its start
// holds.
func recordType(b []byte, partial bool) (typ, id string) {
	if !partial {
		var probe struct {
			Type string `json:"type"`
			ID   string `json:"id"`
		}
		if json.Unmarshal(b, &probe) != nil {
			return "", ""
		}
		typ, id = probe.Type, probe.ID
	} else {
		field := func(name string) string {
			_, rest, ok := bytes.Cut(b, []byte(`"`+name+`":"`))
			v, _, closed := bytes.Cut(rest, []byte(`"`))
			if !ok || !closed {
				return ""
			}
			return string(v)
		}
		typ, id = field("type"), field("id")
	}
	if chatmem.ValidateID(id) != nil {
		id = ""
	}
	return typ, id
}

// probeBytes is how much of an over-long line the import keeps, to tell
// whose record it is.
const probeBytes = 4 << 10

// lineReader reads an import's lines, each up to max bytes (negative: no
// bound). A longer line is read to its end and dropped: its length and
// its first probeBytes are kept, so that the import can say whose record
// it was and go on with the next line.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

// rawLine is one line, without its newline. b is valid until the next
// read.
type rawLine struct {
	b    []byte // the line; of an over-long one, its start
	size int64
	over bool
}

// next returns the next line, or io.EOF after the last.
func (lr *lineReader) next() (rawLine, error) {
	lr.buf = lr.buf[:0]
	var ln rawLine
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		ln.size += int64(len(chunk))
		switch {
		case !ln.over && lr.max >= 0 && ln.size > int64(lr.max):
			ln.over = true
			fallthrough
		case ln.over:
			if len(lr.buf) < probeBytes {
				lr.buf = append(lr.buf, chunk[:min(len(chunk), probeBytes-len(lr.buf))]...)
			}
		default:
			lr.buf = append(lr.buf, chunk...)
		}
		switch {
		case err == nil:
			ln.b = lr.buf
			return ln, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && ln.size > 0:
			ln.b = lr.buf
			return ln, nil
		default:
			return rawLine{}, err
		}
	}
}

// block is one conversation of the file being read: what its records say,
// checked as they arrive.
type block struct {
	line int // its conversation record's
	conv ConversationRecord
	// bad is the first fault found; the rest of the block is skipped.
	bad     *LineError
	seq     int64 // the last message's
	tokens  int64
	system  int64
	turns   int64
	summary *SummaryRecord
	facts   int
	lastKey string // the last fact's key: facts come ordered by key
	digest  hash.Hash
}

type importer struct {
	st     chatmem.Store
	tenant string
	opts   ImportOptions
	block  *block
	sp     spool

	// started is when the import began: it cannot re-create a
	// conversation of a user erased since (AppendOptions.Started).
	started time.Time
}

func (im *importer) start(line int) {
	im.sp.reset()
	im.block = &block{line: line, digest: sha256.New()}
}

// add checks one line of the current block and spools its canonical form.
// Only a failure to spool is returned; a fault of the line marks the block.
func (im *importer) add(line int, b []byte) error {
	bl := im.block
	if bl == nil {
		im.fault(line, errors.New("a record before any conversation record"))
		return nil
	}
	if bl.bad != nil {
		return nil
	}
	canon, err := im.check(bl, b)
	if err != nil {
		im.fault(line, err)
		return nil
	}
	bl.digest.Write(canon)
	bl.digest.Write([]byte{'\n'})
	return im.sp.add(canon)
}

// fault marks the current block (or, before any, a block of its own)
// refused for err at line, unless it already is.
func (im *importer) fault(line int, err error) {
	if im.block == nil {
		im.block = &block{line: line, digest: sha256.New()}
	}
	if im.block.bad == nil {
		im.block.bad = &LineError{Line: line, Err: err}
		im.sp.reset()
	}
}

// Token counts an import accepts, as the counters make them: at most one
// token per byte of a message's text, plus the chat format's framing
// (tokensFraming, and tokensPerCall for each tool call), and at least
// one per tokensMinBytes of text. No tokenizer's token is longer than
// that; a count outside the range was not made by one, and would let a
// message into windows its text does not fit, or push a conversation's
// running total past int64.
const (
	tokensFraming  = 1024
	tokensPerCall  = 256
	tokensMinBytes = 1024
)

// checkTokens checks a count of tokens against the text it counts.
func checkTokens(what string, tokens, text, calls int) error {
	lo, hi := text/tokensMinBytes, text+tokensFraming+calls*tokensPerCall
	if tokens < lo || tokens > hi {
		return fmt.Errorf("%w: %s has %d tokens for %d bytes of text: want %d to %d", chatmem.ErrInvalid, what, tokens, text, lo, hi)
	}
	return nil
}

// messageText is the bytes of text a counter counts in m.
func messageText(m chatmem.Message) int {
	n := len(m.Content) + len(m.Name) + len(m.ToolCallID)
	for _, c := range m.ToolCalls {
		n += len(c.ID) + len(c.Type) + len(c.Function.Name) + len(c.Function.Arguments)
	}
	return n
}

// checkTime checks a time a store will keep: set, and within
// chatmem.MinTime..MaxTime.
func checkTime(field string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%w: %s is missing", chatmem.ErrInvalid, field)
	}
	return chatmem.ValidateTime(field, t)
}

// check decodes one record of the block, checks it against the limits
// and against what came before, and returns its canonical line.
func (im *importer) check(bl *block, b []byte) ([]byte, error) {
	var probe struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	switch probe.Type {
	case TypeConversation:
		var c ConversationRecord
		if err := decodeStrict(b, &c); err != nil {
			return nil, fmt.Errorf("conversation record: %v", err)
		}
		if err := chatmem.ValidateID(c.ID); err != nil {
			return nil, fmt.Errorf("conversation id: %v", err)
		}
		bl.conv.ID = c.ID
		if c.User != "" {
			if err := chatmem.ValidateUser(c.User); err != nil {
				return nil, fmt.Errorf("user: %v", err)
			}
		}
		if c.Tokenizer == "" || c.CreatedAt.IsZero() || c.UpdatedAt.IsZero() || c.LastSeq < 1 {
			return nil, errors.New("conversation record needs id, tokenizer, created_at, updated_at and a last_seq of at least 1")
		}
		if err := chatmem.ValidateID(c.Tokenizer); err != nil {
			return nil, fmt.Errorf("tokenizer: %v", err)
		}
		if im.opts.Tokenizer != nil {
			if err := im.opts.Tokenizer(c.Tokenizer); err != nil {
				return nil, fmt.Errorf("tokenizer: %v", err)
			}
		}
		c.CreatedAt, c.UpdatedAt, c.ExpiresAt = stamp(c.CreatedAt), stamp(c.UpdatedAt), stamp(c.ExpiresAt)
		if err := checkConversationTimes(c); err != nil {
			return nil, err
		}
		bl.conv = c
		return marshalLine(c)
	case TypeMessage:
		if bl.summary != nil || bl.facts > 0 {
			return nil, errors.New("a message after the summary or facts (messages come first)")
		}
		m, receipt, err := decodeMessage(b)
		if err != nil {
			return nil, fmt.Errorf("message record: %v", err)
		}
		if m.Seq != bl.seq+1 {
			return nil, fmt.Errorf("message seq %d, want %d (dense, in order)", m.Seq, bl.seq+1)
		}
		if m.Seq > bl.conv.LastSeq {
			return nil, fmt.Errorf("message seq %d is past the conversation's last_seq %d", m.Seq, bl.conv.LastSeq)
		}
		if err := m.Validate(im.opts.Limits); err != nil {
			return nil, fmt.Errorf("message %d: %w", m.Seq, err)
		}
		if err := checkTime(fmt.Sprintf("message %d created_at", m.Seq), m.CreatedAt); err != nil {
			return nil, err
		}
		if err := checkTokens(fmt.Sprintf("message %d", m.Seq), m.Tokens, messageText(m), len(m.ToolCalls)); err != nil {
			return nil, err
		}
		bl.seq = m.Seq
		total := &bl.tokens
		switch m.Role {
		case chatmem.RoleSystem:
			total = &bl.system
		case chatmem.RoleUser:
			bl.turns++
		}
		if *total > math.MaxInt64-int64(m.Tokens) {
			return nil, fmt.Errorf("%w: message %d: the conversation's tokens overflow", chatmem.ErrInvalid, m.Seq)
		}
		*total += int64(m.Tokens)
		return messageLine(m, receipt)
	case TypeSummary:
		if bl.summary != nil || bl.facts > 0 {
			return nil, errors.New("a second summary, or a summary after the facts")
		}
		var s SummaryRecord
		if err := decodeStrict(b, &s); err != nil {
			return nil, fmt.Errorf("summary record: %v", err)
		}
		if s.Text == "" || s.CoversSeq < 1 || s.CoversSeq > bl.conv.LastSeq {
			return nil, fmt.Errorf("summary needs text and covers_seq in 1..%d", bl.conv.LastSeq)
		}
		if strings.ContainsRune(s.Text, 0) || strings.ContainsRune(s.Summarizer, 0) {
			return nil, fmt.Errorf("%w: summary contains a NUL character", chatmem.ErrInvalid)
		}
		if err := checkTokens("summary", s.Tokens, len(s.Text), 0); err != nil {
			return nil, err
		}
		if err := checkTime("summary created_at", s.CreatedAt); err != nil {
			return nil, err
		}
		s.CreatedAt = stamp(s.CreatedAt)
		bl.summary = &s
		return marshalLine(s)
	case TypeFact:
		var f FactRecord
		if err := decodeStrict(b, &f); err != nil {
			return nil, fmt.Errorf("fact record: %v", err)
		}
		if err := f.fact().Validate(); err != nil {
			return nil, err
		}
		if f.Key < bl.lastKey {
			return nil, fmt.Errorf("fact %q after %q: facts come ordered by key", f.Key, bl.lastKey)
		}
		if f.SourceSeq < 0 || f.SourceSeq > bl.conv.LastSeq {
			return nil, fmt.Errorf("fact %q: source_seq %d is not a message of the conversation", f.Key, f.SourceSeq)
		}
		if err := checkTime(fmt.Sprintf("fact %q created_at", f.Key), f.CreatedAt); err != nil {
			return nil, err
		}
		f.CreatedAt = stamp(f.CreatedAt)
		bl.facts++
		bl.lastKey = f.Key
		return marshalLine(f)
	}
	return nil, fmt.Errorf("unknown record type %q", probe.Type)
}

// checkConversationTimes checks a conversation record's times (in the
// export's precision) as the stores keep them and as an import can write
// them back: each within chatmem.MinTime..MaxTime, updated_at not before
// created_at, and equal to it in a conversation of one message (its one
// append, which creates it, sets both), and an expiry after updated_at
// (an append sets it a positive TTL past its time).
func checkConversationTimes(c ConversationRecord) error {
	for _, t := range []struct {
		field string
		at    time.Time
	}{{"created_at", c.CreatedAt}, {"updated_at", c.UpdatedAt}, {"expires_at", c.ExpiresAt}} {
		if err := chatmem.ValidateTime(t.field, t.at); err != nil {
			return err
		}
	}
	switch {
	case c.UpdatedAt.Before(c.CreatedAt):
		return fmt.Errorf("%w: updated_at %s is before created_at %s", chatmem.ErrInvalid, c.UpdatedAt.Format(time.RFC3339Nano), c.CreatedAt.Format(time.RFC3339Nano))
	case c.LastSeq == 1 && !c.UpdatedAt.Equal(c.CreatedAt):
		return fmt.Errorf("%w: a conversation of one message has updated_at %s, not its created_at %s: the append that creates a conversation sets both",
			chatmem.ErrInvalid, c.UpdatedAt.Format(time.RFC3339Nano), c.CreatedAt.Format(time.RFC3339Nano))
	case !c.ExpiresAt.IsZero() && !c.ExpiresAt.After(c.UpdatedAt):
		return fmt.Errorf("%w: expires_at %s is not after updated_at %s", chatmem.ErrInvalid, c.ExpiresAt.Format(time.RFC3339Nano), c.UpdatedAt.Format(time.RFC3339Nano))
	}
	return nil
}

// complete reports a block whose records add up: every message present
// and the totals as the conversation record says.
func (bl *block) complete() error {
	c := bl.conv
	switch {
	case bl.seq != c.LastSeq:
		return fmt.Errorf("conversation %s has %d messages, its record says last_seq %d", c.ID, bl.seq, c.LastSeq)
	case bl.tokens != c.Tokens || bl.system != c.SystemTokens || bl.turns != c.Turns:
		return fmt.Errorf("conversation %s: its messages add up to tokens %d, system_tokens %d, turns %d; its record says %d, %d, %d",
			c.ID, bl.tokens, bl.system, bl.turns, c.Tokens, c.SystemTokens, c.Turns)
	}
	return nil
}

// finish writes the current block, if it checked out, and says what it did.
func (im *importer) finish(ctx context.Context) (Result, error) {
	bl := im.block
	im.block = nil
	defer im.sp.reset()
	res := Result{Conversation: bl.conv.ID, Line: bl.line}
	if bl.bad == nil {
		if err := bl.complete(); err != nil {
			bl.bad = &LineError{Line: bl.line, Err: err}
		}
	}
	if bl.bad != nil {
		res.Status, res.Line, res.Error = StatusInvalid, bl.bad.Line, bl.bad.Error()
		return res, nil
	}
	key := chatmem.Key{Tenant: im.tenant, ID: bl.conv.ID}
	want := hex.EncodeToString(bl.digest.Sum(nil))
	have, err := Digest(ctx, im.st, key)
	switch {
	case errors.Is(err, chatmem.ErrNotFound):
		res.Status = StatusCreated
		res.Messages, err = im.write(ctx, key, bl, written{})
		return res, err
	case err != nil:
		return res, err
	case have == want:
		res.Status = StatusUnchanged
		return res, nil
	}
	from, ok, err := im.resumable(ctx, key, bl)
	if err != nil {
		return res, err
	}
	if ok {
		res.Status = StatusResumed
		res.Messages, err = im.write(ctx, key, bl, from)
		return res, err
	}
	if im.opts.OnConflict != ConflictReplace {
		res.Status = StatusConflict
		res.Error = fmt.Sprintf("conversation %s exists with other content (digest %s, the file's %s)", key.ID, have, want)
		return res, nil
	}
	if err := im.st.Delete(ctx, key); err != nil && !errors.Is(err, chatmem.ErrNotFound) {
		return res, fmt.Errorf("replace %s: %w", key, err)
	}
	res.Status = StatusReplaced
	res.Messages, err = im.write(ctx, key, bl, written{})
	return res, err
}

// written is how far an interrupted import of a block got: its messages
// up to seq, and whether its summary was written.
type written struct {
	seq     int64
	summary bool
}

// resumable reports whether the stored conversation is what an interrupted
// import of bl leaves, and how far that got: the same conversation
// (tokenizer, user, creation), its messages a prefix of bl's; then, once
// every message is in, bl's summary or none; and no facts, which are
// written last, at once (SetFacts is atomic). A kill between any two
// writes of write leaves such a conversation.
func (im *importer) resumable(ctx context.Context, key chatmem.Key, bl *block) (written, bool, error) {
	var p written
	conv, err := im.st.Conversation(ctx, key)
	if err != nil {
		return p, false, err
	}
	if conv.Tokenizer != bl.conv.Tokenizer || conv.User != bl.conv.User || !stamp(conv.CreatedAt).Equal(bl.conv.CreatedAt) || conv.LastSeq > bl.conv.LastSeq {
		return p, false, nil
	}
	if ss, ok := im.st.(chatmem.SummaryStore); ok {
		s, err := ss.Summary(ctx, key)
		switch {
		case errors.Is(err, chatmem.ErrNotFound):
		case err != nil:
			return p, false, err
		case bl.summary == nil || conv.LastSeq != bl.conv.LastSeq:
			return p, false, nil // a summary the file has not, or one before the messages were in
		default:
			// The summary is written after every message: it is the file's,
			// or the conversation is another.
			stored, err := marshalLine(summaryRecord(s))
			if err != nil {
				return p, false, err
			}
			given, err := marshalLine(*bl.summary)
			if err != nil {
				return p, false, err
			}
			if !bytes.Equal(stored, given) {
				return p, false, nil
			}
			p.summary = true
		}
	}
	if fs, ok := im.st.(chatmem.FactStore); ok {
		if facts, err := fs.Facts(ctx, key); err != nil || len(facts) > 0 {
			return p, false, err
		}
	}
	rd, err := im.sp.reader()
	if err != nil {
		return p, false, err
	}
	if _, err := rd.ReadBytes('\n'); err != nil { // the conversation record
		return p, false, err
	}
	for p.seq < conv.LastSeq {
		msgs, err := im.st.Range(ctx, key, p.seq, min(pageSize, int(conv.LastSeq-p.seq)))
		if err != nil {
			return p, false, err
		}
		if len(msgs) == 0 {
			return p, false, nil
		}
		receipts, err := receiptsOf(ctx, im.st, key, msgs)
		if err != nil {
			return p, false, err
		}
		for _, m := range msgs {
			stored, err := messageLine(m, receipts[m.Seq])
			if err != nil {
				return p, false, err
			}
			given, err := rd.ReadBytes('\n')
			if err != nil || !bytes.Equal(stored, bytes.TrimSuffix(given, []byte{'\n'})) {
				return p, false, nil
			}
			p.seq++
		}
	}
	return p, true, nil
}

// batchMessages bounds one append of an import.
const batchMessages = 1000

// write appends bl's messages after those from holds, then its summary
// (unless from holds it) and facts, and returns how many messages it
// appended. Each append names the
// LastSeq it expects, so a concurrent writer makes it fail rather than
// interleave. The first append happens at the conversation's created_at
// and the last, alone, at its updated_at with its expiry, so the stored
// conversation has the file's times.
func (im *importer) write(ctx context.Context, key chatmem.Key, bl *block, from written) (int64, error) {
	rd, err := im.sp.reader()
	if err != nil {
		return 0, err
	}
	var batch []chatmem.Message
	var receipt []byte // of the batch's last message
	var summary *chatmem.Summary
	var facts []chatmem.Fact
	last := from.seq
	flush := func(final bool) error {
		if len(batch) == 0 {
			return nil
		}
		expect := last
		opts := chatmem.AppendOptions{ExpectedLastSeq: &expect, User: bl.conv.User, Tokenizer: bl.conv.Tokenizer, ExpectedTokenizer: bl.conv.Tokenizer, Now: bl.conv.UpdatedAt, Started: im.started}
		if receipt != nil {
			// Stored in chatmem's stored form.
			r, err := chatmem.DecodeReceipt(receipt)
			if err == nil {
				opts.Receipt, err = chatmem.EncodeReceipt(&r)
			}
			if err != nil {
				return fmt.Errorf("receipt of message %d of %s: %w", last+int64(len(batch)), key, err)
			}
		}
		if last == 0 {
			opts.Now = bl.conv.CreatedAt
		}
		if final && !bl.conv.ExpiresAt.IsZero() {
			if ttl := bl.conv.ExpiresAt.Sub(opts.Now); ttl > 0 {
				opts.TTL = ttl
			}
		}
		if _, err := im.st.Append(ctx, key, batch, opts); err != nil {
			return fmt.Errorf("append messages %d..%d to %s: %w", last+1, last+int64(len(batch)), key, err)
		}
		last += int64(len(batch))
		batch, receipt = batch[:0], nil
		return nil
	}
	for {
		line, err := rd.ReadBytes('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			return last - from.seq, err
		}
		var probe struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return last - from.seq, err
		}
		switch probe.Type {
		case TypeMessage:
			m, rc, err := decodeMessage(line)
			if err != nil {
				return last - from.seq, err
			}
			if m.Seq <= from.seq {
				continue
			}
			// The first message alone opens the conversation at its
			// created_at; the last alone closes it at its updated_at.
			if m.Seq == 2 || m.Seq == bl.conv.LastSeq || len(batch) == batchMessages {
				if err := flush(false); err != nil {
					return last - from.seq, err
				}
			}
			batch = append(batch, m)
			if rc != nil {
				// A receipt is stored with the last message of an append:
				// its message ends the batch (the conversation's last
				// ends it anyway).
				receipt = rc
				if m.Seq != bl.conv.LastSeq {
					if err := flush(false); err != nil {
						return last - from.seq, err
					}
				}
			}
		case TypeSummary:
			var s SummaryRecord
			if err := json.Unmarshal(line, &s); err != nil {
				return last - from.seq, err
			}
			sum := s.summary()
			summary = &sum
		case TypeFact:
			var f FactRecord
			if err := json.Unmarshal(line, &f); err != nil {
				return last - from.seq, err
			}
			facts = append(facts, f.fact())
		}
	}
	if err := flush(true); err != nil {
		return last - from.seq, err
	}
	if summary != nil && !from.summary {
		ss, ok := im.st.(chatmem.SummaryStore)
		if !ok {
			return last - from.seq, fmt.Errorf("%w: the store keeps no summaries", chatmem.ErrInvalid)
		}
		if err := ss.PutSummary(ctx, key, *summary, 0); err != nil {
			return last - from.seq, fmt.Errorf("summary of %s: %w", key, err)
		}
	}
	if len(facts) > 0 {
		fs, ok := im.st.(chatmem.FactStore)
		if !ok {
			return last - from.seq, fmt.Errorf("%w: the store keeps no facts", chatmem.ErrInvalid)
		}
		if err := fs.SetFacts(ctx, key, facts); err != nil {
			return last - from.seq, fmt.Errorf("facts of %s: %w", key, err)
		}
	}
	return last - from.seq, nil
}

// checkUser decodes a user's record and checks it: a valid user ID, and
// facts that pass Fact.Validate, ordered by key, each with a created_at
// within the range the stores keep, and a valid conversation if it names
// one. It returns the record in its
// canonical form.
func checkUser(b []byte) (UserRecord, error) {
	var u UserRecord
	if err := decodeStrict(b, &u); err != nil {
		return u, fmt.Errorf("user record: %v", err)
	}
	if err := chatmem.ValidateUser(u.ID); err != nil {
		return u, fmt.Errorf("user id: %v", err)
	}
	if len(u.Facts) == 0 {
		return u, fmt.Errorf("user %s: a user record needs at least one fact", u.ID)
	}
	for i, f := range u.Facts {
		if err := f.fact().Validate(); err != nil {
			return u, fmt.Errorf("user %s: %v", u.ID, err)
		}
		if i > 0 && f.Key < u.Facts[i-1].Key {
			return u, fmt.Errorf("user %s: fact %q after %q: facts come ordered by key", u.ID, f.Key, u.Facts[i-1].Key)
		}
		if f.Conversation != "" {
			if err := chatmem.ValidateID(f.Conversation); err != nil {
				return u, fmt.Errorf("user %s: fact %q: conversation: %v", u.ID, f.Key, err)
			}
		}
		if f.SourceSeq < 0 || f.CreatedAt.IsZero() {
			return u, fmt.Errorf("user %s: fact %q needs created_at and a source_seq >= 0", u.ID, f.Key)
		}
		if err := chatmem.ValidateTime(fmt.Sprintf("user %s: fact %q created_at", u.ID, f.Key), f.CreatedAt); err != nil {
			return u, err
		}
		u.Facts[i].CreatedAt = stamp(f.CreatedAt)
	}
	return u, nil
}

// user imports one user's record: it sets the user's facts, in the order
// of the file, in one SetDerivedUserFacts with the import's start, so a
// user is written whole or not at all, and not at all if the user was
// erased since the import started (reported as a conflict: the import
// must not bring an erased user back; it goes on with the next record).
// A user whose facts the store holds exactly is unchanged; one with other
// facts is a conflict, or under ConflictReplace has its facts replaced by
// the file's in the same atomic write (its conversations are left as they
// are).
func (im *importer) user(ctx context.Context, line int, b []byte) (Result, error) {
	res := Result{Line: line}
	u, err := checkUser(b)
	res.User = u.ID
	if err != nil {
		if res.User == "" {
			res.User = "?"
		}
		res.Status, res.Error = StatusInvalid, (&LineError{Line: line, Err: err}).Error()
		return res, nil
	}
	us, ok := im.st.(chatmem.UserStore)
	if !ok {
		return res, fmt.Errorf("%w: the store keeps no users", chatmem.ErrInvalid)
	}
	key := chatmem.Key{Tenant: im.tenant, ID: u.ID}
	want, err := marshalLine(u)
	if err != nil {
		return res, err
	}
	have, found, err := readUser(ctx, im.st, key)
	if err != nil {
		return res, err
	}
	facts := make([]chatmem.Fact, len(u.Facts))
	for i, f := range u.Facts {
		facts[i] = f.fact()
	}
	res.Status = StatusCreated
	if found {
		stored, err := marshalLine(have)
		if err != nil {
			return res, err
		}
		if bytes.Equal(stored, want) {
			res.Status = StatusUnchanged
			return res, nil
		}
		if im.opts.OnConflict != ConflictReplace {
			res.Status = StatusConflict
			res.Error = fmt.Sprintf("user %s exists with other facts", u.ID)
			return res, nil
		}
		res.Status = StatusReplaced
	}
	err = us.SetDerivedUserFacts(ctx, chatmem.DerivedUserFacts{User: key, Started: im.started, Replace: found, Facts: facts})
	if errors.Is(err, chatmem.ErrErased) {
		res.Status, res.Error = StatusConflict, fmt.Sprintf("user %s was erased after the import started: %v", u.ID, err)
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("facts of user %s: %w", key, err)
	}
	return res, nil
}

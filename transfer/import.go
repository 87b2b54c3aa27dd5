package transfer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
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
	// MaxLineBytes bounds one line. Zero: 16 MiB.
	MaxLineBytes int
}

// errConflictStop is what Import's error under ConflictFail wraps, with
// chatmem.ErrConflict.
var errConflictStop = errors.New("import stopped at a conflict (on-conflict fail)")

// Import reads a chatmem/v1 file from r into the tenant's conversations of
// st, one conversation at a time, and calls each (if set) with what it did
// with each one; an error from each stops the import.
//
// It is idempotent: a conversation the store already holds exactly is
// left alone (StatusUnchanged), so running an import twice changes nothing,
// and one that an interrupted import left part-written (its messages a
// prefix of the file's, no summary or facts yet) is finished
// (StatusResumed). A conversation with a malformed or inconsistent line is
// refused whole, the line named, and the import goes on with the next
// conversation; the header must be right, or nothing is read. Each
// conversation's records are checked before anything of it is written.
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
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = 16 << 20
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), opts.MaxLineBytes)
	im := &importer{st: st, tenant: tenant, opts: opts, started: time.Now()}
	defer im.sp.reset()

	line := 0
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return totals, fmt.Errorf("line 1: %w", err)
		}
		return totals, &LineError{Line: 1, Err: errors.New("empty input: want the header {\"format\":\"" + Format + "\"}")}
	}
	line++
	var h Header
	if err := decodeStrict(sc.Bytes(), &h); err != nil || h.Format != Format {
		return totals, &LineError{Line: 1, Err: fmt.Errorf("want the header {\"format\":%q}, got %.80q", Format, sc.Bytes())}
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
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var probe struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &probe); err == nil && probe.Type == TypeUser {
			// A user's record stands alone: it ends the block before it.
			if err := finish(); err != nil {
				return totals, err
			}
			res, err := im.user(ctx, line, b)
			if err != nil {
				return totals, err
			}
			if err := report(res); err != nil {
				return totals, err
			}
			continue
		}
		if err := json.Unmarshal(b, &probe); err == nil && probe.Type == TypeConversation {
			if err := finish(); err != nil {
				return totals, err
			}
			im.start(line)
		}
		if err := im.add(line, b); err != nil {
			return totals, err
		}
	}
	if err := sc.Err(); err != nil {
		return totals, fmt.Errorf("line %d: %w", line+1, err)
	}
	return totals, finish()
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

// noLimits checks a stored message's shape without the API's size limits:
// what a store holds is imported as it is.
var noLimits = chatmem.Limits{MaxContentBytes: -1, MaxToolCalls: -1, MaxBatch: -1, MaxMetadata: -1}

// add checks one line of the current block and spools its canonical form.
// Only a failure to spool is returned; a fault of the line marks the block.
func (im *importer) add(line int, b []byte) error {
	bl := im.block
	if bl == nil {
		im.block = &block{line: line, digest: sha256.New(), bad: &LineError{Line: line, Err: errors.New("a record before any conversation record")}}
		return nil
	}
	if bl.bad != nil {
		return nil
	}
	canon, err := bl.check(b)
	if err != nil {
		bl.bad = &LineError{Line: line, Err: err}
		im.sp.reset()
		return nil
	}
	bl.digest.Write(canon)
	bl.digest.Write([]byte{'\n'})
	return im.sp.add(canon)
}

// check decodes one record of the block, checks it against what came
// before, and returns its canonical line.
func (bl *block) check(b []byte) ([]byte, error) {
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
		if c.User != "" {
			if err := chatmem.ValidateID(c.User); err != nil {
				return nil, fmt.Errorf("user: %v", err)
			}
		}
		if c.Tokenizer == "" || c.CreatedAt.IsZero() || c.UpdatedAt.IsZero() || c.LastSeq < 1 {
			return nil, errors.New("conversation record needs id, tokenizer, created_at, updated_at and a last_seq of at least 1")
		}
		c.CreatedAt, c.UpdatedAt, c.ExpiresAt = stamp(c.CreatedAt), stamp(c.UpdatedAt), stamp(c.ExpiresAt)
		bl.conv = c
		return json.Marshal(c)
	case TypeMessage:
		if bl.summary != nil || bl.facts > 0 {
			return nil, errors.New("a message after the summary or facts (messages come first)")
		}
		m, err := decodeMessage(b)
		if err != nil {
			return nil, fmt.Errorf("message record: %v", err)
		}
		if m.Seq != bl.seq+1 {
			return nil, fmt.Errorf("message seq %d, want %d (dense, in order)", m.Seq, bl.seq+1)
		}
		if m.Seq > bl.conv.LastSeq {
			return nil, fmt.Errorf("message seq %d is past the conversation's last_seq %d", m.Seq, bl.conv.LastSeq)
		}
		if err := m.Validate(noLimits); err != nil {
			return nil, fmt.Errorf("message %d: %v", m.Seq, err)
		}
		if m.Tokens < 0 || m.CreatedAt.IsZero() {
			return nil, fmt.Errorf("message %d needs created_at and tokens >= 0", m.Seq)
		}
		bl.seq = m.Seq
		switch m.Role {
		case chatmem.RoleSystem:
			bl.system += int64(m.Tokens)
		case chatmem.RoleUser:
			bl.turns++
			bl.tokens += int64(m.Tokens)
		default:
			bl.tokens += int64(m.Tokens)
		}
		return messageLine(m)
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
		s.CreatedAt = stamp(s.CreatedAt)
		bl.summary = &s
		return json.Marshal(s)
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
		f.CreatedAt = stamp(f.CreatedAt)
		bl.facts++
		bl.lastKey = f.Key
		return json.Marshal(f)
	}
	return nil, fmt.Errorf("unknown record type %q", probe.Type)
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
		res.Messages, err = im.write(ctx, key, bl, 0)
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
	res.Messages, err = im.write(ctx, key, bl, 0)
	return res, err
}

// resumable reports whether the stored conversation is what an interrupted
// import of bl leaves: the same conversation (tokenizer, creation), its
// messages a prefix of bl's, its summary and facts either absent or bl's.
// It returns the stored LastSeq.
func (im *importer) resumable(ctx context.Context, key chatmem.Key, bl *block) (int64, bool, error) {
	conv, err := im.st.Conversation(ctx, key)
	if err != nil {
		return 0, false, err
	}
	if conv.Tokenizer != bl.conv.Tokenizer || conv.User != bl.conv.User || !stamp(conv.CreatedAt).Equal(bl.conv.CreatedAt) || conv.LastSeq > bl.conv.LastSeq {
		return 0, false, nil
	}
	if ss, ok := im.st.(chatmem.SummaryStore); ok {
		if _, err := ss.Summary(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
			return 0, false, err // a summary: only a finished import writes one
		}
	}
	if fs, ok := im.st.(chatmem.FactStore); ok {
		if facts, err := fs.Facts(ctx, key); err != nil || len(facts) > 0 {
			return 0, false, err
		}
	}
	rd, err := im.sp.reader()
	if err != nil {
		return 0, false, err
	}
	if _, err := rd.ReadBytes('\n'); err != nil { // the conversation record
		return 0, false, err
	}
	var n int64
	for n < conv.LastSeq {
		msgs, err := im.st.Range(ctx, key, n, min(pageSize, int(conv.LastSeq-n)))
		if err != nil {
			return 0, false, err
		}
		if len(msgs) == 0 {
			return 0, false, nil
		}
		for _, m := range msgs {
			stored, err := messageLine(m)
			if err != nil {
				return 0, false, err
			}
			given, err := rd.ReadBytes('\n')
			if err != nil || !bytes.Equal(stored, bytes.TrimSuffix(given, []byte{'\n'})) {
				return 0, false, nil
			}
			n++
		}
	}
	return conv.LastSeq, true, nil
}

// batchMessages bounds one append of an import.
const batchMessages = 1000

// write appends bl's messages after seq from, then its summary and facts,
// and returns how many messages it appended. Each append names the
// LastSeq it expects, so a concurrent writer makes it fail rather than
// interleave. The first append happens at the conversation's created_at
// and the last, alone, at its updated_at with its expiry, so the stored
// conversation has the file's times.
func (im *importer) write(ctx context.Context, key chatmem.Key, bl *block, from int64) (int64, error) {
	rd, err := im.sp.reader()
	if err != nil {
		return 0, err
	}
	var batch []chatmem.Message
	var summary *chatmem.Summary
	var facts []chatmem.Fact
	last := from
	flush := func(final bool) error {
		if len(batch) == 0 {
			return nil
		}
		expect := last
		opts := chatmem.AppendOptions{ExpectedLastSeq: &expect, User: bl.conv.User, Tokenizer: bl.conv.Tokenizer, ExpectedTokenizer: bl.conv.Tokenizer, Now: bl.conv.UpdatedAt, Started: im.started}
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
		batch = batch[:0]
		return nil
	}
	for {
		line, err := rd.ReadBytes('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			return last - from, err
		}
		var probe struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return last - from, err
		}
		switch probe.Type {
		case TypeMessage:
			m, err := decodeMessage(line)
			if err != nil {
				return last - from, err
			}
			if m.Seq <= from {
				continue
			}
			// The first message alone opens the conversation at its
			// created_at; the last alone closes it at its updated_at.
			if m.Seq == 2 || m.Seq == bl.conv.LastSeq || len(batch) == batchMessages {
				if err := flush(false); err != nil {
					return last - from, err
				}
			}
			batch = append(batch, m)
		case TypeSummary:
			var s SummaryRecord
			if err := json.Unmarshal(line, &s); err != nil {
				return last - from, err
			}
			sum := s.summary()
			summary = &sum
		case TypeFact:
			var f FactRecord
			if err := json.Unmarshal(line, &f); err != nil {
				return last - from, err
			}
			facts = append(facts, f.fact())
		}
	}
	if err := flush(true); err != nil {
		return last - from, err
	}
	if summary != nil {
		ss, ok := im.st.(chatmem.SummaryStore)
		if !ok {
			return last - from, fmt.Errorf("%w: the store keeps no summaries", chatmem.ErrInvalid)
		}
		if err := ss.PutSummary(ctx, key, *summary, 0); err != nil {
			return last - from, fmt.Errorf("summary of %s: %w", key, err)
		}
	}
	if len(facts) > 0 {
		fs, ok := im.st.(chatmem.FactStore)
		if !ok {
			return last - from, fmt.Errorf("%w: the store keeps no facts", chatmem.ErrInvalid)
		}
		if err := fs.SetFacts(ctx, key, facts); err != nil {
			return last - from, fmt.Errorf("facts of %s: %w", key, err)
		}
	}
	return last - from, nil
}

// checkUser decodes a user's record and checks it: a valid user ID, and
// facts that pass Fact.Validate, ordered by key, each with a created_at
// and a valid conversation if it names one. It returns the record in its
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
		u.Facts[i].CreatedAt = stamp(f.CreatedAt)
	}
	return u, nil
}

// user imports one user's record: it sets the user's facts, in the order
// of the file, in one SetUserFacts, so a user is written whole or not at
// all. A user whose facts the store holds exactly is unchanged; one with
// other facts is a conflict, or under ConflictReplace has its facts
// replaced by the file's (its conversations are left as they are): in one
// atomic ReplaceUserFacts where the store has it
// (chatmem.UserFactReplacer), else by deleting each fact and then writing.
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
	want, err := json.Marshal(u)
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
		stored, err := json.Marshal(have)
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
		if ur, ok := im.st.(chatmem.UserFactReplacer); ok {
			if err := ur.ReplaceUserFacts(ctx, key, facts); err != nil {
				return res, fmt.Errorf("replace user %s: %w", key, err)
			}
			return res, nil
		}
		// A store that cannot replace atomically: delete, then write. A
		// failure in between leaves the user without the facts deleted
		// (docs/export-format.md says so); a rerun writes the file's.
		current, err := us.UserFacts(ctx, key)
		if err != nil {
			return res, fmt.Errorf("replace user %s: %w", key, err)
		}
		for _, f := range current {
			if err := us.DeleteUserFact(ctx, key, f.Key); err != nil && !errors.Is(err, chatmem.ErrNotFound) {
				return res, fmt.Errorf("replace user %s: %w", key, err)
			}
		}
	}
	if err := us.SetUserFacts(ctx, key, facts); err != nil {
		return res, fmt.Errorf("facts of user %s: %w", key, err)
	}
	return res, nil
}

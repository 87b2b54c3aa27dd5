package redis

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

// DefaultPrefix is the key prefix of a zero Options.
const DefaultPrefix = "chatmem"

// Options configure a Store. The zero value means the defaults.
type Options struct {
	// Prefix starts every key the store writes ("chatmem" if empty): stores
	// with different prefixes share a Redis without seeing each other's data.
	// It is 1 to 64 characters from [A-Za-z0-9._-].
	Prefix string
	// Now is the clock reads compare expiry times with, and the default time
	// of an append. Nil: time.Now.
	Now func() time.Time
	// Logger receives what the store cannot return: a failure to index a
	// conversation after its append was stored. Nil: discarded.
	Logger *slog.Logger
	// Hooks are added to the client Open makes (go-redis's AddHook), in
	// order, before its first command: to trace, time or count what the
	// store sends (ProcessHook sees each command sent alone, one round
	// trip each; ProcessPipelineHook each pipeline, one round trip for
	// all of its commands). New leaves its caller's client as it is.
	Hooks []goredis.Hook
}

// Store is a chatmem.Store on Redis. It is safe for concurrent use by many
// goroutines and many processes.
type Store struct {
	client goredis.UniversalClient
	owned  bool // Close closes client
	prefix string
	now    func() time.Time
	log    *slog.Logger
	hint   tailHint
	// usersListed is set once the tenants' sets of users are known to
	// name every user (users.go: listUsersOnce).
	usersListed atomic.Bool
	// eraseStep and admitted, if set (by tests), are called between
	// DeleteUser's steps and between an append's admission and its
	// script (erasure.go).
	eraseStep, admitted func()
}

var (
	_ chatmem.Store        = (*Store)(nil)
	_ chatmem.Purger       = (*Store)(nil)
	_ chatmem.Searcher     = (*Store)(nil)
	_ chatmem.IndexCatcher = (*Store)(nil)
	_ chatmem.SinceReader  = (*Store)(nil)
	_ chatmem.TailAppender = (*Store)(nil)
)

// New returns a Store over client, which may be a *goredis.Client, a
// *goredis.ClusterClient or a failover client. The caller keeps ownership
// of client: Close does not close it.
func New(client goredis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: redis.New needs a client", chatmem.ErrInvalid)
	}
	prefix := cmp.Or(opts.Prefix, DefaultPrefix)
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	s := &Store{client: client, prefix: prefix, now: opts.Now, log: opts.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Open connects to the Redis named by rawURL and returns a Store that owns
// the connection (Close closes it). It accepts
//
//	redis://[user:password@]host:port[/db][?options]
//	rediss://...                                      (TLS)
//	redis+cluster://[user:password@]host:port,host:port,...[?options]
//	rediss+cluster://...                              (Cluster over TLS)
//
// where options are go-redis's URL options (dial_timeout=3s, pool_size=20,
// ...) plus prefix=P, which sets Options.Prefix unless opts sets it. Open
// pings the server and wraps chatmem.ErrUnavailable if it cannot reach it.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	client, prefix, err := dial(rawURL)
	if err != nil {
		return nil, err
	}
	if opts.Prefix == "" {
		opts.Prefix = prefix
	}
	for _, h := range opts.Hooks {
		client.AddHook(h)
	}
	s, err := New(client, opts)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.owned = true
	// Pinged in a pipeline: the connection it makes stays in the pool for
	// the pipelines a turn sends (a plain command's would not serve them
	// here), so the first turn does not wait for a dial and handshake.
	// The scripts of a turn are loaded in the same round trip, so that a
	// process's first turn after Redis restarted (or flushed its scripts)
	// does not pay a NOSCRIPT reply and a resend for each. Their errors
	// (an ACL that forbids SCRIPT, say) are left to the NOSCRIPT fallback.
	// A cluster client would load them on one node only: not there.
	var ping *goredis.StatusCmd
	_, _ = client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		ping = p.Ping(ctx)
		if _, cluster := client.(*goredis.ClusterClient); !cluster {
			for _, sc := range turnScripts {
				p.ScriptLoad(ctx, sc.src)
			}
		}
		return nil
	})
	if err := ping.Err(); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("redis: ping: %w", unavailable(ctx, err))
	}
	return s, nil
}

// turnScripts are the scripts of Memory.Turn and Memory.Context, which
// Open loads.
var turnScripts = []script{appendScript, tailScript, sinceScript}

// dial builds the client an Open URL names and returns the prefix option it
// carried.
func dial(rawURL string) (goredis.UniversalClient, string, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, "", fmt.Errorf("%w: redis URL %q has no scheme", chatmem.ErrInvalid, redactURL(rawURL))
	}
	// The authority ends at the first of / ? #; a cluster URL lists hosts
	// there separated by commas, which net/url does not accept.
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	path, query, _ := strings.Cut(tail, "?")
	query, _, _ = strings.Cut(query, "#")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, "", fmt.Errorf("%w: redis URL query: %v", chatmem.ErrInvalid, err)
	}
	prefix := q.Get("prefix")
	q.Del("prefix")

	switch scheme {
	case "redis", "rediss":
		u := scheme + "://" + authority + path
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		o, err := goredis.ParseURL(u)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", chatmem.ErrInvalid, err)
		}
		return goredis.NewClient(o), prefix, nil
	case "redis+cluster", "rediss+cluster":
		userinfo, hosts, found := "", authority, false
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			userinfo, hosts, found = authority[:i], authority[i+1:], true
		}
		addrs := strings.Split(hosts, ",")
		if path != "" && path != "/" {
			return nil, "", fmt.Errorf("%w: a cluster URL has no database path (got %q)", chatmem.ErrInvalid, path)
		}
		for _, a := range addrs[1:] {
			q.Add("addr", a)
		}
		u := strings.TrimSuffix(scheme, "+cluster") + "://"
		if found {
			u += userinfo + "@"
		}
		u += addrs[0]
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		o, err := goredis.ParseClusterURL(u)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %v", chatmem.ErrInvalid, err)
		}
		return goredis.NewClusterClient(o), prefix, nil
	}
	return nil, "", fmt.Errorf("%w: redis URL scheme %q (want redis, rediss, redis+cluster or rediss+cluster)", chatmem.ErrInvalid, scheme)
}

// redactURL drops the userinfo of a URL for error messages.
func redactURL(s string) string {
	if i := strings.LastIndex(s, "@"); i >= 0 {
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			return s[:j+3] + "...@" + s[i+1:]
		}
	}
	return s
}

func validatePrefix(p string) error {
	if len(p) > 64 {
		return fmt.Errorf("%w: redis key prefix is %d characters, over 64", chatmem.ErrInvalid, len(p))
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: redis key prefix %q has character %q; allowed are letters, digits and . _ -", chatmem.ErrInvalid, p, c)
		}
	}
	return nil
}

// Prefix returns the prefix of every key the store writes.
func (s *Store) Prefix() string { return s.prefix }

// Client returns the client the store uses.
func (s *Store) Client() goredis.UniversalClient { return s.client }

// The positions of a conversation's keys in convKeys, which is also the
// order in which the scripts take them.
const (
	kMeta = iota
	kMsgs
	kCum
	kUsers
	kSys
	kIdem
	kSummary
	kFacts
	kFactHist
	kTerms
	kReceipts
	numKeys
)

// keySuffixes are the last parts of a conversation's keys, by position.
// The term keys (<base>t:<term>, see termKey) are not among them: a
// conversation has as many as it has distinct terms, and the terms set
// names them.
var keySuffixes = [numKeys]string{"meta", "msgs", "cum", "users", "sys", "idem", "summary", "facts", "facthist", "terms", "receipts"}

// convKeys returns every key of a conversation, in the order of the k*
// constants.
// It is on every append's path, so the keys are slices of one string.
func (s *Store) convKeys(key chatmem.Key) []string {
	base := s.prefix + ":{" + key.Tenant + "/" + key.ID + "}:"
	var b strings.Builder
	b.Grow(numKeys*len(base) + keySuffixBytes)
	for _, suffix := range keySuffixes {
		b.WriteString(base)
		b.WriteString(suffix)
	}
	all := b.String()
	keys := make([]string, numKeys)
	for i, suffix := range keySuffixes {
		n := len(base) + len(suffix)
		keys[i], all = all[:n], all[n:]
	}
	return keys
}

// keySuffixBytes is the length of keySuffixes' strings together.
var keySuffixBytes = func() int {
	n := 0
	for _, suffix := range keySuffixes {
		n += len(suffix)
	}
	return n
}()

// keysAt returns the conversation's keys at the positions given.
func (s *Store) keysAt(key chatmem.Key, at ...int) []string {
	base := s.prefix + ":{" + key.Tenant + "/" + key.ID + "}:"
	keys := make([]string, len(at))
	for i, k := range at {
		keys[i] = base + keySuffixes[k]
	}
	return keys
}

func (s *Store) metaKey(key chatmem.Key) string { return s.keysAt(key, kMeta)[0] }

// indexKey returns the key of a tenant's sorted set of conversation IDs.
func (s *Store) indexKey(tenant string) string {
	return s.prefix + ":tenant:" + tenant + ":convs"
}

func nanos(t time.Time) string {
	if t.Before(time.Unix(0, 0)) {
		return "0"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

// maxTime is the latest time Unix nanoseconds in an int64 can hold.
var maxTime = time.Unix(0, 1<<63-1)

// Append stores msgs at the end of the conversation with one script run. See
// chatmem.Store. A network failure after the script was sent leaves it
// unknown whether the messages were stored: the error wraps
// chatmem.ErrUnavailable, the client does not resend it (so a timeout never
// turns into a double append), and a retry with the same IdempotencyKey is
// safe.
//
// The script checks the options in chatmem's order: a retried
// IdempotencyKey replays first; then ExpectedLastSeq, ExpectedRevision, and ExpectedTokenizer
// against the live conversation's recorded tokenizer (one the append
// creates, or starts afresh after it expired, matches). A failed check
// writes nothing and returns an error wrapping chatmem.ErrConflict.
func (s *Store) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	res, _, err := s.appendTail(ctx, key, msgs, opts, nil)
	return res, err
}

// AppendTail is Append, with the reads of System and Tail(q) in its round
// trip (see chatmem.TailAppender). The append script reads the system
// messages and finds the tail as Tail's script does (tailStart), in the
// append's snapshot. The tail's messages are read as Tail reads them:
// by an LRANGE of the newest messages pipelined behind the script, as
// many as the store's hint guesses (or, before it learned anything, the
// cold rates: see tailHint.guessCold), with a re-read of meta's gen, and,
// when the guess falls short, by a second round trip; the messages are
// the run the script found, as of its snapshot, for the reasons Tail
// gives. Only when no guess can be made (a query for more than maxGuess
// messages) does the script read them itself, passing them through Lua,
// which costs the server many times the LRANGE.
//
// If the conversation is deleted (or expires) between the script and the
// read of its tail, or that read fails, the append's result is returned
// with an empty TailRead, as the interface asks of an append that landed.
func (s *Store) AppendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead, error) {
	if err := q.CheckSelects(); err != nil {
		return chatmem.AppendResult{}, chatmem.TailRead{}, err
	}
	return s.appendTail(ctx, key, msgs, opts, &q)
}

// appendTail is Append, and with q set AppendTail.
func (s *Store) appendTail(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions, q *chatmem.TailQuery) (chatmem.AppendResult, chatmem.TailRead, error) {
	fail := func(err error) (chatmem.AppendResult, chatmem.TailRead, error) {
		return chatmem.AppendResult{}, chatmem.TailRead{}, err
	}
	if err := storekit.CheckAppend(key, msgs, opts); err != nil {
		return fail(err)
	}
	if opts.TTL < 0 {
		return fail(fmt.Errorf("%w: negative TTL %v", chatmem.ErrInvalid, opts.TTL))
	}
	now := opts.Now
	if now.IsZero() {
		now = s.now()
	}
	expires := "0"
	if opts.TTL > 0 {
		exp := now.Add(opts.TTL)
		if exp.After(maxTime) || exp.Before(now) {
			exp = maxTime
		}
		expires = nanos(exp)
	}
	expected := int64(-1)
	if opts.ExpectedLastSeq != nil {
		if *opts.ExpectedLastSeq < 0 {
			return fail(fmt.Errorf("%w: negative expected last seq %d", chatmem.ErrInvalid, *opts.ExpectedLastSeq))
		}
		expected = *opts.ExpectedLastSeq
	}

	args := make([]any, 0, 12+3*len(msgs))
	// The generation token tells this conversation from one created under
	// the same key after it is deleted (see Tail); only the append that
	// creates the conversation records it.
	gen := ""
	if expected <= 0 {
		gen = rand.Text() // else the script cannot create the conversation
	}
	args = append(args, nanos(now), expires, expected, opts.IdempotencyKey, opts.Tokenizer, gen, opts.ExpectedTokenizer, opts.Fingerprint, opts.User,
		"", 0) // the user's erasure.Hex and admission epoch, set below
	// With a guess, the tail's messages are read behind the script, as
	// Tail reads them (see AppendTail); without one, by the script.
	var guess int64
	if q != nil {
		guess = s.hint.guessCold(*q)
		inScript := 0
		if guess == 0 {
			inScript = 1
		}
		args = append(args, tailArgs(*q)...)
		args = append(args, inScript)
	} else {
		args = append(args, 0, 0, 0)
	}
	args = append(args, string(opts.Receipt)) // "": none
	expectedRev := int64(-1)
	if opts.ExpectedRevision != nil {
		expectedRev = *opts.ExpectedRevision // CheckAppend refused a negative one
	}
	args = append(args, expectedRev)
	stored := make([]chatmem.Message, len(msgs)) // the result's copies
	for i, m := range msgs {
		if err := storekit.CheckMessage(m); err != nil {
			return fail(fmt.Errorf("message %d: %w", i, err))
		}
		m = m.Clone()
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		// In UTC, as the records encode it, so that the result holds what
		// reads return (Memory.Turn keeps it in its tail cache).
		m.CreatedAt = m.CreatedAt.UTC()
		stored[i] = m
		seq := int64(0) // the script puts it in front
		if expected >= 0 {
			seq = expected + 1 + int64(i)
		}
		b, err := encodeRecordAt(seq, m)
		if err != nil {
			return fail(fmt.Errorf("message %d: %w: %v", i, chatmem.ErrInvalid, err))
		}
		kind := "o"
		switch m.Role {
		case chatmem.RoleSystem:
			kind = "s"
		case chatmem.RoleUser:
			kind = "u"
		}
		args = append(args, b, m.Tokens, kind)
	}

	keys := s.convKeys(key)
	if opts.User != "" {
		// The user's index and erasure record lie in the user's slot: the
		// admission reads the record and indexes the conversation there,
		// the script compares the epoch it read with the tombstones of
		// erasures that started since (erasure.go).
		adm, err := s.admit(ctx, key, opts.User, opts)
		if err != nil {
			return fail(fmt.Errorf("redis: append to %s: %w", key, err))
		}
		args[9] = adm.user // the ARGV slots reserved below the messages
		args[10] = adm.epoch
		keys = append(keys, s.tombKey(key))
		if s.admitted != nil {
			s.admitted()
		}
	}
	// The tenant's index lives in another slot, so it is written beside
	// the script, not by it (see the package documentation): pipelined
	// after it, in the same round trip. It is added whether or not the
	// script appended (a pipeline cannot wait for the script's answer);
	// a member without a live conversation is what List tolerates and
	// removes anyway.
	after := []goredis.Cmder{goredis.NewIntCmd(ctx, "zadd", s.indexKey(key.Tenant), 0, key.ID)}
	var items *goredis.StringSliceCmd
	var check *goredis.SliceCmd
	if guess > 0 {
		items, check = guessReads(ctx, keys[kMeta], keys[kMsgs], guess)
		after = append(after, items, check)
	}
	reply, err := s.runOnce(ctx, appendScript, keys, args, after...)
	if err != nil {
		return fail(fmt.Errorf("redis: append to %s: %w", key, err))
	}
	res, read, run, err := parseAppend(key, reply, stored, opts)
	if bad := (errTailRead{}); errors.As(err, &bad) {
		s.log.WarnContext(ctx, "redis: read the tail after the append", "key", key.String(), "err", err)
		read, run, err = chatmem.TailRead{}, nil, nil
	}
	if err != nil {
		return fail(fmt.Errorf("redis: append to %s: %w", key, err))
	}
	if run != nil {
		// The script found the tail; the LRANGE behind it should hold it.
		msgs, ok, err := s.guessedRun(key, *run, items, check)
		if !ok {
			msgs, err = s.readRun(ctx, key, *run)
		}
		if err != nil {
			// The append landed: its result stands, without the reads
			// (the caller reads as it would have without them).
			s.log.WarnContext(ctx, "redis: read the tail after the append", "key", key.String(), "err", err)
			read = chatmem.TailRead{}
		} else {
			read.Recent = msgs
		}
	}
	s.hint.seed(res.Conversation)
	if read.Recent != nil {
		s.hint.learn(read.Recent)
	}
	// The append is stored by now, so a failure of the index is logged
	// rather than returned (a caller would retry and append twice); the
	// next append indexes the conversation again.
	if err := after[0].Err(); err != nil {
		s.log.ErrorContext(ctx, "redis: index conversation after append", "key", key.String(), "err", err)
	}
	// The user's index across conversations, in the user's slot: the same
	// goes for it, and the next append catches up (usersearch.go).
	if u := res.Conversation.User; u != "" && !res.Replayed {
		terms := make([][]string, len(res.Messages))
		for i, m := range res.Messages {
			terms[i] = chatmem.IndexTerms(m)
		}
		if err := s.indexForUser(context.WithoutCancel(ctx), key, u, metaGen(key, reply), res.Messages, terms); err != nil {
			s.log.ErrorContext(ctx, "redis: index for the user after append", "key", key.String(), "user", u, "err", err)
		}
	}
	return res, read, nil
}

// parseAppend turns the append script's reply into a result and, when
// the script read them (AppendTail), the system messages and tail; stored
// are the messages the append sent, which become the result's if they were
// stored, and opts are its options.
func parseAppend(key chatmem.Key, reply any, stored []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, chatmem.TailRead, *tailRun, error) {
	var none chatmem.TailRead
	r, ok := reply.([]any)
	if !ok || len(r) < 2 {
		return chatmem.AppendResult{}, none, nil, fmt.Errorf("unexpected script reply %v", reply)
	}
	status, _ := r[0].(int64)
	if status == 0 {
		last, _ := r[1].(int64)
		return chatmem.AppendResult{}, none, nil, fmt.Errorf("%w: last seq is %d", chatmem.ErrConflict, last)
	}
	if status == 7 {
		rev, _ := r[1].(int64)
		return chatmem.AppendResult{}, none, nil, storekit.RevisionConflict(key, rev, *opts.ExpectedRevision)
	}
	if status == 6 {
		return chatmem.AppendResult{}, none, nil, fmt.Errorf("%w: user %s is being erased", chatmem.ErrErased, opts.User)
	}
	if status == 5 {
		return chatmem.AppendResult{}, none, nil, fmt.Errorf("%w: conversation %s belongs to another user or to none", chatmem.ErrConflict, key)
	}
	if status == 3 {
		tok, _ := r[1].(string)
		return chatmem.AppendResult{}, none, nil, fmt.Errorf("%w: conversation %s is kept under tokenizer %q, not the expected %q",
			chatmem.ErrConflict, key, tok, opts.ExpectedTokenizer)
	}
	if status == 4 {
		return chatmem.AppendResult{}, none, nil, fmt.Errorf("%w: key %q was applied to conversation %s with other messages",
			chatmem.ErrIdempotencyKeyReused, opts.IdempotencyKey, key)
	}
	if len(r) < 3 {
		return chatmem.AppendResult{}, none, nil, fmt.Errorf("unexpected script reply %v", reply)
	}
	first, _ := r[1].(int64)
	if status == 2 {
		conv, err := parseMeta(key, r[2])
		if err != nil || len(r) < 4 {
			return chatmem.AppendResult{}, none, nil, fmt.Errorf("unexpected script reply %v (%v)", reply, err)
		}
		res := chatmem.AppendResult{Conversation: conv, Replayed: true}
		res.Messages, err = decodeMessages(r[3])
		return res, none, nil, err
	}
	conv, gen, err := appendMeta(key, r[2:])
	if err != nil {
		return chatmem.AppendResult{}, none, nil, fmt.Errorf("unexpected script reply %v (%v)", reply, err)
	}
	res := chatmem.AppendResult{Conversation: conv}
	for i := range stored {
		stored[i].Seq = first + int64(i)
	}
	res.Messages = stored
	read, run, err := parseTailRead(conv, gen, r[2+appendMetaFields:])
	if err != nil {
		// The append landed: its result stands, without the reads (see
		// chatmem.TailAppender), and the caller logs why.
		return res, none, nil, errTailRead{err}
	}
	return res, read, run, nil
}

// errTailRead is parseAppend's error when the append landed and only the
// reads after it could not be parsed.
type errTailRead struct{ err error }

func (e errTailRead) Error() string {
	return "unexpected tail read in the script's reply: " + e.err.Error()
}

// parseTailRead parses the reads that follow the meta fields in the append
// script's reply when it had a tail query: the system messages, the first
// seq of the tail and, if the script read them, its messages, which end at
// conv's last seq. When it did not, it returns the tail's run (of the
// conversation whose gen is gen) for the caller to read. It returns an
// empty TailRead for a reply without reads.
func parseTailRead(conv chatmem.Conversation, gen string, f []any) (chatmem.TailRead, *tailRun, error) {
	if len(f) == 0 {
		return chatmem.TailRead{}, nil, nil
	}
	if len(f) != 2 && len(f) != 3 {
		return chatmem.TailRead{}, nil, fmt.Errorf("%d tail read fields, want 2 or 3", len(f))
	}
	system, err := decodeMessages(f[0])
	if err != nil {
		return chatmem.TailRead{}, nil, err
	}
	run := tailRun{last: conv.LastSeq, gen: gen}
	var ok bool
	if run.first, ok = f[1].(int64); !ok || run.first < 1 {
		return chatmem.TailRead{}, nil, fmt.Errorf("tail's first seq %v", f[1])
	}
	if len(f) == 2 {
		return chatmem.TailRead{System: system}, &run, nil
	}
	recent, err := decodeMessages(f[2])
	if err != nil {
		return chatmem.TailRead{}, nil, err
	}
	// The tail is first..LastSeq, read by list index, which holds seq
	// index+1 for as long as the conversation lives.
	if n := int64(len(recent)); n != max(run.last-run.first+1, 0) || n > 0 && (recent[0].Seq != run.first || recent[n-1].Seq != run.last) {
		return chatmem.TailRead{}, nil, fmt.Errorf("tail of %d messages from seq %d, want %d..%d", n, run.first, run.first, run.last)
	}
	return chatmem.TailRead{System: system, Recent: recent}, nil, nil
}

// appendMeta parses the meta fields of the append script's reply after
// it appended, by position: tokenizer, user, last_seq, tokens,
// system_tokens, turns (integers), created_at, updated_at, expires_at
// (Unix nanoseconds in decimal, "0" for none), gen and rev (an integer),
// which may be followed by other fields (an AppendTail's reads). It returns the
// conversation they describe and gen.
func appendMeta(key chatmem.Key, f []any) (chatmem.Conversation, string, error) {
	if len(f) < appendMetaFields {
		return chatmem.Conversation{}, "", fmt.Errorf("%d meta fields, want %d", len(f), appendMetaFields)
	}
	conv := chatmem.Conversation{Key: key}
	var ok [appendMetaFields]bool
	conv.Tokenizer, ok[0] = f[0].(string)
	conv.User, ok[1] = f[1].(string)
	conv.LastSeq, ok[2] = f[2].(int64)
	conv.Tokens, ok[3] = f[3].(int64)
	conv.SystemTokens, ok[4] = f[4].(int64)
	conv.Turns, ok[5] = f[5].(int64)
	times := [3]*time.Time{&conv.CreatedAt, &conv.UpdatedAt, &conv.ExpiresAt}
	for i, t := range times {
		var s string
		if s, ok[6+i] = f[6+i].(string); ok[6+i] && s != "0" && s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return chatmem.Conversation{}, "", fmt.Errorf("meta time %q: %w", s, err)
			}
			*t = time.Unix(0, n).UTC()
		}
	}
	gen, ok9 := f[9].(string)
	ok[9] = ok9
	conv.Revision, ok[10] = f[10].(int64)
	for i, good := range ok {
		if !good {
			return chatmem.Conversation{}, "", fmt.Errorf("meta field %d is %T", i, f[i])
		}
	}
	return conv, gen, nil
}

// appendMetaFields is the number of meta fields in the append script's reply.
const appendMetaFields = 11

// parseMeta turns a meta hash, as HGETALL's flat field-value list inside a
// script reply (values strings or integers) or as a map, into a
// Conversation.
func parseMeta(key chatmem.Key, v any) (chatmem.Conversation, error) {
	var fields map[string]string
	switch v := v.(type) {
	case map[string]string:
		fields = v
	case []any:
		fields = make(map[string]string, len(v)/2)
		for i := 0; i+1 < len(v); i += 2 {
			k, _ := v[i].(string)
			switch val := v[i+1].(type) {
			case string:
				fields[k] = val
			case int64: // a number a script put in its reply
				fields[k] = strconv.FormatInt(val, 10)
			}
		}
	default:
		return chatmem.Conversation{}, fmt.Errorf("unexpected meta %T", v)
	}
	var err error
	num := func(name string) int64 {
		n, e := strconv.ParseInt(cmp.Or(fields[name], "0"), 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("meta field %s: %w", name, e)
		}
		return n
	}
	at := func(name string) time.Time {
		n := num(name)
		if n == 0 {
			return time.Time{}
		}
		return time.Unix(0, n).UTC()
	}
	conv := chatmem.Conversation{
		Key:          key,
		Tokenizer:    fields["tokenizer"],
		User:         fields["user"],
		LastSeq:      num("last_seq"),
		Tokens:       num("tokens"),
		SystemTokens: num("system_tokens"),
		Turns:        num("turns"),
		CreatedAt:    at("created_at"),
		UpdatedAt:    at("updated_at"),
		ExpiresAt:    at("expires_at"),
		Revision:     num("rev"),
	}
	return conv, err
}

// live reports whether conv exists at the store's clock: its meta has a
// created_at (a conversation rewound to seq 0 exists with no message).
func (s *Store) live(conv chatmem.Conversation) bool {
	return !conv.CreatedAt.IsZero() && (conv.ExpiresAt.IsZero() || s.now().Before(conv.ExpiresAt))
}

// Conversation returns the conversation's metadata with one HGETALL.
func (s *Store) Conversation(ctx context.Context, key chatmem.Key) (chatmem.Conversation, error) {
	if err := key.Validate(); err != nil {
		return chatmem.Conversation{}, err
	}
	fields, err := s.client.HGetAll(ctx, s.metaKey(key)).Result()
	if err != nil {
		return chatmem.Conversation{}, fmt.Errorf("redis: conversation %s: %w", key, wrap(ctx, err))
	}
	conv, err := parseMeta(key, fields)
	if err != nil {
		return chatmem.Conversation{}, fmt.Errorf("redis: conversation %s: %w", key, err)
	}
	if !s.live(conv) {
		return chatmem.Conversation{}, notFound(key)
	}
	return conv, nil
}

func notFound(key chatmem.Key) error {
	return fmt.Errorf("conversation %s: %w", key, chatmem.ErrNotFound)
}

// List returns the tenant's conversations in ID order from the tenant's
// index, skipping (and removing) members whose conversation no longer
// exists. See the package documentation.
func (s *Store) List(ctx context.Context, tenant string, page chatmem.PageRequest) (chatmem.Page, error) {
	if err := storekit.CheckTenant(tenant); err != nil {
		return chatmem.Page{}, err
	}
	limit, err := storekit.PageLimit(page.Limit)
	if err != nil {
		return chatmem.Page{}, err
	}
	index := s.indexKey(tenant)
	after := page.After
	// One more than a page is read, so that Next is empty on the last page.
	var convs []chatmem.Conversation
	for len(convs) <= limit {
		lo := "-"
		if after != "" {
			lo = "(" + after
		}
		want := limit + 1 - len(convs)
		ids, err := s.client.ZRangeByLex(ctx, index, &goredis.ZRangeBy{Min: lo, Max: "+", Count: int64(want)}).Result()
		if err != nil {
			return chatmem.Page{}, fmt.Errorf("redis: list %s: %w", tenant, wrap(ctx, err))
		}
		if len(ids) == 0 {
			break
		}
		after = ids[len(ids)-1]
		cmds := make([]*goredis.MapStringStringCmd, len(ids))
		_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.HGetAll(ctx, s.metaKey(chatmem.Key{Tenant: tenant, ID: id}))
			}
			return nil
		})
		if err != nil {
			return chatmem.Page{}, fmt.Errorf("redis: list %s: %w", tenant, wrap(ctx, err))
		}
		for i, id := range ids {
			key := chatmem.Key{Tenant: tenant, ID: id}
			conv, err := parseMeta(key, cmds[i].Val())
			if err != nil {
				return chatmem.Page{}, fmt.Errorf("redis: list %s: %w", tenant, err)
			}
			if !s.live(conv) {
				if err := s.unindex(ctx, key); err != nil {
					return chatmem.Page{}, fmt.Errorf("redis: list %s: %w", tenant, err)
				}
				continue
			}
			convs = append(convs, conv)
		}
		if len(ids) < want {
			break
		}
	}
	var next string
	if len(convs) > limit {
		convs = convs[:limit]
		next = convs[limit-1].Key.ID
	}
	return chatmem.Page{Conversations: convs, Next: next}, nil
}

// unindex removes key from its tenant's index, then puts it back if the
// conversation exists after all: an Append that created it again between
// our check and the removal has already added it, and must stay listed.
func (s *Store) unindex(ctx context.Context, key chatmem.Key) error {
	index := s.indexKey(key.Tenant)
	if err := s.client.ZRem(ctx, index, key.ID).Err(); err != nil {
		return wrap(ctx, err)
	}
	fields, err := s.client.HMGet(ctx, s.metaKey(key), "last_seq", "expires_at").Result()
	if err != nil {
		return wrap(ctx, err)
	}
	if fields[0] == nil {
		return nil
	}
	if exp, _ := fields[1].(string); exp != "" && exp != "0" {
		if n, err := strconv.ParseInt(exp, 10, 64); err == nil && !s.now().Before(time.Unix(0, n)) {
			return nil
		}
	}
	return wrap(ctx, s.client.ZAdd(ctx, index, goredis.Z{Member: key.ID}).Err())
}

// Delete removes every key of the conversation with one script, then its
// index member.
func (s *Store) Delete(ctx context.Context, key chatmem.Key) error {
	if err := key.Validate(); err != nil {
		return err
	}
	n, err := s.run(ctx, deleteScript, s.convKeys(key), nanos(s.now()), "")
	if err != nil {
		return fmt.Errorf("redis: delete %s: %w", key, err)
	}
	if err := s.unindex(ctx, key); err != nil {
		return fmt.Errorf("redis: delete %s: %w", key, err)
	}
	// Leases expire on their own (lease.go), but a deleted conversation's
	// go with it, as on the other stores: a holder still at work then
	// releases nothing, as after an expiry.
	if err := s.client.Del(ctx, s.leaseKey(key, chatmem.LeaseSummary), s.leaseKey(key, chatmem.LeaseFacts)).Err(); err != nil {
		return fmt.Errorf("redis: delete %s: leases: %w", key, wrap(ctx, err))
	}
	if n, _ := n.(int64); n != 1 {
		return notFound(key)
	}
	return nil
}

// Tail returns the newest messages selected by q. It reads them without
// passing them through Lua, which on Redis 7.0 costs the server several
// times the LRANGE itself: a script (tailScript) checks the conversation
// and finds where the run starts and ends, and a plain LRANGE reads the
// messages.
//
// Usually that is one round trip: a pipeline of the script, an LRANGE of
// as many of the newest messages as the store's hint guesses the run holds
// (see tailHint), and a re-read of meta's last_seq and gen. When the guess
// falls short (or there is none yet), a second round trip reads the run by
// its absolute list indexes, with the same re-read of meta.
//
// The steps are not one atomic read, but they return exactly the run as of
// the script: messages are immutable once appended and their lists only
// grow at the tail, so list index i holds seq i+1 for as long as the
// conversation lives (the guessed LRANGE counts from the tail, and the seq
// of its last message places it; messages appended meanwhile lie after the
// run and are dropped). What could intervene is a Delete, or expiry,
// possibly followed by an Append creating the conversation again, or a
// Rewind, which cuts the lists: every creation and every rewind records a
// new random gen, and gen is read after the messages, so an unchanged gen
// proves the messages came from the conversation the script saw. If the
// check fails, one more script reads the run and checks gen atomically on
// the master (see readRunAtomic); if the conversation is not the same,
// Tail finds the run again once (a rewound conversation is still there)
// and reports ErrNotFound if it is gone, which is what a Tail at that
// moment would have found.
func (s *Store) Tail(ctx context.Context, key chatmem.Key, q chatmem.TailQuery) ([]chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	var run *tailRun
	if guess := s.hint.guess(q); guess > 0 {
		msgs, found, err := s.tailGuessed(ctx, key, q, guess)
		if err != nil || msgs != nil {
			if err == nil {
				s.hint.learn(msgs)
			}
			return msgs, err
		}
		run = found
	}
	if run == nil {
		found, err := s.findTail(ctx, key, q)
		if err != nil {
			return nil, err
		}
		run = &found
	}
	msgs, err := s.readRun(ctx, key, *run)
	if errors.Is(err, chatmem.ErrNotFound) {
		// The conversation changed gen under the reads: deleted, or
		// rewound (see Rewind), which the script of one more try tells.
		found, ferr := s.findTail(ctx, key, q)
		if ferr != nil {
			return nil, ferr
		}
		msgs, err = s.readRun(ctx, key, found)
	}
	if err == nil {
		s.hint.learn(msgs)
	}
	return msgs, err
}

// tailGuessed runs the tail script, the LRANGE of the newest guess
// messages and the re-read of meta in one pipeline. It returns the
// messages if the LRANGE holds the run and the check passes; else the run
// the script found, for readRun, or (if the script did not run: NOSCRIPT)
// neither.
func (s *Store) tailGuessed(ctx context.Context, key chatmem.Key, q chatmem.TailQuery, guess int64) ([]chatmem.Message, *tailRun, error) {
	keys := s.keysAt(key, kMeta, kMsgs, kCum, kUsers)
	var script *goredis.Cmd
	var items *goredis.StringSliceCmd
	var check *goredis.SliceCmd
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		script = p.EvalSha(ctx, tailScript.Hash(), []string{keys[0], keys[2], keys[3]}, tailScriptArgs(s.now(), q)...)
		items, check = guessReads(ctx, keys[0], keys[1], guess)
		p.Process(ctx, items)
		p.Process(ctx, check)
		return nil
	})
	if goredis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("redis: tail of %s: %w", key, wrap(ctx, err))
	}
	run, err := parseTail(key, script.Val())
	if err != nil {
		return nil, nil, err
	}
	msgs, ok, err := s.guessedRun(key, run, items, check)
	if !ok {
		return nil, &run, nil
	}
	return msgs, nil, err
}

// guessReads are the reads sent right behind a script that finds a tail
// run, for guessedRun: an LRANGE of the conversation's newest guess
// messages (msgs, its list), then (so that it sees at least as far) a
// re-read of its meta's last_seq and gen.
func guessReads(ctx context.Context, meta, msgs string, guess int64) (*goredis.StringSliceCmd, *goredis.SliceCmd) {
	return goredis.NewStringSliceCmd(ctx, "lrange", msgs, -guess, -1), goredis.NewSliceCmd(ctx, "hmget", meta, "last_seq", "gen")
}

// guessedRun returns the messages of run from items, an LRANGE of the
// newest messages sent right behind the script that found run (nil: none
// was), if it
// holds all of them and check (an HMGET of meta's last_seq and gen, sent
// after the LRANGE) shows the conversation the script saw (see Tail).
// Else it reports false, and readRun is the way to read them.
func (s *Store) guessedRun(key chatmem.Key, run tailRun, items *goredis.StringSliceCmd, check *goredis.SliceCmd) ([]chatmem.Message, bool, error) {
	if run.first > run.last {
		return []chatmem.Message{}, true, nil
	}
	if items == nil || items.Err() != nil || check.Err() != nil {
		return nil, false, nil
	}
	list, meta := items.Val(), check.Val()
	if len(meta) != 2 || meta[0] == nil {
		return nil, false, nil
	}
	if gen, _ := meta[1].(string); gen != run.gen {
		return nil, false, nil
	}
	part, ok := runIn(run, list)
	if !ok {
		return nil, false, nil // the guess fell short
	}
	msgs, err := s.decodeRun(key, run, part)
	return msgs, true, err
}

// runIn returns the part of list, some of the newest stored messages of a
// conversation, that holds run, or false if list does not hold all of it.
// The list ends at the seq of its last message, which is later than
// run.last if messages were appended after the script ran.
func runIn(run tailRun, list []string) ([]string, bool) {
	if len(list) == 0 {
		return nil, false
	}
	end, ok := recordSeq(list[len(list)-1])
	base := end - int64(len(list)) + 1 // the seq of list[0]
	if !ok || run.first < base || run.last > end || run.first > run.last {
		return nil, false
	}
	return list[run.first-base : run.last-base+1], true
}

// tailArgs are the ARGV that give a script a TailQuery: its tokens and
// turns, each at least 0.
func tailArgs(q chatmem.TailQuery) []any {
	// Lua prints numbers past 14 digits in exponent form, which LINDEX
	// would refuse; no conversation has 2^40 turns.
	turns := min(max(int64(q.Turns), 0), 1<<40)
	return []any{max(q.Tokens, 0), turns}
}

// tailScriptArgs are the tail script's ARGV: now, then q's.
func tailScriptArgs(now time.Time, q chatmem.TailQuery) []any {
	return append([]any{nanos(now)}, tailArgs(q)...)
}

// tailRun is what the tail script found: the run first..last (empty if
// first > last) of the conversation created with generation gen.
type tailRun struct {
	first, last int64
	gen         string
}

// findTail runs the tail script.
func (s *Store) findTail(ctx context.Context, key chatmem.Key, q chatmem.TailQuery) (tailRun, error) {
	reply, err := s.run(ctx, tailScript, s.keysAt(key, kMeta, kCum, kUsers), tailScriptArgs(s.now(), q)...)
	if err != nil {
		return tailRun{}, fmt.Errorf("redis: tail of %s: %w", key, err)
	}
	return parseTail(key, reply)
}

// parseTail parses the tail script's reply.
func parseTail(key chatmem.Key, reply any) (tailRun, error) {
	r, ok := reply.([]any)
	if !ok || len(r) == 0 {
		return tailRun{}, fmt.Errorf("redis: tail of %s: unexpected script reply %v", key, reply)
	}
	if first, _ := r[0].(int64); first < 0 {
		return tailRun{}, notFound(key)
	}
	var run tailRun
	ok = len(r) == 3
	if ok {
		run.first, _ = r[0].(int64)
		run.last, ok = r[1].(int64)
	}
	if ok {
		run.gen, ok = r[2].(string)
	}
	if !ok {
		return tailRun{}, fmt.Errorf("redis: tail of %s: unexpected script reply %v", key, reply)
	}
	return run, nil
}

// readRun reads the messages of run by their list indexes, then checks
// that the conversation is still the one findTail saw (see Tail).
func (s *Store) readRun(ctx context.Context, key chatmem.Key, run tailRun) ([]chatmem.Message, error) {
	if run.first > run.last {
		return []chatmem.Message{}, nil
	}
	keys := s.keysAt(key, kMeta, kMsgs)
	var items *goredis.StringSliceCmd
	var check *goredis.SliceCmd
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		items = p.LRange(ctx, keys[1], run.first-1, run.last-1)
		check = p.HMGet(ctx, keys[0], "last_seq", "gen") // after the LRANGE
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: tail of %s: %w", key, wrap(ctx, err))
	}
	list, meta := items.Val(), check.Val()
	if len(meta) != 2 || meta[0] == nil || int64(len(list)) != run.last-run.first+1 {
		// Deleted or expired meanwhile, or read from a replica that lags.
		return s.readRunAtomic(ctx, key, run)
	}
	if gen, _ := meta[1].(string); gen != run.gen {
		// Created again meanwhile, or read from a lagging replica.
		return s.readRunAtomic(ctx, key, run)
	}
	return s.decodeRun(key, run, list)
}

// decodeRun decodes the messages of run, read from its list.
func (s *Store) decodeRun(key chatmem.Key, run tailRun, list []string) ([]chatmem.Message, error) {
	msgs, err := decodeRecords(list)
	if err != nil {
		return nil, fmt.Errorf("redis: tail of %s: %w", key, err)
	}
	if msgs[0].Seq != run.first || msgs[len(msgs)-1].Seq != run.last {
		return nil, fmt.Errorf("redis: tail of %s: list holds seqs %d..%d where %d..%d belong", key, msgs[0].Seq, msgs[len(msgs)-1].Seq, run.first, run.last)
	}
	return msgs, nil
}

// readRunAtomic is readRun's fallback when its check fails: a client that
// routes read-only commands to replicas (ClusterOptions.ReadOnly,
// RouteByLatency, RouteRandomly) sends the LRANGE and HMGET to a replica,
// which may not have the messages the script saw on the master yet, so the
// master decides, with the read and the check in one script.
func (s *Store) readRunAtomic(ctx context.Context, key chatmem.Key, run tailRun) ([]chatmem.Message, error) {
	reply, err := s.run(ctx, tailReadScript, s.keysAt(key, kMeta, kMsgs), run.first, run.last, run.gen)
	if err != nil {
		return nil, fmt.Errorf("redis: tail of %s: %w", key, err)
	}
	msgs, err := s.messagesReply(key, "tail of", reply)
	if err == nil && int64(len(msgs)) != run.last-run.first+1 {
		err = fmt.Errorf("redis: tail of %s: read %d messages of %d..%d", key, len(msgs), run.first, run.last)
	}
	return msgs, err
}

// Range returns up to limit messages after seq after with one script run.
func (s *Store) Range(ctx context.Context, key chatmem.Key, after int64, limit int) ([]chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	reply, err := s.run(ctx, rangeScript, s.keysAt(key, kMeta, kMsgs), nanos(s.now()), after, limit)
	if err != nil {
		return nil, fmt.Errorf("redis: range of %s: %w", key, err)
	}
	return s.messagesReply(key, "range of", reply)
}

// ConversationSince returns the conversation's metadata and up to limit of
// its messages with Seq > after, oldest first, with one script run: the
// meta hash and the messages are read in one snapshot, so no message is
// past the returned LastSeq. It returns chatmem.ErrNotFound for a
// conversation that does not exist or has expired.
func (s *Store) ConversationSince(ctx context.Context, key chatmem.Key, after int64, limit int) (chatmem.Conversation, []chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return chatmem.Conversation{}, nil, err
	}
	if err := storekit.CheckLimit(limit); err != nil {
		return chatmem.Conversation{}, nil, err
	}
	const op = "conversation and messages of"
	reply, err := s.run(ctx, sinceScript, s.keysAt(key, kMeta, kMsgs), nanos(s.now()), after, limit)
	if err != nil {
		return chatmem.Conversation{}, nil, fmt.Errorf("redis: %s %s: %w", op, key, err)
	}
	msgs, err := s.messagesReply(key, op, reply)
	if err != nil {
		return chatmem.Conversation{}, nil, err
	}
	// messagesReply checked that reply is a list: {first_seq, messages, meta}.
	r := reply.([]any)
	if len(r) < 3 {
		return chatmem.Conversation{}, nil, fmt.Errorf("redis: %s %s: unexpected script reply %v", op, key, reply)
	}
	conv, err := parseMeta(key, r[2])
	if err != nil {
		return chatmem.Conversation{}, nil, fmt.Errorf("redis: %s %s: %w", op, key, err)
	}
	if !s.live(conv) {
		return chatmem.Conversation{}, nil, notFound(key)
	}
	return conv, msgs, nil
}

// System returns the system messages from their own list, with one script
// run.
func (s *Store) System(ctx context.Context, key chatmem.Key) ([]chatmem.Message, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	reply, err := s.run(ctx, systemScript, s.keysAt(key, kMeta, kSys), nanos(s.now()))
	if err != nil {
		return nil, fmt.Errorf("redis: system messages of %s: %w", key, err)
	}
	return s.messagesReply(key, "system messages of", reply)
}

// messagesReply decodes the {first_seq, messages} reply of the read scripts,
// or {-1} for a conversation that does not exist.
func (s *Store) messagesReply(key chatmem.Key, op string, reply any) ([]chatmem.Message, error) {
	r, ok := reply.([]any)
	if !ok || len(r) == 0 {
		return nil, fmt.Errorf("redis: %s %s: unexpected script reply %v", op, key, reply)
	}
	if first, _ := r[0].(int64); first < 0 || len(r) < 2 {
		return nil, notFound(key)
	}
	msgs, err := decodeMessages(r[1])
	if err != nil {
		return nil, fmt.Errorf("redis: %s %s: %w", op, key, err)
	}
	return msgs, nil
}

// PurgeInactive deletes the conversations of tenant (every tenant if empty)
// that were last updated before before, and returns how many it deleted. It
// walks the tenants' indexes (found with SCAN on every node when tenant is
// empty); each deletion re-checks the conversation's updated_at inside its
// script, so a conversation appended to meanwhile is kept. Index members of
// conversations that are gone are removed on the way.
func (s *Store) PurgeInactive(ctx context.Context, tenant string, before time.Time) (int, error) {
	var tenants []string
	if tenant != "" {
		if err := chatmem.ValidateID(tenant); err != nil {
			return 0, fmt.Errorf("tenant: %w", err)
		}
		tenants = []string{tenant}
	} else {
		var err error
		if tenants, err = s.tenants(ctx); err != nil {
			return 0, fmt.Errorf("redis: purge: %w", err)
		}
	}
	cutoff := nanos(before)
	if cutoff == "0" {
		return 0, nil // nothing was updated before 1970
	}
	deleted := 0
	for _, t := range tenants {
		n, err := s.purgeTenant(ctx, t, cutoff)
		deleted += n
		if err != nil {
			return deleted, fmt.Errorf("redis: purge %s: %w", t, err)
		}
	}
	return deleted, nil
}

func (s *Store) purgeTenant(ctx context.Context, tenant, cutoff string) (int, error) {
	index := s.indexKey(tenant)
	deleted := 0
	after := "-"
	for {
		ids, err := s.client.ZRangeByLex(ctx, index, &goredis.ZRangeBy{Min: after, Max: "+", Count: 500}).Result()
		if err != nil {
			return deleted, wrap(ctx, err)
		}
		for _, id := range ids {
			key := chatmem.Key{Tenant: tenant, ID: id}
			n, err := s.run(ctx, deleteScript, s.convKeys(key), nanos(s.now()), cutoff)
			if err != nil {
				return deleted, err
			}
			if n, _ := n.(int64); n == 0 {
				continue
			} else if n == 1 {
				deleted++
			}
			if err := s.unindex(ctx, key); err != nil {
				return deleted, err
			}
		}
		if len(ids) < 500 {
			return deleted, nil
		}
		after = "(" + ids[len(ids)-1]
	}
}

// tenants finds every tenant index under the prefix with SCAN, on every
// master of a cluster (or shard of a ring). The pattern cannot match another
// prefix's keys, because prefixes contain no ':'.
func (s *Store) tenants(ctx context.Context) ([]string, error) {
	head, tail := s.prefix+":tenant:", ":convs"
	seen := make(map[string]bool)
	var out []string
	err := s.scan(ctx, s.prefix+":tenant:*:convs", func(_ context.Context, keys []string) error {
		for _, k := range keys {
			t := strings.TrimSuffix(strings.TrimPrefix(k, head), tail)
			if chatmem.ValidateID(t) == nil && !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
		return nil
	})
	return out, err
}

// scan calls f with each batch of the keys matching pattern, found with
// SCAN on every master of a cluster (or shard of a ring); the calls are
// serialized.
func (s *Store) scan(ctx context.Context, pattern string, f func(ctx context.Context, keys []string) error) error {
	one := func(ctx context.Context, c goredis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				if err := f(ctx, keys); err != nil {
					return err
				}
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var err error
	var mu sync.Mutex // serializes f: the callbacks run in parallel
	locked := func(ctx context.Context, c *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		return one(ctx, c)
	}
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, locked)
	case *goredis.Ring:
		err = c.ForEachShard(ctx, locked)
	default:
		err = one(ctx, c)
	}
	return wrap(ctx, err)
}

// Ping reports whether Redis answers, wrapping chatmem.ErrUnavailable if not.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: ping: %w", unavailable(ctx, err))
	}
	return nil
}

// Close closes the client if Open created it; a client passed to New is the
// caller's to close.
func (s *Store) Close() error {
	if s.owned {
		return s.client.Close()
	}
	return nil
}

// run runs a script, with EVALSHA and a fallback to EVAL when Redis does not
// have it cached yet.
func (s *Store) run(ctx context.Context, script script, keys []string, args ...any) (any, error) {
	v, err := script.Run(ctx, s.client, keys, args...).Result()
	return v, wrap(ctx, err)
}

// runOnce is run for a script that must not run twice: the client's
// retries on network errors are turned off for it, because a reply lost
// after the script ran would otherwise re-run it. The commands in after
// are sent behind it in the same pipeline (and again if the script must
// be sent in full); their errors are theirs to check.
func (s *Store) runOnce(ctx context.Context, script script, keys []string, args []any, after ...goredis.Cmder) (any, error) {
	evalArgs := func(name, body string) []any {
		a := make([]any, 0, 3+len(keys)+len(args))
		a = append(a, name, body, len(keys))
		for _, k := range keys {
			a = append(a, k)
		}
		return append(a, args...)
	}
	process := func(cmd noRetryCmd) error {
		if len(after) == 0 {
			return s.client.Process(ctx, cmd)
		}
		// Pipelined returns the first failed command's error; the
		// script's is the one that counts here, the others' stay in
		// their commands.
		_, _ = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			p.Process(ctx, cmd)
			for _, c := range after {
				p.Process(ctx, c)
			}
			return nil
		})
		return cmd.Err()
	}
	cmd := noRetryCmd{goredis.NewCmd(ctx, evalArgs("evalsha", script.Hash())...)}
	err := process(cmd)
	if goredis.HasErrorPrefix(err, "NOSCRIPT") {
		// The script did not run; send it in full (once more, at most).
		cmd = noRetryCmd{goredis.NewCmd(ctx, evalArgs("eval", script.src)...)}
		err = process(cmd)
	}
	if err != nil {
		return nil, wrap(ctx, err)
	}
	return cmd.Val(), nil
}

// noRetryCmd is a command the client must send at most once.
type noRetryCmd struct{ *goredis.Cmd }

func (noRetryCmd) NoRetry() bool { return true }

// wrap translates a go-redis error: goredis.Nil becomes chatmem.ErrNotFound,
// cancellation keeps context.Canceled (or DeadlineExceeded) visible to
// errors.Is, transient failures wrap chatmem.ErrUnavailable, and other
// server replies (a script error, WRONGTYPE) pass through.
func wrap(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, goredis.Nil):
		return chatmem.ErrNotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) && !transient(err) {
		return err
	}
	return fmt.Errorf("%w: %w", chatmem.ErrUnavailable, err)
}

// unavailable is wrap for a call whose every failure means the backend is
// not usable.
func unavailable(ctx context.Context, err error) error {
	err = wrap(ctx, err)
	if err == nil || errors.Is(err, chatmem.ErrUnavailable) || ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: %w", chatmem.ErrUnavailable, err)
}

// transient reports the server replies that mean "not now" rather than
// "never".
func transient(err error) bool {
	for _, p := range []string{"LOADING", "BUSY", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "READONLY", "NOREPLICAS", "MAXCLIENTS"} {
		if goredis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

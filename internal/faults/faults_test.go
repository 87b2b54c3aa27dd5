package faults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// The environment of a helper process: the test binary started again as a
// writer instead of a test run.
const (
	helperEnv = "CHATMEM_FAULTS_HELPER" // the helper to run: sqlite-writer, summary-writer, proxy-server
	dbEnv     = "CHATMEM_FAULTS_DB"     // the SQLite file
	streamEnv = "CHATMEM_FAULTS_STREAM" // names this run in its markers, e.g. "r07"
	seedEnv   = "CHATMEM_FAULTS_SEED"
	finalEnv  = "CHATMEM_FAULTS_FINAL" // "1": append a fixed amount, finish the work, exit
)

// summaryEnv names a file each test appends its summary line to.
const summaryEnv = "CHATMEM_FAULTS_SUMMARY"

// TestMain runs a helper instead of the tests when helperEnv names one.
func TestMain(m *testing.M) {
	role := os.Getenv(helperEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	// A helper whose parent died is killed by the broken pipe at its next
	// write; this bounds one that never writes again.
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
	var err error
	switch role {
	case "sqlite-writer":
		err = sqliteWriter()
	case "summary-writer":
		err = summaryWriter()
	case "proxy-server":
		err = proxyServer()
	default:
		err = fmt.Errorf("unknown helper %q", role)
	}
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// seedFromClock returns a seed for a test's random choices and logs it.
func seedFromClock(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return seed
}

// report logs the fault kind's summary line, appends it to $CHATMEM_FAULTS_SUMMARY
// if set, and fails t unless every acknowledged append was found.
func report(t *testing.T, kind string, faults, acknowledged, found, conversations int) {
	t.Helper()
	line := fmt.Sprintf("faults: %s: faults=%d acknowledged=%d found=%d conversations=%d", kind, faults, acknowledged, found, conversations)
	t.Log(line)
	if path := os.Getenv(summaryEnv); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			_, err = f.WriteString(line + "\n")
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			t.Errorf("%s: %v", summaryEnv, err)
		}
	}
	if found != acknowledged {
		t.Errorf("%s: found %d of %d acknowledged appends", kind, found, acknowledged)
	}
	if acknowledged == 0 {
		t.Errorf("%s: no append was acknowledged; the test exercised nothing", kind)
	}
}

// content is the text of a message: its marker, unique in the test, then
// words about an order, so that the offline summarizer has something to keep.
func content(marker string, role chatmem.Role) string {
	if role == chatmem.RoleUser {
		return marker + ": Hi, this is Kavya, order SE-10423 has not arrived yet, can you check it?"
	}
	return marker + ": I am checking order SE-10423 for you now; it should arrive by Friday."
}

// batch returns n messages, user and assistant in turn, with markers
// prefix-0, prefix-1, ...
func batch(prefix string, n int) []chatmem.Message {
	msgs := make([]chatmem.Message, n)
	for i := range msgs {
		role := chatmem.RoleUser
		if i%2 == 1 {
			role = chatmem.RoleAssistant
		}
		msgs[i] = chatmem.Message{Role: role, Content: content(fmt.Sprintf("%s-%d", prefix, i), role)}
	}
	return msgs
}

// ack is one acknowledged append: the messages as the store numbered them.
type ack struct {
	stream string // the client (process and goroutine) that appended
	conv   string // the conversation's ID
	seqs   []int64
	roles  []chatmem.Role
	texts  []string
}

// ledger collects acknowledged appends, from any goroutine.
type ledger struct {
	mu   sync.Mutex
	acks []ack
}

func (l *ledger) add(a ack) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
}

func (l *ledger) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// messages returns how many messages the acknowledged appends hold.
func (l *ledger) messages() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.acks {
		n += len(a.seqs)
	}
	return n
}

// ackOf returns the ack of an append result.
func ackOf(stream, conv string, res chatmem.AppendResult) ack {
	a := ack{stream: stream, conv: conv}
	for _, m := range res.Messages {
		a.seqs = append(a.seqs, m.Seq)
		a.roles = append(a.roles, m.Role)
		a.texts = append(a.texts, m.Content)
	}
	return a
}

// ackLine is how a helper process acknowledges an append on stdout:
//
//	ack <stream> <conv> <seq>:<role>:<marker> ...
func ackLine(stream, conv string, msgs []chatmem.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ack %s %s", stream, conv)
	for _, m := range msgs {
		marker, _, _ := strings.Cut(m.Content, ":")
		fmt.Fprintf(&b, " %d:%s:%s", m.Seq, m.Role, marker)
	}
	b.WriteByte('\n')
	return b.String()
}

// parseAck parses an ackLine (without its newline).
func parseAck(line string) (ack, error) {
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "ack" {
		return ack{}, fmt.Errorf("not an ack line: %q", line)
	}
	a := ack{stream: f[1], conv: f[2]}
	for _, m := range f[3:] {
		parts := strings.SplitN(m, ":", 3)
		if len(parts) != 3 {
			return ack{}, fmt.Errorf("bad message %q in ack line %q", m, line)
		}
		seq, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			return ack{}, fmt.Errorf("bad seq in ack line %q: %v", line, err)
		}
		role := chatmem.Role(parts[1])
		a.seqs = append(a.seqs, seq)
		a.roles = append(a.roles, role)
		a.texts = append(a.texts, content(parts[2], role))
	}
	return a, nil
}

// stdoutLines writes whole lines to stdout, one write each, so lines of
// concurrent writers never interleave and a kill leaves at most the last
// line unfinished.
type stdoutLines struct{ mu sync.Mutex }

func (o *stdoutLines) print(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := os.Stdout.WriteString(line); err != nil {
		os.Exit(4) // the parent is gone
	}
}

// helper is a running helper process: the test binary started again with
// helperEnv set. Its complete stdout lines arrive on lines, which is closed
// at EOF; a line cut short by a kill is dropped, so it acknowledges nothing.
type helper struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr bytes.Buffer
	waited atomic.Bool
}

// startHelper starts the helper role with the extra environment env. The
// process is killed when ctx ends or the test does.
func startHelper(t *testing.T, ctx context.Context, role string, env ...string) *helper {
	t.Helper()
	h := &helper{lines: make(chan string, 1<<16)}
	h.cmd = exec.CommandContext(ctx, os.Args[0])
	h.cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
	h.cmd.Stderr = &h.stderr
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", role, err)
	}
	t.Cleanup(func() { h.kill() })
	go func() {
		defer close(h.lines)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // EOF, or the pipe closed by Wait; a partial line is dropped
			}
			h.lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	return h
}

// kill sends SIGKILL (if the process still runs) and waits for it to end.
func (h *helper) kill() {
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	h.wait()
}

// wait waits for the process to end, once. Lines the caller has not taken
// are discarded: Wait must come after the reader reached EOF, as it closes
// the pipe.
func (h *helper) wait() error {
	if h.waited.Swap(true) {
		return nil
	}
	for range h.lines {
	}
	return h.cmd.Wait()
}

// consume reads lines until until returns true for one, or the process
// ends, or ctx ends; every line goes to handle first. It reports whether a
// line satisfied until.
func (h *helper) consume(ctx context.Context, handle func(string), until func(string) bool) bool {
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				return false
			}
			handle(line)
			if until != nil && until(line) {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// consumeFor handles lines for d, or until the process ends.
func (h *helper) consumeFor(ctx context.Context, d time.Duration, handle func(string)) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	h.consume(ctx, handle, nil)
}

// killAndDrain kills the process and handles every complete line it
// wrote. It returns an error, with the process's stderr, if the process
// had ended before the kill.
func (h *helper) killAndDrain(handle func(string)) error {
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	for line := range h.lines {
		handle(line)
	}
	err := h.wait()
	if ws, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return nil
	}
	return fmt.Errorf("the helper ended before it was killed (%v): %s", err, h.stderr.String())
}

// lineHandler returns the handler of a helper's lines: acks go to led,
// an error line fails t.
func lineHandler(t *testing.T, led *ledger, other func(string)) func(string) {
	return func(line string) {
		switch {
		case strings.HasPrefix(line, "ack "):
			a, err := parseAck(line)
			if err != nil {
				t.Error(err)
				return
			}
			led.add(a)
		case strings.HasPrefix(line, "error "):
			t.Errorf("helper: %s", line)
		case other != nil:
			other(line)
		}
	}
}

// verifyOptions qualify verify.
type verifyOptions struct {
	// sent, if not nil, holds every text a client tried to append: a
	// stored text not in it was never sent.
	sent map[string]bool
}

// verify checks every conversation of keys in s against led and returns how
// many acknowledged appends it found as acknowledged: each message at its
// seq with its role and text. It also checks that sequence numbers are dense
// (1..LastSeq, LastSeq the message count), no text is stored twice, each
// stream's appends to a conversation are in the order it made them, and
// the conversation's running totals match its messages.
func verify(t *testing.T, ctx context.Context, s chatmem.Store, keys []chatmem.Key, led *ledger, opts verifyOptions) (found int) {
	t.Helper()
	led.mu.Lock()
	acks := append([]ack(nil), led.acks...)
	led.mu.Unlock()
	stored := map[string][]chatmem.Message{}
	for _, key := range keys {
		conv, err := s.Conversation(ctx, key)
		if errors.Is(err, chatmem.ErrNotFound) {
			continue // nothing appended to it (or lost: the acks tell)
		}
		if err != nil {
			t.Errorf("Conversation(%s): %v", key, err)
			continue
		}
		msgs, err := s.Range(ctx, key, 0, 0)
		if err != nil {
			t.Errorf("Range(%s): %v", key, err)
			continue
		}
		stored[key.ID] = msgs
		checkDense(t, key, conv, msgs, opts.sent)
	}

	errs := 0
	last := map[string]int64{} // stream and conversation: the last acked seq
	for _, a := range acks {
		msgs := stored[a.conv]
		ok := true
		for i, seq := range a.seqs {
			if seq < 1 || seq > int64(len(msgs)) || msgs[seq-1].Role != a.roles[i] || msgs[seq-1].Content != a.texts[i] {
				ok = false
				if errs++; errs <= 5 {
					got := "nothing"
					if seq >= 1 && seq <= int64(len(msgs)) {
						got = fmt.Sprintf("%s %q", msgs[seq-1].Role, msgs[seq-1].Content)
					}
					t.Errorf("%s: acknowledged seq %d (%s %q) holds %s", a.conv, seq, a.roles[i], a.texts[i], got)
				}
			}
		}
		if ok {
			found++
		}
		k := a.stream + "\x00" + a.conv
		if len(a.seqs) > 0 {
			if a.seqs[0] <= last[k] {
				t.Errorf("%s: stream %s was acknowledged seq %d after seq %d: out of order", a.conv, a.stream, a.seqs[0], last[k])
			}
			last[k] = a.seqs[len(a.seqs)-1]
		}
	}
	if errs > 5 {
		t.Errorf("... and %d more acknowledged messages not found as acknowledged", errs-5)
	}
	return found
}

// checkDense checks one conversation's stored messages: seqs 1..n with n ==
// LastSeq, every text once (and sent, if sent is not nil), and Tokens and
// Turns equal to what the messages add up to.
func checkDense(t *testing.T, key chatmem.Key, conv chatmem.Conversation, msgs []chatmem.Message, sent map[string]bool) {
	t.Helper()
	if conv.LastSeq != int64(len(msgs)) {
		t.Errorf("%s: LastSeq = %d, but %d messages are stored", key, conv.LastSeq, len(msgs))
	}
	seen := make(map[string]int64, len(msgs))
	var tokens, turns int64
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Errorf("%s: message %d has seq %d, want %d (dense, no repeats)", key, i, m.Seq, i+1)
			return
		}
		if prev, ok := seen[m.Content]; ok {
			t.Errorf("%s: %q stored twice, at seq %d and %d", key, m.Content, prev, m.Seq)
		}
		seen[m.Content] = m.Seq
		if sent != nil && !sent[m.Content] {
			t.Errorf("%s: seq %d holds %q, which no client sent", key, m.Seq, m.Content)
		}
		if m.Role != chatmem.RoleSystem {
			tokens += int64(m.Tokens)
		}
		if m.Role == chatmem.RoleUser {
			turns++
		}
	}
	if conv.Tokens != tokens || conv.Turns != turns {
		t.Errorf("%s: Tokens, Turns = %d, %d; the messages add up to %d, %d", key, conv.Tokens, conv.Turns, tokens, turns)
	}
}

// clients is a set of in-process clients appending through one Memory
// while faults are injected: each appends batches to one conversation,
// retrying a failed append with backoff under the same IdempotencyKey
// until it succeeds, so that a retry after an ambiguous failure replays
// instead of appending twice. Every error must wrap chatmem.ErrUnavailable.
type clients struct {
	t      *testing.T
	mem    *chatmem.Memory
	keys   []chatmem.Key
	led    ledger
	failed atomic.Int64 // failed attempts (all ErrUnavailable)
	sample atomic.Value // the first failed attempt's error, for the log
	replay atomic.Int64 // retries that replayed an append stored before
	acked  []atomic.Int64

	mu   sync.Mutex
	sent map[string]bool

	stop chan struct{}
	wg   sync.WaitGroup
}

// startClients starts n clients over mem, client i appending to keys[i%len(keys)].
func startClients(t *testing.T, ctx context.Context, mem *chatmem.Memory, keys []chatmem.Key, n int, seed uint64) *clients {
	c := &clients{t: t, mem: mem, keys: keys, acked: make([]atomic.Int64, n), sent: map[string]bool{}, stop: make(chan struct{})}
	for i := range n {
		c.wg.Go(func() { c.run(ctx, i, rand.New(rand.NewPCG(seed, uint64(i)))) })
	}
	t.Cleanup(c.close)
	return c
}

func (c *clients) run(ctx context.Context, i int, rng *rand.Rand) {
	key := c.keys[i%len(c.keys)]
	stream := fmt.Sprintf("c%d", i)
	for n := 0; ; n++ {
		select {
		case <-c.stop:
			return
		default:
		}
		marker := fmt.Sprintf("%s-%05d", stream, n)
		msgs := batch(marker, 1+rng.IntN(2))
		c.mu.Lock()
		for _, m := range msgs {
			c.sent[m.Content] = true
		}
		c.mu.Unlock()
		backoff := 5 * time.Millisecond
		for attempt := 0; ; attempt++ {
			// A generous bound: the clients' own timeouts, not this one,
			// end an attempt against a server that is down.
			actx, cancel := context.WithTimeout(ctx, 20*time.Second)
			res, err := c.mem.Append(actx, key, msgs, chatmem.AppendOptions{IdempotencyKey: marker})
			cancel()
			if err == nil {
				c.check(key, msgs, res, attempt)
				c.led.add(ackOf(stream, key.ID, res))
				c.acked[i].Add(1)
				break
			}
			if ctx.Err() != nil {
				return // the test's time is up; the test reports it
			}
			if !errors.Is(err, chatmem.ErrUnavailable) {
				c.t.Errorf("client %s: Append(%s) attempt %d: %v; want an error wrapping chatmem.ErrUnavailable", stream, marker, attempt+1, err)
				return
			}
			c.failed.Add(1)
			c.sample.CompareAndSwap(nil, err.Error())
			select {
			case <-time.After(backoff + rand.N(backoff)):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 200*time.Millisecond)
		}
	}
}

// check checks an acknowledged append's result: the messages sent, a
// replay only on a retry.
func (c *clients) check(key chatmem.Key, msgs []chatmem.Message, res chatmem.AppendResult, attempt int) {
	if res.Replayed {
		c.replay.Add(1)
		if attempt == 0 {
			c.t.Errorf("%s: the first attempt of an append replayed: its idempotency key was used before", key)
		}
	}
	if len(res.Messages) != len(msgs) {
		c.t.Errorf("%s: Append returned %d messages, want %d", key, len(res.Messages), len(msgs))
		return
	}
	for j, m := range res.Messages {
		if m.Content != msgs[j].Content || m.Role != msgs[j].Role {
			c.t.Errorf("%s: Append (replayed %v) returned %s %q at %d, want %s %q", key, res.Replayed, m.Role, m.Content, j, msgs[j].Role, msgs[j].Content)
		}
	}
}

// ackedEach returns how many appends each client has had acknowledged.
func (c *clients) ackedEach() []int64 {
	out := make([]int64, len(c.acked))
	for i := range c.acked {
		out[i] = c.acked[i].Load()
	}
	return out
}

// waitProgress waits until every client has had an append acknowledged
// since before, or ctx ends; it reports whether they all did.
func (c *clients) waitProgress(ctx context.Context, before []int64) bool {
	for {
		all := true
		for i, n := range c.ackedEach() {
			all = all && n > before[i]
		}
		if all {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// close stops the clients after their current append and waits for them.
func (c *clients) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

// sentTexts returns every text the clients tried to append.
func (c *clients) sentTexts() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(c.sent))
	for k := range c.sent {
		out[k] = true
	}
	return out
}

// sleep sleeps for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// keysOf returns conversations conv-0..conv-(n-1) of tenant "faults".
func keysOf(n int) []chatmem.Key {
	keys := make([]chatmem.Key, n)
	for i := range keys {
		keys[i] = chatmem.Key{Tenant: "faults", ID: fmt.Sprintf("conv-%d", i)}
	}
	return keys
}

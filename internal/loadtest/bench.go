// Package loadtest measures and stresses chatmem: the per-turn cost of a
// Memory on a store (Bench), an HTTP load against a running server with a
// check that no acknowledged append was lost (Load), and a long soak of a
// server with a mix of requests, an exact log of what it acknowledged and
// a watch on its memory and goroutines (Soak). `chatmem bench` is their
// command line.
package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/progress"
)

// BenchConfig is one measurement of Bench.
type BenchConfig struct {
	// Policy is the context read after each append.
	Policy chatmem.Policy
	// Messages is the size the conversation is filled to first.
	Messages int
	// Iterations is the number of measured turns (after 10 of warm-up).
	Iterations int
	// Floor, for token_budget without facts, makes the store's raw floor
	// of a turn on a conversation of n messages of content (Bench calls it
	// once, after the fill, and drops the floor afterwards): the same job
	// done directly on the backend, with the store's own client or driver
	// (internal/floor: redisfloor, postgresfloor, sqlitefloor), or, for the
	// in-process store, LoopFloor. Nil: no store floor is measured.
	Floor func(ctx context.Context, n int, content string) (StoreFloor, error)
	// Reopen, for token_budget without facts, opens the store again as a
	// new process would (a new client or pool, through the same path), for
	// the first turns Bench measures; Bench closes what it returns. Nil: no
	// first turns are measured (the in-process store, which another process
	// cannot open).
	Reopen func(ctx context.Context) (chatmem.Store, error)
}

// StoreFloor is a store's raw floor of Bench's turn, which the Floors of
// redisfloor, postgresfloor and sqlitefloor (internal/floor) are. Its methods
// need not be safe for concurrent use.
type StoreFloor interface {
	// Turn appends a user message of content and reads the newest
	// messages back, in one round trip where the backend allows it, and
	// returns the backend's error.
	Turn(ctx context.Context, content string) error
	// Drop deletes what the floor made (its list, table or file).
	Drop(ctx context.Context) error
}

// firstTurnEvery and maxFirstTurns: Bench measures a new process's first
// turn after every firstTurnEvery-th measured iteration, at most
// maxFirstTurns times (storetest.BenchmarkTurnFloor's pace).
const (
	firstTurnEvery = 25
	maxFirstTurns  = 40
)

// UserConversations is how many conversations of one user Bench spreads
// n messages over for a policy with scope user: one per 100 messages, at
// least 1 and at most 1,000 (1,000 messages over 10 conversations,
// 1,000,000 over 1,000).
func UserConversations(n int) int { return min(1000, max(1, n/100)) }

// BenchResult is one line of `chatmem bench --json`.
type BenchResult struct {
	Store    string `json:"store"`
	Policy   string `json:"policy"`
	Messages int    `json:"messages"`
	Budget   int    `json:"budget"`
	// Scope and Conversations: with scope user, the messages are spread
	// over Conversations conversations of one user.
	Scope          string  `json:"scope,omitempty"`
	Conversations  int     `json:"conversations,omitempty"`
	P50us          float64 `json:"p50_us"`
	P99us          float64 `json:"p99_us"`
	WindowMessages int     `json:"window_messages"`
	FillSeconds    float64 `json:"fill_s"`
	// FloorP50us is the p50 of the same turns made by a plain Go loop in
	// the same process, over a slice (LoopWindow), and FloorRatio is P50us
	// over it: how far a turn is from its in-process floor. Set
	// for token_budget without facts, the window the loop makes.
	FloorP50us float64 `json:"floor_p50_us,omitempty"`
	FloorRatio float64 `json:"floor_ratio,omitempty"`
	// TurnP50us is the p50 of the same turn as one Memory.Turn call, and
	// StoreFloorP50us the p50 of the store's raw floor of it
	// (BenchConfig.Floor); TurnFloorRatio is TurnP50us over
	// StoreFloorP50us: how far a turn is from the same job done raw on the
	// backend (docs/performance.md). FirstTurnP50us is the p50
	// of a new process's first turn (Memory.Turn of a new Memory on the
	// store opened again, BenchConfig.Reopen), and FirstTurnRatio is it
	// over TurnP50us: what a cold start costs against a steady turn. Set for token_budget without
	// facts; the store floor's and the first turn's with a Floor and a
	// Reopen. The append+context turn (P50us), the Memory.Turn and the
	// floor are measured in one loop, in rotating order, and a first turn
	// after every 25th iteration (at most 40).
	TurnP50us       float64 `json:"turn_p50_us,omitempty"`
	StoreFloorP50us float64 `json:"store_floor_p50_us,omitempty"`
	TurnFloorRatio  float64 `json:"turn_floor_ratio,omitempty"`
	FirstTurnP50us  float64 `json:"first_turn_p50_us,omitempty"`
	FirstTurnRatio  float64 `json:"first_turn_ratio,omitempty"`
}

// benchContent is about 40 tokens under the seed's estimator.
const benchContent = "Customer asks where order SE-10423 is; the agent says it is out for delivery and should arrive by 8 pm, and offers running socks for Rs 249."

// Bench fills a new conversation of mem's store with cfg.Messages
// messages (drawing a progress bar on progress), then measures per-turn
// cost: append one message and read the context under cfg.Policy, as a
// chat backend does once per user message. The conversation is deleted
// afterwards. Recall policies get text of a Zipf vocabulary, so that their
// search meets rare and common words as in chats. With scope user
// (cfg.Policy.Scope), the messages fill UserConversations(n)
// conversations of one user instead, one after the other, and the turns
// are those of a new conversation of that user, which recalls from all of
// them; the user is erased afterwards.
func Bench(ctx context.Context, mem *chatmem.Memory, cfg BenchConfig, log io.Writer) (BenchResult, error) {
	p, n, iterations := cfg.Policy, cfg.Messages, cfg.Iterations
	if n < 1 || iterations < 1 {
		return BenchResult{}, errors.New("bench: needs at least one message and one iteration")
	}
	var suffix [4]byte
	rand.Read(suffix[:])
	key := chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("bench-%d-%s", n, hex.EncodeToString(suffix[:]))}
	convs := 1
	var opts chatmem.AppendOptions // of the measured conversation
	fillKey := func(int) chatmem.Key { return key }
	if p.Scope == chatmem.ScopeUser {
		convs = UserConversations(n)
		opts.User = key.ID
		user := chatmem.Key{Tenant: key.Tenant, ID: key.ID}
		defer mem.DeleteUser(context.WithoutCancel(ctx), user)
		// Message i goes to conversation i*convs/n: in order, one after
		// the other; the measured conversation is a new one.
		base := key.ID
		fillKey = func(i int) chatmem.Key {
			return chatmem.Key{Tenant: key.Tenant, ID: fmt.Sprintf("%s-c%d", base, i*convs/n)}
		}
		key.ID += "-now"
	} else {
		defer mem.Store().Delete(context.WithoutCancel(ctx), key)
	}

	text := func(i int) string { return fmt.Sprintf("%d: %s", i, benchContent) }
	if p.Kind == chatmem.PolicyRecall || p.Recall {
		// Recall searches the words: one sentence repeated would make every
		// term common. Sentences of a Zipf vocabulary have rare and common
		// words, as chats do.
		text = zipfText
	}
	message := func(i int) chatmem.Message {
		role := chatmem.RoleUser
		if i%2 == 1 {
			role = chatmem.RoleAssistant
		}
		return chatmem.Message{Role: role, Content: text(i)}
	}
	start := time.Now()
	bar := progress.New(log, fmt.Sprintf("filling %d messages", n), n)
	batch := make([]chatmem.Message, 0, 1000)
	for i := 0; i < n; i++ {
		batch = append(batch, message(i))
		if len(batch) == cap(batch) || i == n-1 || fillKey(i+1) != fillKey(i) {
			if _, err := mem.Append(ctx, fillKey(i), batch, chatmem.AppendOptions{User: opts.User}); err != nil {
				return BenchResult{}, err
			}
			batch = batch[:0]
			bar.Set(i + 1)
		}
	}
	bar.Done()
	fill := time.Since(start)
	// With token_budget without facts, the same turn as one Memory.Turn,
	// the store's floor and a new process's first turn are measured beside
	// the append+context turn.
	floors := p.Kind == chatmem.PolicyTokenBudget && !p.Facts
	var floor StoreFloor
	if floors && cfg.Floor != nil {
		var err error
		if floor, err = cfg.Floor(ctx, n, text(0)); err != nil {
			return BenchResult{}, fmt.Errorf("bench: the store's floor: %w", err)
		}
		defer floor.Drop(context.WithoutCancel(ctx))
	}
	// Reach a steady state before measuring: the worker has caught up with
	// the fill (summaries, facts), and the collector has finished with the
	// fill's garbage, so the turns pay for neither.
	if err := mem.Flush(ctx); err != nil {
		return BenchResult{}, err
	}
	runtime.GC()

	// Each turn appends the next message and reads the context, as a chat
	// backend does once per user message. A few warm-up turns come first.
	// With floors on, each iteration makes the turn three ways in rotating
	// order (Append then Context; Memory.Turn; the floor), so that a busy
	// machine slows them alike.
	const warmup = 10
	var window int
	k := n // the next message's number
	appendContext := func() error {
		if _, err := mem.Append(ctx, key, []chatmem.Message{message(k)}, opts); err != nil {
			return err
		}
		k++
		w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
		window = len(w.Messages)
		return err
	}
	turn := func(m *chatmem.Memory) error {
		msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: text(k)}}
		k++
		if _, w, err := m.Turn(ctx, key, msg, opts, p, chatmem.ContextOptions{}); err != nil || len(w.Messages) == 0 {
			return fmt.Errorf("bench: Memory.Turn: %d messages, %w", len(w.Messages), err)
		}
		return nil
	}
	ops := []func() error{appendContext}
	if floors {
		ops = append(ops, func() error { return turn(mem) })
		if floor != nil {
			ops = append(ops, func() error {
				k++
				return floor.Turn(ctx, text(k-1))
			})
		}
	}
	timings := make([][]time.Duration, len(ops))
	for j := range timings {
		timings[j] = make([]time.Duration, 0, iterations)
	}
	var firsts []time.Duration
	for i := 0; i < warmup+iterations; i++ {
		for j := range ops {
			op := (i + j) % len(ops)
			t0 := time.Now()
			if err := ops[op](); err != nil {
				return BenchResult{}, err
			}
			if i >= warmup {
				timings[op] = append(timings[op], time.Since(t0))
			}
		}
		if floors && cfg.Reopen != nil && i >= warmup && (i-warmup)%firstTurnEvery == 0 && len(firsts) < maxFirstTurns {
			d, err := firstTurn(ctx, mem, cfg.Reopen, turn)
			if err != nil {
				return BenchResult{}, err
			}
			firsts = append(firsts, d)
		}
	}
	for _, d := range timings {
		slices.Sort(d)
	}
	slices.Sort(firsts)
	durations := timings[0]
	r := BenchResult{Policy: string(p.Kind), Messages: n, Budget: p.Budget, P50us: percentile(durations, 0.50),
		P99us: percentile(durations, 0.99), WindowMessages: window, FillSeconds: fill.Seconds()}
	if floors {
		counter, err := mem.Counter("")
		if err != nil {
			return BenchResult{}, err
		}
		loop, err := benchFloor(ctx, counter, message, n, warmup, iterations, p.Budget)
		if err != nil {
			return BenchResult{}, err
		}
		r.FloorP50us, r.FloorRatio = loop, r.P50us/loop
		r.TurnP50us = percentile(timings[1], 0.50)
		if len(timings) > 2 {
			r.StoreFloorP50us = percentile(timings[2], 0.50)
			r.TurnFloorRatio = r.TurnP50us / r.StoreFloorP50us
		}
		if len(firsts) > 0 {
			r.FirstTurnP50us = percentile(firsts, 0.50)
			r.FirstTurnRatio = r.FirstTurnP50us / r.TurnP50us
		}
	}
	if p.Scope == chatmem.ScopeUser {
		r.Scope, r.Conversations = p.Scope, convs
	}
	// The deletion (deferred) of a large fill takes a while: say what was
	// measured first.
	fmt.Fprintf(log, "measured %d turns at %d messages: p50 %.0f µs, p99 %.0f µs; deleting the benchmark's messages\n", iterations, n, r.P50us, r.P99us)
	return r, nil
}

// firstTurn opens the store again with reopen, as a new process would,
// and times turn on a new Memory over it (with mem's counter), from the
// Memory's first call: a new process's first turn on the conversation.
func firstTurn(ctx context.Context, mem *chatmem.Memory, reopen func(context.Context) (chatmem.Store, error), turn func(*chatmem.Memory) error) (time.Duration, error) {
	counter, err := mem.Counter("")
	if err != nil {
		return 0, err
	}
	s, err := reopen(ctx)
	if err != nil {
		return 0, fmt.Errorf("bench: reopen the store: %w", err)
	}
	defer s.Close()
	m, err := chatmem.New(s, chatmem.Options{Counter: counter})
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := turn(m); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// percentile returns the q-quantile of sorted durations, in µs.
func percentile(sorted []time.Duration, q float64) float64 {
	return float64(sorted[int(q*float64(len(sorted)-1))].Nanoseconds()) / 1e3
}

// benchFloor makes Bench's turns with a plain Go loop (loopFloor: a slice
// of n messages counted once by counter, then per turn the next one
// appended and LoopWindow read) and returns their p50 in µs.
func benchFloor(ctx context.Context, counter chatmem.Counter, message func(int) chatmem.Message, n, warmup, iterations, budget int) (float64, error) {
	f := &loopFloor{counter: counter, budget: budget, msgs: make([]chatmem.Message, 0, n+warmup+iterations)}
	for i := range n {
		if err := f.add(ctx, message(i)); err != nil {
			return 0, err
		}
	}
	runtime.GC()
	durations := make([]time.Duration, 0, iterations)
	for i := 0; i < warmup+iterations; i++ {
		t0 := time.Now()
		if err := f.turn(ctx, message(n+i)); err != nil {
			return 0, err
		}
		if i >= warmup {
			durations = append(durations, time.Since(t0))
		}
	}
	slices.Sort(durations)
	return percentile(durations, 0.50), nil
}

// LoopFloor returns BenchConfig.Floor for the in-process store: the Go
// loop of benchFloor as a StoreFloor, its n messages and each turn's
// counted with counter, each turn's window read with LoopWindow at budget.
func LoopFloor(counter chatmem.Counter, budget int) func(ctx context.Context, n int, content string) (StoreFloor, error) {
	return func(ctx context.Context, n int, content string) (StoreFloor, error) {
		f := &loopFloor{counter: counter, budget: budget, msgs: make([]chatmem.Message, 0, n+max(n/4, 1024))}
		for i := range n {
			role := chatmem.RoleUser
			if i%2 == 1 {
				role = chatmem.RoleAssistant
			}
			if err := f.add(ctx, chatmem.Message{Role: role, Content: content}); err != nil {
				return nil, err
			}
		}
		return f, nil
	}
}

// loopFloor is LoopFloor's StoreFloor.
type loopFloor struct {
	counter chatmem.Counter
	budget  int
	msgs    []chatmem.Message
}

// add appends m, counted.
func (f *loopFloor) add(ctx context.Context, m chatmem.Message) error {
	var err error
	m.Tokens, err = f.counter.Count(ctx, m)
	f.msgs = append(f.msgs, m)
	return err
}

// turn appends m and reads the window.
func (f *loopFloor) turn(ctx context.Context, m chatmem.Message) error {
	if err := f.add(ctx, m); err != nil {
		return err
	}
	if len(LoopWindow(f.msgs, f.budget)) == 0 {
		return fmt.Errorf("%w: the Go loop's window at budget %d is empty", chatmem.ErrBudgetTooSmall, f.budget)
	}
	return nil
}

// Turn appends a user message of content and reads the window.
func (f *loopFloor) Turn(ctx context.Context, content string) error {
	return f.turn(ctx, chatmem.Message{Role: chatmem.RoleUser, Content: content})
}

// Reply appends an assistant message of content.
func (f *loopFloor) Reply(ctx context.Context, content string) error {
	return f.add(ctx, chatmem.Message{Role: chatmem.RoleAssistant, Content: content})
}

// Drop lets the messages go.
func (f *loopFloor) Drop(context.Context) error {
	f.msgs = nil
	return nil
}

// LoopWindow is the in-process floor of a token_budget window: the seed's
// window(messages, budget) as a plain Go loop over msgs, whose Tokens are
// counted already. It walks back from the end summing the counts while
// they fit budget, drops leading non-user messages, and returns a copy.
// It knows nothing of system messages or tool calls; the benchmarks it is
// the floor of have none.
func LoopWindow(msgs []chatmem.Message, budget int) []chatmem.Message {
	used, start := 0, len(msgs)
	for start > 0 {
		t := msgs[start-1].Tokens
		if used+t > budget {
			break
		}
		used += t
		start--
	}
	for start < len(msgs) && msgs[start].Role != chatmem.RoleUser {
		start++
	}
	return append([]chatmem.Message(nil), msgs[start:]...)
}

// WriteBench writes results as JSON lines, or as a table (a column per
// BenchResult field, "-" for one not measured) with the ratio of the last
// size's p50 to the first's.
func WriteBench(w io.Writer, results []BenchResult, asJSON bool) error {
	if asJSON {
		return writeJSONLines(w, results)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tpolicy\tmessages\tbudget\tp50 µs\tp99 µs\tGo loop p50 µs\tratio\t"+
		"Memory.Turn p50 µs\tstore floor p50 µs\tturn/floor\tfirst turn p50 µs\tfirst/turn\twindow msgs\tfill s\t")
	for _, r := range results {
		policy, messages := r.Policy, strconv.Itoa(r.Messages)
		if r.Scope != "" {
			policy += "/" + r.Scope
			messages += " in " + strconv.Itoa(r.Conversations) + " convs"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.1f\t\n", r.Store, policy, messages, r.Budget, r.P50us, r.P99us,
			cell("%.1f", r.FloorP50us), cell("%.2fx", r.FloorRatio), cell("%.0f", r.TurnP50us), cell("%.1f", r.StoreFloorP50us),
			cell("%.2fx", r.TurnFloorRatio), cell("%.0f", r.FirstTurnP50us), cell("%.2fx", r.FirstTurnRatio), r.WindowMessages, r.FillSeconds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(results) > 1 {
		first, last := results[0], results[len(results)-1]
		fmt.Fprintf(w, "p50 at %d messages / p50 at %d: %.2fx\n", last.Messages, first.Messages, last.P50us/first.P50us)
	}
	return nil
}

// cell formats v for a table, or "-" when it was not measured (zero).
func cell(format string, v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// writeJSONLines writes each of results as one line of JSON.
func writeJSONLines[T any](w io.Writer, results []T) error {
	enc := json.NewEncoder(w)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// benchVocabulary is 5,000 made-up words, the same on every run.
var benchVocabulary = func() []string {
	syllables := strings.Fields("ba ko mi ru te sa no li pe da gu fi ro ne ta vi lo su ke ma")
	words := make([]string, 0, 5000)
	for i := 0; len(words) < cap(words); i++ {
		var b strings.Builder
		for n := i; ; n /= len(syllables) {
			b.WriteString(syllables[n%len(syllables)])
			if n < len(syllables) {
				break
			}
		}
		if b.Len() >= 4 {
			words = append(words, b.String())
		}
	}
	return words
}()

// zipfText returns message i's text for recall benchmarks: 8 to 23 words
// of benchVocabulary drawn with Zipf frequencies (s = 1.1), the same for
// the same i.
func zipfText(i int) string {
	r := mrand.New(mrand.NewSource(int64(i)))
	z := mrand.NewZipf(r, 1.1, 1, uint64(len(benchVocabulary)-1))
	n := 8 + r.Intn(16)
	words := make([]string, n)
	for j := range words {
		words[j] = benchVocabulary[z.Uint64()]
	}
	return strings.Join(words, " ")
}

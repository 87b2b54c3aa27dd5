package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/chatmem/chatmem"
)

// ChatFloor is a store's raw floor of a chat turn as users make it: the
// user's message appended and the newest messages read back (Turn), then
// the assistant's reply appended (Reply) before the next turn. The Floors
// of redisfloor, postgresfloor and sqlitefloor (internal/floor) are
// ChatFloors, and so is LoopFloor's. Its methods need not be safe for
// concurrent use.
type ChatFloor interface {
	StoreFloor
	// Reply appends an assistant message of content and returns the
	// backend's error.
	Reply(ctx context.Context, content string) error
}

// ServerClock reads a store server's cumulative time spent executing
// commands (Redis's main-thread CPU from INFO cpu, PostgreSQL's
// pg_stat_statements):
// ChatBench takes the difference over a block of turns. It counts the
// whole server's work, so it means something only on a server nothing
// else uses meanwhile.
type ServerClock func(ctx context.Context) (time.Duration, error)

// ChatConfig is one measurement of ChatBench.
type ChatConfig struct {
	// Messages is the size the conversation (and the floor) is filled to
	// first, with messages of ChatContent.
	Messages int
	// Turns is the number of measured turns of each way (after a block
	// of warm-up turns of each).
	Turns int
	// Budget is the token_budget of each turn's window (4,000 when zero).
	Budget int
	// Floor makes the store's raw floor of a chat turn on a conversation
	// of n messages of content (the mean size of ChatContent's). Nil: no
	// floor is measured.
	Floor func(ctx context.Context, n int, content string) (ChatFloor, error)
	// Server reads the server's time (nil: wall time only).
	Server ServerClock
}

// ChatWay is what ChatBench measured of one way of making a turn.
type ChatWay struct {
	Turns int `json:"turns"`
	// P50us is the p50 of a whole turn: the user's message, the window,
	// and the reply's append. WindowP50us is the p50 of its first part,
	// until the window is back (what the user waits on before the model
	// runs).
	P50us       float64 `json:"p50_us"`
	WindowP50us float64 `json:"window_p50_us"`
	// SettledUs is the wall time of the blocks of turns until the worker
	// had caught up with them (indexing included), per turn.
	SettledUs float64 `json:"settled_us"`
	// ServerUs is the server's time per turn over the same blocks, the
	// worker's store work included; zero without a ServerClock.
	ServerUs float64 `json:"server_us,omitempty"`
}

// ChatResult is one line of `chatmem bench --replies --json`: a chat turn
// made two ways through Memory and once by the store's floor, and the
// ratios of each way to the floor (of the p50s, of the settled times and
// of the server's times).
type ChatResult struct {
	Store          string  `json:"store"`
	Messages       int     `json:"messages"`
	Budget         int     `json:"budget"`
	WindowMessages int     `json:"window_messages"`
	LoadAverage    float64 `json:"load_average,omitempty"`
	// AppendContext is Memory.Append then Memory.Context, then
	// Memory.Append of the reply; Turn is Memory.Turn, then Memory.Append
	// of the reply; Floor is the ChatFloor's Turn, then its Reply.
	AppendContext ChatWay  `json:"append_context"`
	Turn          ChatWay  `json:"turn"`
	Floor         *ChatWay `json:"floor,omitempty"`
	// The ratios to the floor: of the p50s, of the settled times and of
	// the server's times (those with a ServerClock).
	AppendContextRatio        float64 `json:"append_context_ratio,omitempty"`
	TurnRatio                 float64 `json:"turn_ratio,omitempty"`
	AppendContextSettledRatio float64 `json:"append_context_settled_ratio,omitempty"`
	TurnSettledRatio          float64 `json:"turn_settled_ratio,omitempty"`
	AppendContextServerRatio  float64 `json:"append_context_server_ratio,omitempty"`
	TurnServerRatio           float64 `json:"turn_server_ratio,omitempty"`
}

// chatBlock is how many turns of one way ChatBench makes in a row
// between two readings of the server's clock.
const chatBlock = 25

// chatTexts are ChatContent's texts: sizes drawn from 20 to 400
// characters, words of benchVocabulary with Zipf frequencies, the same on
// every run.
var chatTexts = sync.OnceValue(func() []string {
	r := mrand.New(mrand.NewSource(1))
	z := mrand.NewZipf(r, 1.1, 1, uint64(len(benchVocabulary)-1))
	texts := make([]string, 1024)
	var b strings.Builder
	for i := range texts {
		size := 20 + r.Intn(381)
		b.Reset()
		for b.Len() < size {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(benchVocabulary[z.Uint64()])
		}
		text := []byte(b.String()[:size])
		if text[size-1] == ' ' { // a word cut after its space
			text[size-1] = 's'
		}
		texts[i] = string(text)
	}
	return texts
})

// ChatContent returns the content of message i of ChatBench's
// conversations: 20 to 400 characters (about 5 to 100 tokens under the
// seed's estimator), drawn deterministically, the same for the same i.
func ChatContent(i int) string {
	t := chatTexts()
	return t[i%len(t)]
}

// chatMeanContent is a content of the mean size of ChatContent's, which
// the floors are filled with.
func chatMeanContent() string {
	total := 0
	for _, t := range chatTexts() {
		total += len(t)
	}
	mean := total / len(chatTexts())
	return strings.Repeat("lorem ipsum ", mean/12+1)[:mean]
}

// ChatBench fills a new conversation of mem's store with cfg.Messages
// messages of ChatContent, then measures a chat turn as users make it:
// the user's message appended and the token_budget window read, then the
// assistant's reply appended before the next turn. It makes the turn two
// ways, Memory.Append + Memory.Context and Memory.Turn, each followed by
// Memory.Append of the reply, and by cfg.Floor's floor, in blocks of 25
// turns of one way in rotating order (so that a busy machine slows them
// alike). After each block of Memory's it waits for mem's worker to
// catch up (Memory.Flush), which the block's settled and server times
// include: mem should be Started, as a server's is. The conversation is
// deleted and the floor dropped afterwards.
func ChatBench(ctx context.Context, mem *chatmem.Memory, cfg ChatConfig, log io.Writer) (ChatResult, error) {
	n, turns := cfg.Messages, cfg.Turns
	if n < 1 || turns < 1 {
		return ChatResult{}, errors.New("bench: needs at least one message and one turn")
	}
	budget := cfg.Budget
	if budget == 0 {
		budget = 4000
	}
	p := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: budget}
	var suffix [4]byte
	rand.Read(suffix[:])
	key := chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("chat-%d-%s", n, hex.EncodeToString(suffix[:]))}
	defer mem.Store().Delete(context.WithoutCancel(ctx), key)
	fmt.Fprintf(log, "filling %d messages of 20 to 400 characters\n", n)
	batch := make([]chatmem.Message, 0, 1000)
	for i := range n {
		batch = append(batch, chatmem.Message{Role: chatRole(i), Content: ChatContent(i)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := mem.Append(ctx, key, batch, chatmem.AppendOptions{}); err != nil {
				return ChatResult{}, err
			}
			batch = batch[:0]
		}
	}
	var floor ChatFloor
	if cfg.Floor != nil {
		var err error
		if floor, err = cfg.Floor(ctx, n, chatMeanContent()); err != nil {
			return ChatResult{}, fmt.Errorf("bench: the store's floor: %w", err)
		}
		defer floor.Drop(context.WithoutCancel(ctx))
	}
	if err := mem.Flush(ctx); err != nil {
		return ChatResult{}, err
	}
	runtime.GC()

	k := n // the next message's number
	var window int
	reply := func() error {
		_, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleAssistant, Content: ChatContent(k)}}, chatmem.AppendOptions{})
		k++
		return err
	}
	// Each way makes one turn up to its window, then its reply.
	type way struct {
		window, reply func() error
		flush         bool
		m             *chatWayTimes
	}
	ways := []way{
		{window: func() error {
			if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: ChatContent(k)}}, chatmem.AppendOptions{}); err != nil {
				return err
			}
			k++
			w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
			window = len(w.Messages)
			return err
		}, reply: reply, flush: true},
		{window: func() error {
			_, w, err := mem.Turn(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: ChatContent(k)}}, chatmem.AppendOptions{}, p, chatmem.ContextOptions{})
			k++
			if err == nil && len(w.Messages) == 0 {
				err = errors.New("bench: Memory.Turn returned no messages")
			}
			return err
		}, reply: reply, flush: true},
	}
	if floor != nil {
		fk := n
		ways = append(ways, way{
			window: func() error { fk++; return floor.Turn(ctx, ChatContent(fk-1)) },
			reply:  func() error { fk++; return floor.Reply(ctx, ChatContent(fk-1)) }})
	}
	for i := range ways {
		ways[i].m = &chatWayTimes{}
	}
	blocks := (turns + chatBlock - 1) / chatBlock
	for b := -1; b < blocks; b++ { // block -1: warm-up, not counted
		size := chatBlock
		if b == blocks-1 && turns%chatBlock != 0 {
			size = turns % chatBlock
		}
		for j := range ways {
			w := ways[(b+1+j)%len(ways)]
			var before time.Duration
			if cfg.Server != nil && b >= 0 {
				var err error
				if before, err = cfg.Server(ctx); err != nil {
					return ChatResult{}, fmt.Errorf("bench: the server's time: %w", err)
				}
			}
			start := time.Now()
			for range size {
				t0 := time.Now()
				if err := w.window(); err != nil {
					return ChatResult{}, err
				}
				t1 := time.Now()
				if err := w.reply(); err != nil {
					return ChatResult{}, err
				}
				if b >= 0 {
					w.m.turns = append(w.m.turns, time.Since(t0))
					w.m.windows = append(w.m.windows, t1.Sub(t0))
				}
			}
			if w.flush {
				if err := settle(ctx, mem); err != nil {
					return ChatResult{}, err
				}
			}
			settled := time.Since(start)
			if b < 0 {
				continue
			}
			w.m.settled += settled
			if cfg.Server != nil {
				after, err := cfg.Server(ctx)
				if err != nil {
					return ChatResult{}, fmt.Errorf("bench: the server's time: %w", err)
				}
				w.m.server += after - before
			}
		}
	}
	r := ChatResult{Messages: n, Budget: budget, WindowMessages: window, LoadAverage: loadAverage(),
		AppendContext: ways[0].m.result(cfg.Server != nil), Turn: ways[1].m.result(cfg.Server != nil)}
	if floor != nil {
		f := ways[2].m.result(cfg.Server != nil)
		r.Floor = &f
		r.AppendContextRatio, r.TurnRatio = r.AppendContext.P50us/f.P50us, r.Turn.P50us/f.P50us
		r.AppendContextSettledRatio, r.TurnSettledRatio = r.AppendContext.SettledUs/f.SettledUs, r.Turn.SettledUs/f.SettledUs
		if f.ServerUs > 0 {
			r.AppendContextServerRatio, r.TurnServerRatio = r.AppendContext.ServerUs/f.ServerUs, r.Turn.ServerUs/f.ServerUs
		}
	}
	fmt.Fprintf(log, "measured %d chat turns of each way at %d messages; deleting the benchmark's messages\n", turns, n)
	return r, nil
}

// settle waits until mem's worker has caught up (Memory.Flush), looking
// every 50 µs rather than at Flush's own pace of 5 ms, which would add up
// to 200 µs per turn to a block of 25.
func settle(ctx context.Context, mem *chatmem.Memory) error {
	for {
		c, cancel := context.WithTimeout(ctx, 50*time.Microsecond)
		err := mem.Flush(c)
		cancel()
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// chatRole is message i's role in ChatBench's fill: user and assistant
// in turn, starting with user.
func chatRole(i int) chatmem.Role {
	if i%2 == 1 {
		return chatmem.RoleAssistant
	}
	return chatmem.RoleUser
}

// chatWayTimes collects one way's timings.
type chatWayTimes struct {
	turns, windows  []time.Duration
	settled, server time.Duration
}

// result sums t up; withServer says whether the server's time was read.
func (t *chatWayTimes) result(withServer bool) ChatWay {
	slices.Sort(t.turns)
	slices.Sort(t.windows)
	w := ChatWay{Turns: len(t.turns), P50us: percentile(t.turns, 0.5), WindowP50us: percentile(t.windows, 0.5),
		SettledUs: float64(t.settled.Nanoseconds()) / 1e3 / float64(len(t.turns))}
	if withServer {
		w.ServerUs = float64(t.server.Nanoseconds()) / 1e3 / float64(len(t.turns))
	}
	return w
}

// loadAverage returns the machine's load average over the last minute,
// where /proc/loadavg tells it, or 0.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b) + " ")[0], 64)
	if err != nil || math.IsNaN(f) {
		return 0
	}
	return f
}

// WriteChat writes results as JSON lines, or as a table of the ratios to
// the floor and the p50s behind them.
func WriteChat(w io.Writer, results []ChatResult, asJSON bool) error {
	if asJSON {
		return writeJSONLines(w, results)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tmessages\twindow msgs\tappend+context p50 µs\tTurn p50 µs\tfloor p50 µs\t"+
		"append+context/floor\tTurn/floor\tsettled a+c/floor\tsettled Turn/floor\tserver a+c/floor\tserver Turn/floor\tload\t")
	for _, r := range results {
		var floor float64
		if r.Floor != nil {
			floor = r.Floor.P50us
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Store, r.Messages, r.WindowMessages,
			r.AppendContext.P50us, r.Turn.P50us, cell("%.1f", floor), cell("%.2fx", r.AppendContextRatio), cell("%.2fx", r.TurnRatio),
			cell("%.2fx", r.AppendContextSettledRatio), cell("%.2fx", r.TurnSettledRatio),
			cell("%.2fx", r.AppendContextServerRatio), cell("%.2fx", r.TurnServerRatio), cell("%.1f", r.LoadAverage))
	}
	return tw.Flush()
}

// ChatLoopFloor returns ChatConfig.Floor for the in-process store:
// LoopFloor's Go loop, whose Reply appends the reply, counted.
func ChatLoopFloor(counter chatmem.Counter, budget int) func(ctx context.Context, n int, content string) (ChatFloor, error) {
	return func(ctx context.Context, n int, content string) (ChatFloor, error) {
		f, err := LoopFloor(counter, budget)(ctx, n, content)
		if err != nil {
			return nil, err
		}
		return f.(*loopFloor), nil
	}
}

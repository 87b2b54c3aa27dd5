package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

const (
	summaryKills         = 10
	summaryConversations = 3
	summaryTrigger       = 300 // tokens: a summary every seven or so turns
	summaryTarget        = 150
	summarizerDelay      = 60 * time.Millisecond // the window a kill aims at
	finalAppends         = 30                    // appends of the last, unkilled run
	// windowBudget is the budget of the bounded window checked: too small
	// for some summaries plus what follows them, so both ways are taken.
	windowBudget = 700
)

// TestSummaryWorkerKill kills a process whose summary worker is
// summarizing (the slow summarizer announces each call), summaryKills
// times, then lets one more run finish its work. After every run it checks
// the appends as TestSQLiteKill does, and that no message counts as
// summarized unless the stored summary covers it: the summary covers at
// most LastSeq, ends before a user message, never moves back, and
// Context under PolicySummaryBuffer sends it only with every message
// after it (and sends it whenever it fits with them). After the last run
// every conversation's summary is up to date: what follows it fits the
// trigger.
func TestSummaryWorkerKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	seed := seedFromClock(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	path := filepath.Join(t.TempDir(), "chatmem.db")
	keys := keysOf(summaryConversations)
	var led ledger
	summarizing := false // the last summarizer call announced has not returned
	handle := lineHandler(t, &led, func(line string) {
		switch line {
		case "summarizing":
			summarizing = true
		case "summarized":
			summarizing = false
		}
	})
	covered := map[chatmem.Key]int64{}

	mid := 0
	for round := range summaryKills + 1 {
		final := round == summaryKills
		env := []string{dbEnv + "=" + path, streamEnv + "=" + fmt.Sprintf("r%02d", round), seedEnv + "=" + strconv.FormatUint(seed+uint64(round), 10)}
		if final {
			env = append(env, finalEnv+"=1")
		}
		h := startHelper(t, ctx, "summary-writer", env...)
		summarizing = false
		if final {
			done := h.consume(ctx, handle, func(line string) bool { return line == "done" })
			if err := h.wait(); !done || err != nil {
				t.Fatalf("the last run did not finish: %v: %s", err, h.stderr.String())
			}
		} else {
			calls, want := 0, 1+rng.IntN(4)
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			ok := h.consume(wctx, handle, func(line string) bool {
				if line == "summarizing" {
					calls++
				}
				return calls == want
			})
			cancel()
			if !ok {
				h.killAndDrain(handle)
				t.Fatalf("run %d: the summarizer was not called %d times: %s", round+1, want, h.stderr.String())
			}
			// Mostly while the summarizer sleeps; now and then just after,
			// around PutSummary.
			h.consumeFor(ctx, time.Duration(rng.Int64N(int64(summarizerDelay*4/3))), handle)
			if err := h.killAndDrain(handle); err != nil {
				t.Fatalf("kill %d: %v", round+1, err)
			}
			if summarizing {
				mid++
			}
		}

		checkFile(t, ctx, path)
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			t.Fatalf("after run %d: Open: %v", round+1, err)
		}
		found := verify(t, ctx, s, keys, &led, verifyOptions{})
		for _, key := range keys {
			covered[key] = checkSummary(t, ctx, s, key, covered[key], final)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		t.Logf("run %d: killed mid-summarization: %v; summaries cover %v; %d of %d appends found", round+1, summarizing && !final, covered, found, led.len())
		if t.Failed() || final {
			report(t, "summary-worker-kill", min(round+1, summaryKills), led.len(), found, len(keys))
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d of %d kills landed while the summarizer ran", mid, summaryKills)
	if mid == 0 {
		t.Errorf("no kill landed while the summarizer ran; the test did not test that")
	}
}

// checkSummary checks key's stored summary against its messages and
// against the windows Context assembles, and returns the seq it covers
// (0: none). prev is what it covered at the last check. With upToDate, the
// messages after the summary must fit the trigger.
func checkSummary(t *testing.T, ctx context.Context, s *sqlite.Store, key chatmem.Key, prev int64, upToDate bool) int64 {
	t.Helper()
	conv, err := s.Conversation(ctx, key)
	if errors.Is(err, chatmem.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("Conversation(%s): %v", key, err)
	}
	msgs, err := s.Range(ctx, key, 0, 0)
	if err != nil || int64(len(msgs)) != conv.LastSeq {
		t.Fatalf("Range(%s) = %d messages, %v; want %d", key, len(msgs), err, conv.LastSeq)
	}
	var sum chatmem.Summary
	switch sum, err = s.Summary(ctx, key); {
	case errors.Is(err, chatmem.ErrNotFound):
	case err != nil:
		t.Fatalf("Summary(%s): %v", key, err)
	case sum.CoversSeq < 1 || sum.CoversSeq > conv.LastSeq:
		t.Errorf("%s: the summary covers seq %d; the conversation has %d messages", key, sum.CoversSeq, conv.LastSeq)
		return prev
	case sum.CoversSeq == conv.LastSeq || msgs[sum.CoversSeq].Role != chatmem.RoleUser:
		t.Errorf("%s: the summary covers seq %d, which is not just before a user message", key, sum.CoversSeq)
	case sum.Text == "" || sum.Summarizer != "slow-offline":
		t.Errorf("%s: summary text %q by %q, want some text by slow-offline", key, sum.Text, sum.Summarizer)
	}
	covers := sum.CoversSeq
	if covers < prev {
		t.Errorf("%s: the summary moved back from seq %d to %d", key, prev, covers)
	}
	var after int // the tokens of the messages after the summary
	for _, m := range msgs[covers:] {
		after += m.Tokens
	}
	if upToDate && (covers == 0 || after > summaryTrigger) {
		t.Errorf("%s: after the last run the summary covers %d, leaving %d tokens after it; want a summary and at most %d", key, covers, after, summaryTrigger)
	}

	mem, err := chatmem.New(s, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for _, budget := range []int{1 << 24, windowBudget} {
		p := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: budget}
		w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
		if err != nil {
			t.Errorf("%s: Context(budget %d): %v", key, budget, err)
			continue
		}
		var seqs []int64 // the stored messages sent
		for _, m := range w.Messages {
			if m.Seq > 0 {
				seqs = append(seqs, m.Seq)
			}
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				t.Errorf("%s: Context(budget %d) sent seqs %v: not a run", key, budget, seqs)
				break
			}
		}
		if len(seqs) == 0 || seqs[len(seqs)-1] != conv.LastSeq {
			t.Errorf("%s: Context(budget %d) sent seqs %v, want a run ending at %d", key, budget, seqs, conv.LastSeq)
			continue
		}
		fits := covers > 0 && sum.Tokens+after <= budget
		switch {
		case w.Summary != nil && w.Summary.CoversSeq != covers:
			t.Errorf("%s: Context(budget %d) sent a summary covering %d; the stored one covers %d", key, budget, w.Summary.CoversSeq, covers)
		case budget == 1<<24 && seqs[0] != covers+1:
			t.Errorf("%s: Context(budget %d) sent seqs from %d; the summary covers 1-%d", key, budget, seqs[0], covers)
		case w.Summary != nil && seqs[0] != covers+1:
			t.Errorf("%s: Context(budget %d) sent the summary of 1-%d and then seqs from %d: a gap or an overlap", key, budget, covers, seqs[0])
		case w.Summary == nil && fits:
			t.Errorf("%s: Context(budget %d) left out the summary (%d tokens) though it fits with the %d tokens after it", key, budget, sum.Tokens, after)
		case w.Summary == nil && covers > 0 && budget == 1<<24:
			t.Errorf("%s: Context(budget %d) sent no summary; one covers 1-%d", key, budget, covers)
		}
	}
	return covers
}

// slowSummarizer is the offline summarizer, slowed down so that a kill can
// land while it runs. It prints "summarizing" when a call starts and
// "summarized" when it returns.
type slowSummarizer struct {
	inner chatmem.Summarizer
	out   *stdoutLines
}

func (s *slowSummarizer) Name() string { return "slow-offline" }

func (s *slowSummarizer) Summarize(ctx context.Context, prev string, msgs []chatmem.Message) (string, error) {
	s.out.print("summarizing\n")
	select {
	case <-time.After(summarizerDelay):
	case <-ctx.Done():
		return "", ctx.Err()
	}
	text, err := s.inner.Summarize(ctx, prev, msgs)
	s.out.print("summarized\n")
	return text, err
}

// summaryWriter is the helper TestSummaryWorkerKill kills: a Memory with a
// slow summarizer and its worker running over the store at
// $CHATMEM_FAULTS_DB, appending user and assistant turns to the
// conversations in turn, an ack line after each. Unless killed, it
// stops after finalAppends (with $CHATMEM_FAULTS_FINAL), waits for the
// worker to finish and prints "done".
func summaryWriter() error {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, os.Getenv(dbEnv), sqlite.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	var out stdoutLines
	mem, err := chatmem.New(store, chatmem.Options{
		Counter:    tokenizer.Estimate{},
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Summarizer: &slowSummarizer{inner: offline.NewSummarizer(offline.Options{}), out: &out},
		Summary:    chatmem.SummaryOptions{Trigger: summaryTrigger, Target: summaryTarget, Timeout: 10 * time.Second},
	})
	if err != nil {
		return err
	}
	if err := mem.Start(); err != nil {
		return err
	}
	keys := keysOf(summaryConversations)
	stream := os.Getenv(streamEnv)
	final := os.Getenv(finalEnv) == "1"
	for n := 0; !final || n < finalAppends; n++ {
		key := keys[n%len(keys)]
		res, err := mem.Append(ctx, key, batch(fmt.Sprintf("%s-%05d", stream, n), 2), chatmem.AppendOptions{})
		if err != nil {
			return err
		}
		out.print(ackLine(stream, key.ID, res.Messages))
		time.Sleep(3 * time.Millisecond)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := mem.Flush(fctx); err != nil {
		return err
	}
	if err := mem.Close(); err != nil {
		return err
	}
	out.print("done\n")
	return nil
}

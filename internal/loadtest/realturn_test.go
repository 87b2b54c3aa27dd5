package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestChatContent: message sizes from 20 to 400 characters, the same for
// the same message, not all alike.
func TestChatContent(t *testing.T) {
	sizes := map[int]bool{}
	for i := range 2048 {
		c := ChatContent(i)
		if len(c) < 20 || len(c) > 400 || c != ChatContent(i) || c != ChatContent(i+1024) {
			t.Fatalf("ChatContent(%d) = %q (%d chars), want 20 to 400, the same on every call", i, c, len(c))
		}
		sizes[len(c)/100] = true
	}
	if len(sizes) < 4 {
		t.Errorf("ChatContent's sizes fall in %d bands of 100 characters, want 4 or 5", len(sizes))
	}
}

// TestChatBench measures a small conversation and checks the structure of
// what ChatBench reports and does: each way's turns (and the floor's
// turns and replies, warm-up included), a window, the server's time read
// before and after each block, ratios of the figures, the floor dropped
// and the conversation deleted.
func TestChatBench(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Start(); err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var floor *chatCountingFloor
	reads := 0
	cfg := ChatConfig{Messages: 60, Turns: 30,
		Floor: func(ctx context.Context, n int, content string) (ChatFloor, error) {
			f, err := ChatLoopFloor(tokenizer.Estimate{}, 4000)(ctx, n, content)
			floor = &chatCountingFloor{ChatFloor: f}
			return floor, err
		},
		Server: func(context.Context) (time.Duration, error) {
			reads++
			return time.Duration(reads) * time.Millisecond, nil
		}}
	r, err := ChatBench(ctx, mem, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if r.Messages != 60 || r.Budget != 4000 || r.WindowMessages < 1 || r.Floor == nil {
		t.Fatalf("ChatBench = %+v, want 60 messages, budget 4000, a window and a floor", r)
	}
	// Blocks of 25 turns: a warm-up block, then 25 and 5 measured, each
	// measured block between two readings of the clock: 1 ms each.
	for name, w := range map[string]ChatWay{"append+context": r.AppendContext, "turn": r.Turn, "floor": *r.Floor} {
		if w.Turns != 30 || w.P50us <= 0 || w.WindowP50us <= 0 || w.WindowP50us > w.P50us || w.SettledUs <= 0 || w.ServerUs != 2000.0/30 {
			t.Errorf("%s: %+v, want 30 turns, positive times and 2 ms of server time over them", name, w)
		}
	}
	if reads != 2*3*2 {
		t.Errorf("the server's clock read %d times, want 12 (before and after each measured block of each way)", reads)
	}
	if r.TurnRatio != r.Turn.P50us/r.Floor.P50us || r.AppendContextRatio != r.AppendContext.P50us/r.Floor.P50us ||
		r.TurnSettledRatio != r.Turn.SettledUs/r.Floor.SettledUs || r.AppendContextServerRatio != 1 || r.TurnServerRatio != 1 {
		t.Errorf("ratios of %+v are not the figures' quotients", r)
	}
	if floor == nil || floor.turns != 55 || floor.replies != 55 || !floor.dropped {
		t.Errorf("floor %+v, want 55 turns and replies (warm-up included) and the floor dropped", floor)
	}
	list, err := store.List(ctx, "bench", chatmem.PageRequest{})
	if err != nil || len(list.Conversations) != 0 {
		t.Errorf("conversations left after ChatBench: %+v, %v", list, err)
	}
	if _, err := ChatBench(ctx, mem, ChatConfig{Messages: 0, Turns: 1}, io.Discard); err == nil {
		t.Error("ChatBench of 0 messages: nil error")
	}

	r.Store = "memory"
	var table bytes.Buffer
	if err := WriteChat(&table, []ChatResult{r, {Store: "redis", Messages: 1000}}, false); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(rows) != 3 || !strings.Contains(rows[0], "Turn/floor") || !strings.Contains(rows[1], "1.00x") || strings.Count(rows[2], " - ") < 7 {
		t.Errorf("table:\n%s\nwant a header, the ratios, and - for what was not measured", table.String())
	}
	var lines bytes.Buffer
	if err := WriteChat(&lines, []ChatResult{r}, true); err != nil {
		t.Fatal(err)
	}
	var back ChatResult
	if err := json.Unmarshal(lines.Bytes(), &back); err != nil || back.TurnRatio != r.TurnRatio || back.Floor == nil || back.Turn.Turns != 30 {
		t.Errorf("JSON %s = %+v, %v; want the result back", lines.String(), back, err)
	}
}

// chatCountingFloor counts a ChatFloor's turns and replies and notes its
// Drop.
type chatCountingFloor struct {
	ChatFloor
	turns, replies int
	dropped        bool
}

func (f *chatCountingFloor) Turn(ctx context.Context, content string) error {
	f.turns++
	return f.ChatFloor.Turn(ctx, content)
}

func (f *chatCountingFloor) Reply(ctx context.Context, content string) error {
	f.replies++
	return f.ChatFloor.Reply(ctx, content)
}

func (f *chatCountingFloor) Drop(ctx context.Context) error {
	f.dropped = true
	return f.ChatFloor.Drop(ctx)
}

package chatmem_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

// longConversation is n turns of a support chat, each naming an order, an
// amount or a date, so that a summary has something to keep.
func longConversation(n int) []chatmem.Message {
	var msgs []chatmem.Message
	for i := range n {
		msgs = append(msgs,
			chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("Turn %d: my order SE-%05d for Rs %d has not arrived, can you check the courier status for me?", i, 10000+i, 100+i)},
			chatmem.Message{Role: chatmem.RoleAssistant, Content: fmt.Sprintf("Order SE-%05d left the Pune warehouse on %d May and should arrive by 8 pm on Friday.", 10000+i, 1+i%28)})
	}
	return msgs
}

// TestSummaryFollowsBudget: with no SummaryOptions, summary_buffer sends a
// summary at every budget, both with Sync and with the worker, and the
// summary stays within its share of the budget with no gap between it and
// the window.
func TestSummaryFollowsBudget(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []bool{true, false} {
		for _, budget := range []int{256, 512, 1024, 4096} {
			t.Run(fmt.Sprintf("sync=%v/budget=%d", sync, budget), func(t *testing.T) {
				mem := summarizing(t, sync)
				key := chatmem.Key{Tenant: "t", ID: "long"}
				p := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: budget}
				msgs := longConversation(150) // about 10,000 tokens
				for i := 0; i < len(msgs); i += 10 {
					if _, err := mem.Append(ctx, key, msgs[i:i+10], chatmem.AppendOptions{}); err != nil {
						t.Fatal(err)
					}
					if _, err := mem.Context(ctx, key, p, chatmem.ContextOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if err := mem.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if w.Summary == nil {
					t.Fatalf("Context(summary_buffer, %d) sent no summary: %d messages, %d tokens, %d dropped", budget, len(w.Messages), w.Tokens, w.Dropped)
				}
				if w.Tokens > budget {
					t.Errorf("window tokens = %d, over the budget %d", w.Tokens, budget)
				}
				if share := budget * chatmem.AutoSummaryPercent / 100; w.Parts.Summary > share {
					t.Errorf("summary tokens = %d, over its share %d of %d", w.Parts.Summary, share, budget)
				}
				first := int64(0)
				for _, m := range w.Messages {
					if m.Seq > 0 && m.Role != chatmem.RoleSystem {
						first = m.Seq
						break
					}
				}
				if first != w.Summary.CoversSeq+1 {
					t.Errorf("summary covers 1-%d but the window starts at %d: a gap", w.Summary.CoversSeq, first)
				}
				if w.Dropped != int(w.Summary.CoversSeq) {
					t.Errorf("dropped = %d, want the %d messages the summary covers", w.Dropped, w.Summary.CoversSeq)
				}
			})
		}
	}
}

// TestSummaryFollowsBudgetLeftBySystemPrompt: a system prompt taking a
// quarter of the budget does not push the summary out: the summary and the
// messages after it follow what the prompt leaves.
func TestSummaryFollowsBudgetLeftBySystemPrompt(t *testing.T) {
	ctx := context.Background()
	for _, budget := range []int{512, 1024, 4096} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			mem, err := chatmem.New(memstore.New(), chatmem.Options{
				Counter: tokenizer.Estimate{}, Summarizer: offline.NewSummarizer(offline.Options{}), Sync: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			key := chatmem.Key{Tenant: "t", ID: "prompt"}
			prompt := chatmem.Message{Role: chatmem.RoleSystem, Content: strings.Repeat("Answer as the courier desk. ", budget/28)} // about budget/4 tokens
			if _, err := mem.Append(ctx, key, []chatmem.Message{prompt}, chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			p := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: budget}
			msgs := longConversation(150)
			for i := 0; i < len(msgs); i += 2 {
				if _, err := mem.Append(ctx, key, msgs[i:i+2], chatmem.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
				w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if w.Tokens > budget {
					t.Fatalf("after %d messages: window tokens = %d, over the budget %d", i+2, w.Tokens, budget)
				}
				if i >= len(msgs)/2 && w.Summary == nil {
					t.Fatalf("after %d messages: no summary sent (parts %+v)", i+2, w.Parts)
				}
			}
		})
	}
}

// TestSummaryFixedOptionsStillApply: a Trigger set in SummaryOptions is
// used whatever the budget (no summary under it).
func TestSummaryFixedOptionsStillApply(t *testing.T) {
	ctx := context.Background()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{
		Counter: tokenizer.Estimate{}, Summarizer: offline.NewSummarizer(offline.Options{}), Sync: true,
		Summary: chatmem.SummaryOptions{Trigger: 100000},
	})
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "fixed"}
	if _, err := mem.Append(ctx, key, longConversation(50), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 256}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Summary != nil {
		t.Errorf("with Trigger 100000, Context sent a summary covering 1-%d", w.Summary.CoversSeq)
	}
}

// TestSummaryFitsEachBudget: a conversation read at 4,096 tokens and then
// at 256 gets a summary that fits the smaller budget, and still sends it,
// with no gap, when read at the larger one again.
func TestSummaryFitsEachBudget(t *testing.T) {
	ctx := context.Background()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{
		Counter: tokenizer.Estimate{}, Summarizer: offline.NewSummarizer(offline.Options{}), Sync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "two-budgets"}
	if _, err := mem.Append(ctx, key, longConversation(150), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, budget := range []int{4096, 256, 4096} {
		w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: budget}, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w.Summary == nil || w.Tokens > budget {
			t.Fatalf("budget %d: summary %v, %d tokens", budget, w.Summary != nil, w.Tokens)
		}
		if budget == 256 && w.Parts.Summary > 256*chatmem.AutoSummaryPercent/100 {
			t.Errorf("budget 256: summary of %d tokens, over its share", w.Parts.Summary)
		}
	}
}

package chatmem_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestPreviewChangesNoSummary: a conversation read by traffic at 4,096
// tokens, then previewed at small budgets (the inspector's slider dragged
// down), keeps the summary traffic made, then and after later appends:
// previews neither summarize (Sync), nor queue work (worker), nor set the
// budget the summaries follow.
func TestPreviewChangesNoSummary(t *testing.T) {
	ctx := context.Background()
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			mem := summarizing(t, sync)
			key := chatmem.Key{Tenant: "t", ID: "previewed"}
			msgs := longConversation(160)
			if _, err := mem.Append(ctx, key, msgs[:300], chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			traffic := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 4096}
			for range 2 { // the worker summarizes after the first read
				if _, err := mem.Context(ctx, key, traffic, chatmem.ContextOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := mem.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			before, err := mem.Summary(ctx, key)
			if err != nil {
				t.Fatalf("no summary after traffic at 4096: %v", err)
			}
			for _, budget := range []int{2048, 1024, 512, 300, 256} {
				p := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: budget}
				if _, err := mem.Context(ctx, key, p, chatmem.ContextOptions{Preview: true}); err != nil {
					t.Fatalf("preview at %d: %v", budget, err)
				}
				if n := mem.QueueDepth(); n != 0 {
					t.Fatalf("preview at %d queued work for %d conversations", budget, n)
				}
			}
			// The appends bring about 500 tokens: past the trigger of a
			// 256-token budget, not of the 4,096 traffic reads at.
			for i := 300; i < len(msgs); i += 2 {
				if _, err := mem.Append(ctx, key, msgs[i:i+2], chatmem.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := mem.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			after, err := mem.Summary(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if after.CoversSeq != before.CoversSeq || after.Text != before.Text {
				t.Errorf("after previews at small budgets the summary covers 1-%d (%d tokens), want 1-%d (%d tokens) as traffic left it",
					after.CoversSeq, after.Tokens, before.CoversSeq, before.Tokens)
			}
		})
	}
}

// TestSummaryFollowsLatestBudget: the summaries follow the budget of the
// latest traffic read, not the smallest ever seen: a conversation read at
// 256 tokens and then at 4,096 is not summarized again for appends that
// pass 256's trigger but not 4,096's.
func TestSummaryFollowsLatestBudget(t *testing.T) {
	ctx := context.Background()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{
		Counter: tokenizer.Estimate{}, Summarizer: offline.NewSummarizer(offline.Options{}), Sync: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "moved-up"}
	msgs := longConversation(160)
	if _, err := mem.Append(ctx, key, msgs[:300], chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, budget := range []int{256, 4096} {
		w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: budget}, chatmem.ContextOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w.Summary == nil {
			t.Fatalf("budget %d: no summary sent", budget)
		}
	}
	before, err := mem.Summary(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Append(ctx, key, msgs[300:], chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	after, err := mem.Summary(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if after.CoversSeq != before.CoversSeq {
		t.Errorf("read last at 4096, the summary moved from 1-%d to 1-%d for %d new messages: it follows a smaller budget",
			before.CoversSeq, after.CoversSeq, len(msgs)-300)
	}
	w, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 4096}, chatmem.ContextOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Summary == nil || w.Tokens > 4096 {
		t.Errorf("at 4096 after the appends: summary %v, %d tokens", w.Summary != nil, w.Tokens)
	}
}

// summarizing returns a Memory with the offline summarizer and the
// default SummaryOptions (the summaries follow the budget), summarizing
// in Append and Context (sync) or in its worker, started and closed with
// the test.
func summarizing(t *testing.T, sync bool) *chatmem.Memory {
	t.Helper()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{
		Counter: tokenizer.Estimate{}, Summarizer: offline.NewSummarizer(offline.Options{}), Sync: sync,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sync {
		if err := mem.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Close() })
	}
	return mem
}

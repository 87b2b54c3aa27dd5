package openai

import (
	"context"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestReportsUsage: the summarizer reports each call's
// usage, as the API answered it, to the context's receiver, under the
// model's name.
func TestReportsUsage(t *testing.T) {
	f := newFakeOpenAI(t)
	var got []chatmem.ModelUsage
	ctx := chatmem.WithUsageReport(context.Background(), func(u chatmem.ModelUsage) { got = append(got, u) })
	msgs := []chatmem.Message{{Seq: 1, Role: chatmem.RoleUser, Content: "My name is Kavya and my order is A-1."}}
	if _, err := f.summarizer(t).Summarize(ctx, "", msgs); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Model != f.options().Model || got[0].Input == 0 || got[0].Output == 0 {
		t.Fatalf("reported %+v, want one call of %s with its input and output tokens", got, f.options().Model)
	}
	// Without a receiver nothing happens.
	if _, err := f.summarizer(t).Summarize(context.Background(), "", msgs); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Errorf("reported %d calls, want 1", len(got))
	}
}

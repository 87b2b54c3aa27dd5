package tokenizer

import (
	"context"
	"unicode/utf8"

	"github.com/chatmem/chatmem"
)

// EstimateName is the name of the seed's estimator.
const EstimateName = "estimate"

// Estimate is the seed's estimator: max(1, len(text) // 4), where len counts
// Unicode code points as Python's len does, not bytes. It adds no framing,
// so the seed's numbers come out exactly; tool calls count their name and
// arguments the same way. Use it where no exact tokenizer fits, and for
// reproducing the seed.
type Estimate struct{}

var (
	_ chatmem.Counter     = Estimate{}
	_ chatmem.TextCounter = Estimate{}
)

// Name returns "estimate".
func (Estimate) Name() string { return EstimateName }

// Count returns the estimate for m's content plus that of each tool call's
// name and arguments.
func (Estimate) Count(_ context.Context, m chatmem.Message) (int, error) {
	n := EstimateText(m.Content)
	for _, c := range m.ToolCalls {
		n += EstimateText(c.Function.Name) + EstimateText(c.Function.Arguments)
	}
	return n, nil
}

// CountText returns EstimateText(text): what text adds to a message's
// content (chatmem.TextCounter).
func (Estimate) CountText(text string) (int, error) { return EstimateText(text), nil }

// EstimateText is the seed's tokens(text).
func EstimateText(text string) int {
	return max(1, utf8.RuneCountInString(text)/4)
}

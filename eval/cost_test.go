package eval

import (
	"fmt"
	"testing"

	"github.com/chatmem/chatmem"
)

// turns returns n messages of tokens each, alternating user and
// assistant, the first numbered from.
func turns(from, n, tokens int) []chatmem.Message {
	out := make([]chatmem.Message, n)
	for i := range out {
		role := chatmem.RoleUser
		if (from+i)%2 == 1 {
			role = chatmem.RoleAssistant
		}
		out[i] = chatmem.Message{Role: role, Content: fmt.Sprintf("message %d", from+i), Tokens: tokens}
	}
	return out
}

// TestCostSimByHand: two requests, the second repeating the first and
// adding a turn, priced by hand under both providers; a request that
// repeats nothing, or less than the 1,024-token minimum, is priced
// uncached.
func TestCostSimByHand(t *testing.T) {
	first := turns(0, 20, 100) // 2,000 tokens
	second := append(append([]chatmem.Message(nil), first...), turns(20, 2, 100)...)
	for _, c := range []struct {
		stable         bool
		openAI, anthro float64
	}{
		// OpenAI: 2,000 repeated, 1,920 of it cached (15 steps of 128):
		// 2,200 - 1,920 + 192. Anthropic, stable: the first request
		// writes its 2,000 at 1.25x, the second reads them and writes
		// its last 200.
		{stable: true, openAI: 2000 + 472, anthro: 2500 + 200 + 250},
		// A plain window has no breakpoints: Anthropic caches nothing.
		{stable: false, openAI: 2000 + 472, anthro: 2000 + 2200},
	} {
		s := newCostSim(c.stable)
		s.add(first)
		s.add(second)
		s.sum.finish()
		if s.sum.OpenAI != c.openAI || s.sum.Anthropic != c.anthro || !near(s.sum.PrefixShare*4200, 2000) || s.sum.Tokens != 4200 {
			t.Errorf("stable=%v: OpenAI %v, Anthropic %v, shared %v, tokens %d; want %v, %v, 2000, 4200",
				c.stable, s.sum.OpenAI, s.sum.Anthropic, s.sum.PrefixShare*4200, s.sum.Tokens, c.openAI, c.anthro)
		}
		// Marked at its last block, the plain window is cached as the
		// stable one is (no stable part apart here).
		if want := 2500 + 200 + 250.0; s.sum.AnthropicMarked != want {
			t.Errorf("stable=%v: Anthropic marked %v, want %v", c.stable, s.sum.AnthropicMarked, want)
		}
	}

	// Under the minimum: nothing cached, nothing written.
	s := newCostSim(true)
	small := turns(0, 5, 100)
	s.add(small)
	s.add(append(append([]chatmem.Message(nil), small...), turns(5, 2, 100)...))
	s.sum.finish()
	if s.sum.OpenAI != 1200 || s.sum.Anthropic != 1200 {
		t.Errorf("under 1,024 tokens: OpenAI %v, Anthropic %v, want 1200 and 1200", s.sum.OpenAI, s.sum.Anthropic)
	}

	// A window that slid (its first message gone) repeats nothing.
	s = newCostSim(false)
	s.add(first)
	s.add(second[2:])
	s.sum.finish()
	if s.sum.PrefixShare != 0 || s.sum.OpenAI != 4000 {
		t.Errorf("slid window: shared %v, OpenAI %v; want 0 and 4000", s.sum.PrefixShare, s.sum.OpenAI)
	}
}

// TestCostStableLayout: the facts block and the recalled turns of a
// stable request are its volatile part. When they change, OpenAI still
// caches the stable part in front of them; Anthropic, which takes the
// facts block into the system prompt, reads the stable part only when
// the facts did not change.
func TestCostStableLayout(t *testing.T) {
	stable := turns(0, 20, 100) // 2,000 tokens
	req := func(facts, recalled string, newest int) []chatmem.Message {
		out := append([]chatmem.Message(nil), stable...)
		out = append(out, chatmem.Message{Role: chatmem.RoleSystem, Content: facts, Tokens: 50, Metadata: map[string]string{chatmem.MetaKey: chatmem.MetaFacts}})
		out = append(out, chatmem.Message{Role: chatmem.RoleUser, Content: recalled, Tokens: 300, Metadata: map[string]string{chatmem.MetaKey: chatmem.MetaRecalled}})
		return append(out, turns(newest, 1, 100)...)
	}
	s := newCostSim(true)
	s.add(req("name=Kavya", "old turn 1", 20))
	first := s.sum
	first.finish()
	s.add(req("name=Kavya", "old turn 2", 22))
	s.sum.finish()
	// OpenAI: the stable part and the facts block repeated (2,050),
	// 2,048 cached: 2,450 - 2,048 + 204.8.
	if got := s.sum.OpenAI - first.OpenAI; !near(got, 606.8) {
		t.Errorf("recalled turns changed: OpenAI %v, want 606.8", got)
	}
	// Anthropic: the system prompt (the facts) and the stable part are
	// read (2,050), the rest is written (400).
	if got := s.sum.Anthropic - first.Anthropic; got != 205+500 {
		t.Errorf("recalled turns changed: Anthropic %v, want 705", got)
	}
	before := s.sum
	s.add(req("name=Kavya; city=Pune", "old turn 2", 24))
	s.sum.finish()
	if got := s.sum.Anthropic - before.Anthropic; got != 1.25*2450 {
		t.Errorf("facts changed: Anthropic %v, want all 2,450 written (%v)", got, 1.25*2450)
	}
}

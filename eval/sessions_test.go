package eval

import (
	"errors"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestSessionsAsConversations: with each session its own conversation of
// one user and each question asked in a new one, token_budget sees none of
// the evidence and recall with scope user finds it in the past sessions;
// the stored conversations are all gone afterwards.
func TestSessionsAsConversations(t *testing.T) {
	d := loadFixture(t, "locomo_tiny.json", LoadLoCoMo)
	cfg := config([]chatmem.PolicyKind{chatmem.PolicyTokenBudget, chatmem.PolicyRecall}, []int{256})
	cfg.SessionsAsConversations, cfg.Scope = true, chatmem.ScopeUser
	res := run(t, d, cfg)
	if !res.SessionsAsConversations || len(res.Rows) != 2 {
		t.Fatalf("result: sessions %v, %d rows; want sessions and 2 rows", res.SessionsAsConversations, len(res.Rows))
	}
	tb, rc := res.Rows[0], res.Rows[1]
	if tb.Label() != "token_budget@256" || rc.Label() != "recall/user@256" {
		t.Errorf("rows %q, %q; want token_budget@256, recall/user@256", tb.Label(), rc.Label())
	}
	if tb.Overall.RecallQuestions == 0 || tb.Overall.Recall != 0 {
		t.Errorf("token_budget@256 recall %v over %d questions, want 0: a new conversation holds the question alone", tb.Overall.Recall, tb.Overall.RecallQuestions)
	}
	// The puppy, the marathon and Biscuit's year are found in the past
	// sessions; "What hobbies does Ana have?" shares no word with its
	// evidence (pottery, painting), which lexical recall cannot find once
	// the sessions are not the window.
	if !near(rc.Overall.Recall, 0.75) || len(rc.Categories) == 0 || rc.Categories[0].Category != 1 || rc.Categories[0].Recall != 0 {
		t.Errorf("recall/user@256 recall %v (categories %+v), want 0.75, all but category 1's hobbies", rc.Overall.Recall, rc.Categories)
	}
	page, err := cfg.Store.List(t.Context(), "eval", chatmem.PageRequest{})
	if err != nil || len(page.Conversations) != 0 {
		t.Errorf("after the run the store lists %d conversations (%v), want none", len(page.Conversations), err)
	}

	// Without sessions, scope user is the conversation scope (no user).
	cfg = config([]chatmem.PolicyKind{chatmem.PolicyRecall}, []int{48})
	plain := run(t, d, cfg).Rows[0]
	cfg = config([]chatmem.PolicyKind{chatmem.PolicyRecall}, []int{48})
	cfg.Scope = chatmem.ScopeUser
	user := run(t, d, cfg).Rows[0]
	if plain.Overall.Recall != user.Overall.Recall || plain.Overall.TokensMean != user.Overall.TokensMean {
		t.Errorf("one conversation per dataset conversation: scope user %+v, conversation %+v; want the same", user.Overall, plain.Overall)
	}

	// A dataset without sessions is refused.
	cfg = config([]chatmem.PolicyKind{chatmem.PolicyRecall}, []int{48})
	cfg.SessionsAsConversations = true
	_, err = Run(t.Context(), loadFixture(t, "tiny.jsonl", LoadJSONL), cfg)
	if !errors.Is(err, chatmem.ErrInvalid) || !strings.Contains(err.Error(), "no sessions") {
		t.Errorf("sessions of a JSONL dataset: error %v, want ErrInvalid naming the missing sessions", err)
	}
}

package chatmem_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// filler makes n messages of small talk, alternating user and assistant,
// from a vocabulary that shares words with the questions the tests ask
// ("order", "number", "gave"), so that recall has to rank, not just match.
func filler(n int, seed uint64) []chatmem.Message {
	words := strings.Fields(`weather garden coffee movie weekend train dinner recipe music book holiday
		order pizza number gave friend city walk rain sunny office meeting project phone call email
		travel ticket flight hotel beach mountain dog cat park game team score week month plan idea`)
	r := rand.New(rand.NewPCG(seed, seed))
	out := make([]chatmem.Message, n)
	for i := range out {
		var b strings.Builder
		for j := range 6 + r.IntN(10) {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		role := chatmem.RoleUser
		if i%2 == 1 {
			role = chatmem.RoleAssistant
		}
		out[i] = chatmem.Message{Role: role, Content: b.String()}
	}
	return out
}

// TestRecallOldFact is the fixture: a fact given at turn 3 is
// recalled at turn 500 under a 256-token budget, whose recent window alone
// holds a few turns.
func TestRecallOldFact(t *testing.T) {
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "recall"}
	ctx := t.Context()
	msgs := filler(4, 1)
	msgs = append(msgs,
		chatmem.Message{Role: chatmem.RoleUser, Content: "My order is SE-10423, a blue kettle."},
		chatmem.Message{Role: chatmem.RoleAssistant, Content: "Thanks, I noted order SE-10423."})
	msgs = append(msgs, filler(994, 2)...)
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleSystem, Content: "You are a shop assistant."}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(msgs); i += 100 {
		if _, err := mem.Append(ctx, key, msgs[i:min(i+100, len(msgs))], chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	question := chatmem.Message{Role: chatmem.RoleUser, Content: "What was the kettle order number I gave you?"}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 256}
	w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{Pending: []chatmem.Message{question}})
	if err != nil {
		t.Fatal(err)
	}
	checkRecallWindow(t, w, p)
	var found bool
	for i, m := range w.Messages {
		if strings.Contains(m.Content, "SE-10423, a blue kettle") {
			found = true
			// The time is left out only after turn 5 recalled (same minute).
			want := "[#6 "
			if i > 0 && w.Messages[i-1].Seq == 5 {
				want = "[#6] "
			}
			if m.Seq != 6 || m.Metadata[chatmem.MetaKey] != chatmem.MetaRecalled || !strings.HasPrefix(m.Content, want) {
				t.Errorf("the recalled turn is %+v, want seq 6 marked %q... and metadata recalled", m, want)
			}
		}
	}
	if !found {
		t.Errorf("turn 3's order number is not in the 256-token window:\n%s", dump(w))
	}
	// The token window of the same budget has no room for it.
	tw, err := mem.Context(ctx, key, chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 256}, chatmem.ContextOptions{Pending: []chatmem.Message{question}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump(tw), "SE-10423") {
		t.Error("test bug: the plain token window already holds the order number")
	}
}

var markerRE = regexp.MustCompile(`^\[#(\d+)( \d{4}-\d\d-\d\d \d\d:\d\d)?\] `)

// checkRecallWindow checks the invariants of a recall window: within
// budget, tokens add up, system messages first, then a user message, no
// message twice, recalled messages marked and in order before the recent
// ones, tool calls whole.
func checkRecallWindow(t *testing.T, w chatmem.Window, p chatmem.Policy) {
	t.Helper()
	if w.Tokens > p.Budget {
		t.Errorf("window has %d tokens, budget %d", w.Tokens, p.Budget)
	}
	sum := w.Parts.Overhead
	for _, m := range w.Messages {
		sum += m.Tokens
	}
	if sum != w.Tokens {
		t.Errorf("messages and overhead sum to %d tokens, window says %d", sum, w.Tokens)
	}
	if parts := w.Parts.System + w.Parts.Facts + w.Parts.Summary + w.Parts.Recent + w.Parts.Recalled + w.Parts.Overhead; parts != w.Tokens {
		t.Errorf("parts %+v sum to %d, window has %d tokens", w.Parts, parts, w.Tokens)
	}
	i := 0
	for i < len(w.Messages) && w.Messages[i].Role == chatmem.RoleSystem {
		i++
	}
	if i < len(w.Messages) && w.Messages[i].Role != chatmem.RoleUser {
		t.Errorf("window starts with %s after the system messages, want user", w.Messages[i].Role)
	}
	seen := make(map[int64]bool)
	var prev int64
	recalledTokens, recalling := 0, true
	for _, m := range w.Messages[i:] {
		if seen[m.Seq] {
			t.Errorf("message %d sent twice", m.Seq)
		}
		seen[m.Seq] = true
		if m.Seq <= prev {
			t.Errorf("message %d after %d: not in conversation order", m.Seq, prev)
		}
		prev = m.Seq
		if m.Metadata[chatmem.MetaKey] == chatmem.MetaRecalled {
			if !recalling {
				t.Errorf("recalled message %d after the recent window began", m.Seq)
			}
			recalledTokens += m.Tokens
			if sm := markerRE.FindStringSubmatch(m.Content); sm == nil || sm[1] != fmt.Sprint(m.Seq) {
				t.Errorf("recalled message %d is not marked with its seq and time: %q", m.Seq, m.Content)
			}
		} else {
			recalling = false
		}
	}
	if recalledTokens != w.Parts.Recalled {
		t.Errorf("recalled messages have %d tokens, Parts.Recalled = %d", recalledTokens, w.Parts.Recalled)
	}
	if err := chatmem.ValidateHistory(nil, w.Messages[i:], chatmem.Limits{}); err != nil {
		t.Errorf("window is not a valid history: %v", err)
	}
}

func dump(w chatmem.Window) string {
	var b strings.Builder
	for _, m := range w.Messages {
		fmt.Fprintf(&b, "%4d %-9s %3d %s\n", m.Seq, m.Role, m.Tokens, m.Content)
	}
	return b.String()
}

// TestRecallToolUnits recalls a tool call with its results, never one
// without the other, and never duplicates what the recent window holds.
func TestRecallToolUnits(t *testing.T) {
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "tools"}
	ctx := t.Context()
	var msgs []chatmem.Message
	msgs = append(msgs, filler(20, 3)...)
	msgs = append(msgs,
		chatmem.Message{Role: chatmem.RoleUser, Content: "Where is my parcel?"},
		chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{
			{ID: "a", Type: "function", Function: chatmem.FunctionCall{Name: "track_parcel", Arguments: `{"id":"PX-77"}`}},
			{ID: "b", Type: "function", Function: chatmem.FunctionCall{Name: "courier", Arguments: `{"id":"PX-77"}`}}}},
		chatmem.Message{Role: chatmem.RoleTool, ToolCallID: "a", Content: "parcel PX-77 is in Leeds depot"},
		chatmem.Message{Role: chatmem.RoleTool, ToolCallID: "b", Content: "courier is Yodel"},
		chatmem.Message{Role: chatmem.RoleAssistant, Content: "It is in the depot."})
	msgs = append(msgs, filler(300, 4)...)
	if _, err := mem.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, budget := range []int{120, 160, 200, 300, 1000} {
		p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: budget}
		w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{Pending: []chatmem.Message{{Role: chatmem.RoleUser, Content: "which depot is parcel PX-77 in, and the courier?"}}})
		if err != nil {
			t.Fatal(err)
		}
		checkRecallWindow(t, w, p)
		has := map[int64]bool{}
		for _, m := range w.Messages {
			has[m.Seq] = true
		}
		if has[22] != has[23] || has[23] != has[24] {
			t.Errorf("budget %d: the tool call (22) and its results (23, 24) are not sent together: %v %v %v\n%s", budget, has[22], has[23], has[24], dump(w))
		}
		if budget >= 200 && !has[23] {
			t.Errorf("budget %d: the tool result naming the depot was not recalled:\n%s", budget, dump(w))
		}
	}
}

// TestRecallShortConversation sends everything, unmarked, when everything
// fits: recall only trades recent messages for relevant ones when it must.
func TestRecallShortConversation(t *testing.T) {
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "short"}
	if _, err := mem.Append(t.Context(), key, filler(10, 5), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 4000}
	w, err := mem.Context(t.Context(), key, p, chatmem.ContextOptions{Pending: []chatmem.Message{{Role: chatmem.RoleUser, Content: "what about the weather?"}}})
	if err != nil {
		t.Fatal(err)
	}
	checkRecallWindow(t, w, p)
	if len(w.Messages) != 11 || w.Parts.Recalled != 0 || w.Dropped != 0 {
		t.Errorf("window of a short conversation: %d messages, %d recalled tokens, %d dropped; want all 11, none recalled", len(w.Messages), w.Parts.Recalled, w.Dropped)
	}
}

// TestRecallSummaryBuffer adds recall to summary_buffer: the summary and
// its window stay within Recent, recall fills the rest.
func TestRecallSummaryBuffer(t *testing.T) {
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "sb"}
	msgs := append(filler(6, 6), chatmem.Message{Role: chatmem.RoleUser, Content: "My locker code is 4471."})
	msgs = append(msgs, filler(400, 7)...)
	if _, err := mem.Append(t.Context(), key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	p := chatmem.Policy{Kind: chatmem.PolicySummaryBuffer, Budget: 400, Recall: true}
	w, err := mem.Context(t.Context(), key, p, chatmem.ContextOptions{Pending: []chatmem.Message{{Role: chatmem.RoleUser, Content: "What is my locker code?"}}})
	if err != nil {
		t.Fatal(err)
	}
	checkRecallWindow(t, w, p)
	if !strings.Contains(dump(w), "locker code is 4471") {
		t.Errorf("summary_buffer with recall did not recall the locker code:\n%s", dump(w))
	}
	if w.Tokens-w.Parts.Recalled > 200 {
		t.Errorf("the recent part has %d tokens, want at most Recent = 200", w.Tokens-w.Parts.Recalled)
	}

	for _, bad := range []chatmem.Policy{
		{Kind: chatmem.PolicyTokenBudget, Budget: 100, Recall: true},
		{Kind: chatmem.PolicyRecall, Budget: 100, Recent: -1},
		{Kind: chatmem.PolicyRecall},
	} {
		if _, err := mem.Context(t.Context(), key, bad, chatmem.ContextOptions{}); err == nil {
			t.Errorf("Context(%+v) accepted an invalid policy", bad)
		}
	}
}

// conceptEmbedder is a stand-in for an embedding model at the LLM edge:
// each text's vector counts the concepts its words belong to, so synonyms
// ("automobile", "car") land together where a lexical index cannot match
// them.
type conceptEmbedder struct{ calls int }

var concepts = map[string]int{"car": 0, "automobile": 0, "vehicle": 0, "dog": 1, "puppy": 1, "blue": 2, "navy": 2}

func (*conceptEmbedder) Name() string { return "test:concepts" }

func (e *conceptEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.calls++
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, 4)
		v[3] = 0.01 // no text is the zero vector
		for _, w := range strings.Fields(strings.ToLower(t)) {
			if c, ok := concepts[strings.Trim(w, ".,?!")]; ok {
				v[c]++
			}
		}
		out[i] = v
	}
	return out, nil
}

// TestRecallEmbeddings: with an embedder, recall finds a turn that shares
// no word with the question; without one, it does not.
func TestRecallEmbeddings(t *testing.T) {
	emb := &conceptEmbedder{}
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}, Embedder: emb, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	plain := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "emb"}
	msgs := append(filler(6, 11), chatmem.Message{Role: chatmem.RoleUser, Content: "I parked my navy automobile on level 3."})
	msgs = append(msgs, filler(400, 12)...)
	for _, m := range []*chatmem.Memory{mem, plain} {
		for i := 0; i < len(msgs); i += 50 {
			if _, err := m.Append(t.Context(), key, msgs[i:min(i+50, len(msgs))], chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if emb.calls == 0 {
		t.Fatal("the worker never called the embedder")
	}
	q := []chatmem.Message{{Role: chatmem.RoleUser, Content: "Where did I leave the blue car?"}}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 200}
	w, err := mem.Context(t.Context(), key, p, chatmem.ContextOptions{Pending: q})
	if err != nil {
		t.Fatal(err)
	}
	checkRecallWindow(t, w, p)
	if !strings.Contains(dump(w), "navy automobile") {
		t.Errorf("with embeddings, the parked automobile was not recalled for a question about a car:\n%s", dump(w))
	}
	w, err = plain.Context(t.Context(), key, p, chatmem.ContextOptions{Pending: q})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump(w), "navy automobile") {
		t.Error("test bug: the lexical ranking alone found the automobile")
	}
}

// TestRecallKeepsBestAnswer recalls the best-matching turn when it is an
// answer whose question (the user message before it, which the window must
// start with) only fits once worse-ranked turns make room: the worst go,
// not the best.
func TestRecallKeepsBestAnswer(t *testing.T) {
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "best-answer"}
	ctx := t.Context()
	msgs := []chatmem.Message{
		{Role: chatmem.RoleUser, Content: strings.Repeat("could you look something up for me please, ", 18)},
		{Role: chatmem.RoleAssistant, Content: "Your blue kettle order number is SE-10423."},
	}
	// Weaker matches, enough to fill the budget.
	for i, m := range filler(300, 3) {
		if i%10 == 5 {
			m.Content = fmt.Sprintf("the kettle order for office %d is late", i)
		}
		msgs = append(msgs, m)
	}
	if _, err := mem.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	question := chatmem.Message{Role: chatmem.RoleUser, Content: "What was my blue kettle's order number?"}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 512}
	w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{Pending: []chatmem.Message{question}})
	if err != nil {
		t.Fatal(err)
	}
	checkRecallWindow(t, w, p)
	seqs := make(map[int64]bool)
	for _, m := range recalled(w) {
		seqs[m.Seq] = true
	}
	if !seqs[1] || !seqs[2] {
		t.Errorf("want the answer (2) recalled with its question (1):\n%s", dump(w))
	}
	// Worse-ranked turns were recalled too (the budget was full before
	// the question was added): without them the test tests nothing.
	if len(seqs) < 8 {
		t.Errorf("test bug: only %d messages recalled:\n%s", len(seqs), dump(w))
	}
}

// TestRecallMarkers writes a recalled message's time only when it is not
// the minute of the recalled message before it, adjacent or not.
func TestRecallMarkers(t *testing.T) {
	mem := newMemory(t)
	key := chatmem.Key{Tenant: "t", ID: "markers"}
	ctx := t.Context()
	day1 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	msgs := filler(4, 4)
	msgs = append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: "My kettle order is SE-10423."})
	msgs = append(msgs, filler(41, 5)...)
	msgs = append(msgs, chatmem.Message{Role: chatmem.RoleUser, Content: "The kettle lid came cracked."})
	msgs = append(msgs, filler(100, 6)...)
	for i := range msgs {
		msgs[i].CreatedAt = day1
	}
	later := filler(50, 7)
	later = append(later, chatmem.Message{Role: chatmem.RoleUser, Content: "A new kettle lid is on its way."})
	later = append(later, filler(100, 8)...)
	for i := range later {
		later[i].CreatedAt = day2
	}
	if _, err := mem.Append(ctx, key, append(msgs, later...), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	question := chatmem.Message{Role: chatmem.RoleUser, Content: "Which kettle order had the cracked lid?"}
	p := chatmem.Policy{Kind: chatmem.PolicyRecall, Budget: 300}
	w, err := mem.Context(ctx, key, p, chatmem.ContextOptions{Pending: []chatmem.Message{question}})
	if err != nil {
		t.Fatal(err)
	}
	checkRecallWindow(t, w, p)
	rec := recalled(w)
	gaps := 0
	for i, m := range rec {
		sm := markerRE.FindStringSubmatch(m.Content)
		if sm == nil {
			t.Fatalf("recalled %q has no marker", m.Content)
		}
		short := i > 0 && rec[i-1].CreatedAt.Equal(m.CreatedAt)
		if short != (sm[2] == "") {
			t.Errorf("message %d marked %q after %d: want the time only when the minute changes:\n%s", m.Seq, sm[0], rec[max(i-1, 0)].Seq, dump(w))
		}
		if short && rec[i-1].Seq != m.Seq-1 {
			gaps++
		}
	}
	want := map[string]bool{"SE-10423": false, "came cracked": false, "on its way": false}
	for _, m := range rec {
		for s := range want {
			want[s] = want[s] || strings.Contains(m.Content, s)
		}
	}
	for s, ok := range want {
		if !ok {
			t.Errorf("test bug: %q not recalled:\n%s", s, dump(w))
		}
	}
	if gaps == 0 {
		t.Errorf("test bug: no short marker after a gap:\n%s", dump(w))
	}
}

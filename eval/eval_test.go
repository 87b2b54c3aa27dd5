package eval

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/offline"
	"github.com/chatmem/chatmem/tokenizer"
)

func loadFixture(t *testing.T, name string, load func(io.Reader) (*Dataset, error)) *Dataset {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := load(f)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func config(policies []chatmem.PolicyKind, budgets []int) Config {
	return Config{
		Store: memstore.New(), Counter: tokenizer.Estimate{},
		Policies: policies, Budgets: budgets,
		Extractors: []chatmem.Extractor{offline.DefaultExtractor()},
		Summarizer: offline.NewSummarizer(offline.Options{}),
	}
}

func run(t *testing.T, d *Dataset, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestLoadLoCoMo(t *testing.T) {
	d := loadFixture(t, "locomo_tiny.json", LoadLoCoMo)
	if len(d.Conversations) != 1 || d.Messages() != 12 || d.Questions() != 6 {
		t.Fatalf("got %d conversations, %d messages, %d questions; want 1, 12, 6", len(d.Conversations), d.Messages(), d.Questions())
	}
	c := d.Conversations[0]
	msgs := []struct {
		i       int
		role    chatmem.Role
		name    string
		id      string
		content string
	}{
		{0, chatmem.RoleUser, "Ana", "D1:1", "[1:00 pm on 2 May, 2023] Hi Ben! Long week."},
		{1, chatmem.RoleAssistant, "Ben", "D1:2", "Hi Ana, tell me everything."},
		{6, chatmem.RoleAssistant, "Ben", "D2:1", "[3:00 pm on 9 May, 2023] How did the race go?"},
		{9, chatmem.RoleUser, "Ana", "D2:4", "Thanks! Here is my medal. [shares a photo: a photo of a gold medal]"},
	}
	for _, w := range msgs {
		m := c.Messages[w.i]
		if m.Role != w.role || m.Name != w.name || m.Metadata[TurnKey] != w.id || m.Content != w.content {
			t.Errorf("message %d = %s %s %s %q, want %s %s %s %q", w.i, m.Role, m.Name, m.Metadata[TurnKey], m.Content, w.role, w.name, w.id, w.content)
		}
	}
	qs := c.Questions
	if !slices.Equal(qs[2].Evidence, []string{"D1:5", "D2:6"}) || qs[2].Malformed != 1 {
		t.Errorf("question 3 evidence %v, malformed %d; want [D1:5 D2:6], 1", qs[2].Evidence, qs[2].Malformed)
	}
	if !qs[3].NoEvidence || len(qs[3].Evidence) != 0 {
		t.Errorf("question 4 NoEvidence = %v, evidence %v; want true, none", qs[3].NoEvidence, qs[3].Evidence)
	}
	if !slices.Equal(qs[4].Evidence, []string{"D1:3"}) || qs[4].Unresolved != 1 || qs[4].Answer != "" || qs[4].Category != 5 {
		t.Errorf("question 5 = %+v, want evidence [D1:3], 1 unresolved, no answer, category 5", qs[4])
	}
	if qs[5].Answer != "2023" {
		t.Errorf("question 6 answer = %q, want the number 2023 as text", qs[5].Answer)
	}
}

func TestLoadLoCoMoBadJSON(t *testing.T) {
	if _, err := LoadLoCoMo(strings.NewReader(`{"not":"an array"}`)); err == nil {
		t.Error("LoadLoCoMo(object) succeeded, want an error")
	}
}

func TestLoadJSONL(t *testing.T) {
	d := loadFixture(t, "tiny.jsonl", LoadJSONL)
	if len(d.Conversations) != 2 || d.Messages() != 9 || d.Questions() != 5 {
		t.Fatalf("got %d conversations, %d messages, %d questions; want 2, 9, 5", len(d.Conversations), d.Messages(), d.Questions())
	}
	c := d.Conversations[0]
	if c.ID != "support 1" || c.Messages[2].Metadata[TurnKey] != "3" || len(c.Messages[2].ToolCalls) != 1 {
		t.Errorf("conversation 1 = %s, message 3 id %q with %d tool calls; want support 1, 3, 1", c.ID, c.Messages[2].Metadata[TurnKey], len(c.Messages[2].ToolCalls))
	}
	p := c.Questions[2]
	if !slices.Equal(p.Evidence, []string{"7"}) || p.Malformed != 1 || p.Unresolved != 1 {
		t.Errorf("probe 3 evidence %v, malformed %d, unresolved %d; want [7], 1, 1", p.Evidence, p.Malformed, p.Unresolved)
	}
	if _, err := LoadJSONL(strings.NewReader("{\"id\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n{broken\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("LoadJSONL(bad line 2) error = %v, want one naming line 2", err)
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"7 May 2023", "7 may 2023"},
		{"[1:00 pm on 2 May, 2023]", "100 pm on 2 may 2023"},
		{"The cat and a dog, an owl.", "cat and dog owl"},
		{"Don't STOP!", "dont stop"},
		{"kavya@example.com", "kavyaexamplecom"},
		{"a an the", ""},
	}
	for _, tt := range tests {
		if got := strings.Join(Normalize(tt.in), " "); got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAnswerPresence(t *testing.T) {
	ctx := []tokenSet{newTokenSet("Ana: Yes, painting every weekend now."), newTokenSet("May 2023")}
	tests := []struct {
		answer string
		want   float64
		ok     bool
	}{
		{"pottery and painting", 1.0 / 3, true}, // painting
		{"7 May 2023", 2.0 / 3, true},           // may, 2023
		{"painting painting pottery", 2.0 / 3, true},
		{"The weekend", 1, true}, // the article is not a token
		{"Biscuit", 0, true},
		{"the", 0, false},
	}
	for _, tt := range tests {
		got, ok := AnswerPresence(Normalize(tt.answer), ctx)
		if !near(got, tt.want) || ok != tt.ok {
			t.Errorf("AnswerPresence(%q) = %v, %v; want %v, %v", tt.answer, got, ok, tt.want, tt.ok)
		}
	}
}

func TestEvidenceRecall(t *testing.T) {
	found := map[string]bool{"D1:3": true, "D2:6": true}
	tests := []struct {
		evidence []string
		want     float64
		hits     int
		ok       bool
	}{
		{[]string{"D1:3"}, 1, 1, true},
		{[]string{"D1:5", "D2:6"}, 0.5, 1, true},
		{[]string{"D1:1", "D1:5", "D2:6"}, 1.0 / 3, 1, true},
		{[]string{"D1:1"}, 0, 0, true},
		{nil, 0, 0, false},
	}
	for _, tt := range tests {
		got, hits, ok := EvidenceRecall(tt.evidence, found)
		if !near(got, tt.want) || hits != tt.hits || ok != tt.ok {
			t.Errorf("EvidenceRecall(%v) = %v, %d, %v; want %v, %d, %v", tt.evidence, got, hits, ok, tt.want, tt.hits, tt.ok)
		}
	}
}

func TestPercentile(t *testing.T) {
	xs := []int{17, 14, 16, 14, 16}
	for _, tt := range []struct {
		q    float64
		want int
	}{{0.5, 16}, {0.95, 17}, {0.2, 14}, {0.4, 14}, {0.41, 16}, {1, 17}} {
		if got := Percentile(xs, tt.q); got != tt.want {
			t.Errorf("Percentile(%v, %v) = %d, want %d", xs, tt.q, got, tt.want)
		}
	}
	if !slices.Equal(xs, []int{17, 14, 16, 14, 16}) {
		t.Errorf("Percentile sorted its input: %v", xs)
	}
	if got := Percentile([]int(nil), 0.5); got != 0 {
		t.Errorf("Percentile(nil) = %d, want 0", got)
	}
}

// TestLastTurnsByHand checks every metric on the LoCoMo fixture against
// values computed by hand. last_turns with 2 turns sends the question and
// the turn before it: D2:6 ("Yes, painting every weekend now.", 32
// characters, 8 tokens).
func TestLastTurnsByHand(t *testing.T) {
	d := loadFixture(t, "locomo_tiny.json", LoadLoCoMo)
	cfg := config([]chatmem.PolicyKind{chatmem.PolicyLastTurns}, nil)
	cfg.Turns = 2
	res := run(t, d, cfg)

	if got, want := res.Data, (DataStats{MalformedEvidence: 1, UnresolvedEvidence: 1, NoEvidence: 1, NoValidEvidence: 1, NoAnswer: 1}); got != want {
		t.Errorf("data stats = %+v, want %+v", got, want)
	}
	if len(res.Rows) != 1 || res.Rows[0].Label() != "last_turns(2)" {
		t.Fatalf("rows = %+v, want one last_turns(2)", res.Rows)
	}
	r := res.Rows[0]
	o := r.Overall
	// Categories 1-4: five questions, four with valid evidence. Only
	// question 3 (D1:5, D2:6) finds any: recall (0+0+0.5+0)/4.
	if o.Questions != 5 || o.RecallQuestions != 4 || !near(o.Recall, 0.125) || !near(o.AllHit, 0) || !near(o.AnyHit, 0.25) {
		t.Errorf("overall recall = %d questions, %d scored, %v, all %v, any %v; want 5, 4, 0.125, 0, 0.25", o.Questions, o.RecallQuestions, o.Recall, o.AllHit, o.AnyHit)
	}
	// Answers: Biscuit 0, 7 May 2023 0, pottery and painting 1/3, likely
	// yes 1/2, 2023 0: (1/3 + 1/2) / 5 = 1/6.
	if o.AnswerQuestions != 5 || !near(o.AnswerPresence, 1.0/6) {
		t.Errorf("overall answer presence = %v over %d, want 1/6 over 5", o.AnswerPresence, o.AnswerQuestions)
	}
	// Tokens: 8 plus the question's: 8, 9, 6, 6, 8 -> 16, 17, 14, 14, 16.
	if !near(o.TokensMean, 15.4) || o.TokensP50 != 16 || o.TokensP95 != 17 {
		t.Errorf("tokens mean %v p50 %d p95 %d, want 15.4, 16, 17", o.TokensMean, o.TokensP50, o.TokensP95)
	}
	if o.AssemblyP50us <= 0 || o.AssemblyP99us < o.AssemblyP50us {
		t.Errorf("assembly p50 %v p99 %v µs, want 0 < p50 <= p99", o.AssemblyP50us, o.AssemblyP99us)
	}
	cats := make(map[int]Group)
	for _, g := range r.Categories {
		cats[g.Category] = g
	}
	if g := cats[1]; g.Questions != 1 || !near(g.Recall, 0.5) || !near(g.AnswerPresence, 1.0/3) {
		t.Errorf("category 1 = %+v, want 1 question, recall 0.5, answer 1/3", g)
	}
	if g := cats[2]; g.Questions != 2 || !near(g.Recall, 0) || g.TokensP50 != 16 {
		t.Errorf("category 2 = %+v, want 2 questions, recall 0, tokens p50 16", g)
	}
	if g := cats[3]; g.Questions != 1 || g.RecallQuestions != 0 || !near(g.AnswerPresence, 0.5) {
		t.Errorf("category 3 = %+v, want 1 question, none scored for recall, answer 0.5", g)
	}
	a := r.Adversarial
	if a == nil || a.Questions != 1 || a.RecallQuestions != 1 || a.Recall != 0 || a.AnswerQuestions != 0 || a.TokensP50 != 14 {
		t.Errorf("adversarial = %+v, want 1 question, recall 0 over 1, no answer scored, 14 tokens", a)
	}
	if r.Failed != 0 {
		t.Errorf("failed = %d, want 0", r.Failed)
	}
}

// TestAllRecallsEverything: sending everything holds every valid evidence
// turn of every question.
func TestAllRecallsEverything(t *testing.T) {
	for _, fixture := range []struct {
		name string
		load func(io.Reader) (*Dataset, error)
	}{{"locomo_tiny.json", LoadLoCoMo}, {"tiny.jsonl", LoadJSONL}} {
		d := loadFixture(t, fixture.name, fixture.load)
		res := run(t, d, config([]chatmem.PolicyKind{chatmem.PolicyAll}, nil))
		r := res.Rows[0]
		groups := append([]Group{r.Overall}, r.Categories...)
		if r.Adversarial != nil {
			groups = append(groups, *r.Adversarial)
		}
		for _, g := range groups {
			if g.RecallQuestions > 0 && (g.Recall != 1 || g.AllHit != 1 || g.AnyHit != 1) {
				t.Errorf("%s: all, category %d: recall %v all-hit %v any-hit %v, want 1", fixture.name, g.Category, g.Recall, g.AllHit, g.AnyHit)
			}
		}
		if fixture.name == "locomo_tiny.json" {
			// Biscuit 1, 7 May 2023 2/3 (no 7), pottery and painting 2/3 (no
			// "and"), likely yes 1/2, 2023 1.
			if want := (1 + 2.0/3 + 2.0/3 + 0.5 + 1) / 5; !near(r.Overall.AnswerPresence, want) {
				t.Errorf("all: answer presence %v, want %v", r.Overall.AnswerPresence, want)
			}
			// 12 messages of 10+6+10+8+7+6+11+8+7+16+8+8 = 105 tokens (the
			// dates count: "[1:00 pm on 2 May, 2023] Hi Ben! Long week." is 43
			// characters), plus the questions of 8, 9, 6, 6, 8 tokens.
			if r.Overall.TokensP50 != 105+8 || !near(r.Overall.TokensMean, 105+37.0/5) {
				t.Errorf("all: tokens p50 %d mean %v, want %d, %v", r.Overall.TokensP50, r.Overall.TokensMean, 105+8, 105+37.0/5)
			}
		}
	}
}

// TestRecallNeverFallsAsBudgetGrows checks each budgeted policy on the
// fixture, overall and per category.
func TestRecallNeverFallsAsBudgetGrows(t *testing.T) {
	d := loadFixture(t, "locomo_tiny.json", LoadLoCoMo)
	budgets := []int{16, 24, 32, 48, 64, 96, 128, 256}
	res := run(t, d, config([]chatmem.PolicyKind{chatmem.PolicyTokenBudget, chatmem.PolicySummaryBuffer}, budgets))
	prev := make(map[string]Row)
	for _, r := range res.Rows {
		if p, ok := prev[r.Policy]; ok {
			if r.Overall.Recall < p.Overall.Recall {
				t.Errorf("%s recall %v < %s recall %v", r.Label(), r.Overall.Recall, p.Label(), p.Overall.Recall)
			}
			for i, g := range r.Categories {
				if g.Recall < p.Categories[i].Recall {
					t.Errorf("%s category %d recall %v < %s's %v", r.Label(), g.Category, g.Recall, p.Label(), p.Categories[i].Recall)
				}
			}
		}
		prev[r.Policy] = r
	}
	if last := prev[string(chatmem.PolicyTokenBudget)]; last.Overall.Recall != 1 {
		t.Errorf("token_budget@256 recall %v, want 1 (the whole conversation fits)", last.Overall.Recall)
	}
}

// TestFactsKeepProvenance: at budget 30 the first conversation's window
// holds the pinned system message (8 tokens), the question (6) and then
// either the last turn (messages 6 and 7, 13 tokens) or the facts block
// (13 tokens), not both. The order number (category 1, evidence message 2)
// is found only through the fact taken from message 2.
func TestFactsKeepProvenance(t *testing.T) {
	d := loadFixture(t, "tiny.jsonl", LoadJSONL)
	for _, tt := range []struct {
		facts          bool
		overall, order float64
	}{
		// Probes with evidence: order number (2), arrival (4, 5), socks (7),
		// email (1). Without facts the socks' and the email's messages fit.
		{false, 0.5, 0},
		// With facts, order_id (from message 2) and the email's message.
		{true, 0.5, 1},
	} {
		cfg := config([]chatmem.PolicyKind{chatmem.PolicyTokenBudget}, []int{30})
		cfg.Facts = tt.facts
		r := run(t, d, cfg).Rows[0]
		if !near(r.Overall.Recall, tt.overall) {
			t.Errorf("facts=%v: recall %v, want %v", tt.facts, r.Overall.Recall, tt.overall)
		}
		if len(r.Categories) != 1 || r.Categories[0].Category != 1 || !near(r.Categories[0].Recall, tt.order) {
			t.Errorf("facts=%v: categories %+v, want category 1 with recall %v", tt.facts, r.Categories, tt.order)
		}
		if r.Facts != tt.facts {
			t.Errorf("facts=%v: row says facts=%v", tt.facts, r.Facts)
		}
	}
}

func TestParallelMatchesSerial(t *testing.T) {
	d := loadFixture(t, "tiny.jsonl", LoadJSONL)
	policies := []chatmem.PolicyKind{chatmem.PolicyTokenBudget, chatmem.PolicySummaryBuffer}
	a := run(t, d, config(policies, []int{32, 64}))
	cfg := config(policies, []int{32, 64})
	cfg.Parallel = 2
	b := run(t, d, cfg)
	for i := range a.Rows {
		x, y := a.Rows[i].Overall, b.Rows[i].Overall
		if x.Recall != y.Recall || x.AnswerPresence != y.AnswerPresence || x.TokensMean != y.TokensMean {
			t.Errorf("%s: serial %+v, parallel %+v", a.Rows[i].Label(), x, y)
		}
	}
}

func TestTraceAndCharts(t *testing.T) {
	d := loadFixture(t, "locomo_tiny.json", LoadLoCoMo)
	res := run(t, d, config(nil, []int{32, 64}))
	if res.Trace == nil || len(res.Trace.Series) != len(res.Rows) {
		t.Fatalf("trace = %+v, want one series per row (%d)", res.Trace, len(res.Rows))
	}
	for i, s := range res.Trace.Series {
		if s.Label != res.Rows[i].Label() || len(s.Tokens) != 6 { // 6 user turns
			t.Errorf("series %d = %s with %d turns, want %s with 6", i, s.Label, len(s.Tokens), res.Rows[i].Label())
		}
	}
	// all sends the whole history each turn: user turns end at messages 1,
	// 3, 5, 8, 10, 12, holding 10, 26, 41, 66, 89 and 105 tokens.
	all := res.Trace.Series[0]
	if want := []int{10, 26, 41, 66, 89, 105}; !slices.Equal(all.Tokens, want) {
		t.Errorf("all per turn = %v, want %v", all.Tokens, want)
	}
	if want := []int{10, 36, 77, 143, 232, 337}; !slices.Equal(all.Cumulative(), want) {
		t.Errorf("all cumulative = %v, want %v", all.Cumulative(), want)
	}
	for name, chart := range map[string]func(io.Writer, *Result) error{"recall": RecallChart, "cumulative": CumulativeChart, "cost": CostChart} {
		var buf bytes.Buffer
		if err := chart(&buf, res); err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(&buf)
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s chart is not well-formed XML: %v", name, err)
			}
		}
	}
}

func TestKeyIDIsValid(t *testing.T) {
	for _, id := range []string{"support 1", "conv-26", "ünïcode/../x", strings.Repeat("x", 300)} {
		if err := chatmem.ValidateID(keyID("ab12cd34", id, "base")); err != nil {
			t.Errorf("keyID(%q): %v", id, err)
		}
	}
}

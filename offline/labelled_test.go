package offline

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// labelled is one message of testdata/facts.txt with the facts it states.
type labelled struct {
	line    int
	section string
	text    string
	facts   [][2]string // key, value
}

func readLabelled(t *testing.T) []labelled {
	t.Helper()
	f, err := os.Open("testdata/facts.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out     []labelled
		section string
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
			continue
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		}
		text, facts, ok := strings.Cut(line, " =>")
		if !ok {
			t.Fatalf("facts.txt:%d: no \" =>\" in %q", n, line)
		}
		l := labelled{line: n, section: section, text: text}
		for _, kv := range strings.Split(facts, "||") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("facts.txt:%d: %q is not key=value", n, kv)
			}
			l.facts = append(l.facts, [2]string{k, v})
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// normValue compares values without regard to case or spacing.
func normValue(v string) string {
	return strings.ToLower(strings.Join(strings.Fields(v), " "))
}

// TestRulesLabelled measures DefaultExtractor on testdata/facts.txt, a set
// of user messages written for chatmem and labelled by hand with the facts
// each states (and none for negations, questions and other people's
// details), and prints precision and recall per key. A fact counts as
// found when the key and the value match; a wrong value is both a false
// positive and a miss.
func TestRulesLabelled(t *testing.T) {
	set := readLabelled(t)
	sections := make(map[string]bool)
	for _, l := range set {
		sections[strings.SplitN(l.section, ":", 2)[0]] = true
	}
	if len(set) < 200 || len(sections) < 4 {
		t.Fatalf("facts.txt has %d messages in %d languages; want at least 200 in 4", len(set), len(sections))
	}
	x := DefaultExtractor()
	type counts struct{ tp, fp, fn int }
	per := make(map[string]*counts)
	at := func(k string) *counts {
		if per[k] == nil {
			per[k] = &counts{}
		}
		return per[k]
	}
	var total counts
	for _, l := range set {
		facts, err := x.Extract(context.Background(), []chatmem.Message{{Seq: 1, Role: chatmem.RoleUser, Content: l.text}})
		if err != nil {
			t.Fatal(err)
		}
		want := make(map[[2]string]int)
		for _, kv := range l.facts {
			want[[2]string{kv[0], normValue(kv[1])}]++
		}
		var extra []string
		for _, f := range facts {
			k := [2]string{f.Key, normValue(f.Value)}
			if want[k] > 0 {
				want[k]--
				at(f.Key).tp++
				total.tp++
				continue
			}
			at(f.Key).fp++
			total.fp++
			extra = append(extra, f.Key+"="+f.Value)
		}
		var missed []string
		for k, n := range want {
			for range n {
				at(k[0]).fn++
				total.fn++
				missed = append(missed, k[0]+"="+k[1])
			}
		}
		slices.Sort(missed)
		if len(extra) > 0 || len(missed) > 0 {
			t.Logf("facts.txt:%d %q: took %q, missed %q", l.line, l.text, extra, missed)
		}
	}
	ratio := func(a, b int) float64 {
		if b == 0 {
			return 1
		}
		return float64(a) / float64(b)
	}
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages\n%-16s %5s %5s %5s %9s %6s\n", len(set), "key", "tp", "fp", "fn", "precision", "recall")
	for _, k := range keys {
		c := per[k]
		fmt.Fprintf(&b, "%-16s %5d %5d %5d %9.3f %6.3f\n", k, c.tp, c.fp, c.fn, ratio(c.tp, c.tp+c.fp), ratio(c.tp, c.tp+c.fn))
	}
	p, r := ratio(total.tp, total.tp+total.fp), ratio(total.tp, total.tp+total.fn)
	fmt.Fprintf(&b, "%-16s %5d %5d %5d %9.3f %6.3f", "overall", total.tp, total.fp, total.fn, p, r)
	t.Log("\n" + b.String())
	if p < 0.95 || r < 0.85 {
		t.Errorf("overall precision %.3f, recall %.3f; want at least 0.95 and 0.85", p, r)
	}
}

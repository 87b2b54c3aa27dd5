package eval

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
)

// The charts are hand-written SVG: a few lines, axes and labels need no
// plotting library.

// Published context sizes on LoCoMo (tokens per question; the mem0 paper,
// arXiv 2504.19413, Table 2), marked on the recall chart for LoCoMo.
var published = []struct {
	name   string
	tokens float64
}{
	{"Mem0 1,764", 1764},
	{"Zep 3,911", 3911},
	{"full context 26,031", 26031},
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"}

const (
	chartW, chartH                  = 880, 480
	padL, padR, padT, padB          = 70, 250, 40, 50
	plotW, plotH                    = chartW - padL - padR, chartH - padT - padB
	fontAttrs                       = `font-family="sans-serif" font-size="12"`
	axisColor, gridColor, textColor = "#333", "#ddd", "#222"
)

type svg struct {
	w   *bufio.Writer
	err error
}

func (s *svg) printf(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

func (s *svg) begin(title string) {
	s.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s>`+"\n", chartW, chartH, chartW, chartH, fontAttrs)
	s.printf(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	s.printf(`<text x="%d" y="22" font-size="15" fill="%s">%s</text>`+"\n", padL, textColor, html.EscapeString(title))
}

func (s *svg) end() error {
	s.printf("</svg>\n")
	if s.err != nil {
		return s.err
	}
	return s.w.Flush()
}

func (s *svg) text(x, y float64, anchor, color, t string) {
	s.printf(`<text x="%.1f" y="%.1f" text-anchor="%s" fill="%s">%s</text>`+"\n", x, y, anchor, color, html.EscapeString(t))
}

func (s *svg) line(x1, y1, x2, y2 float64, color string, dash bool) {
	d := ""
	if dash {
		d = ` stroke-dasharray="4 3"`
	}
	s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", x1, y1, x2, y2, color, d)
}

func (s *svg) polyline(xs, ys []float64, color string, dash bool) {
	if len(xs) == 0 {
		return
	}
	s.printf(`<polyline fill="none" stroke="%s" stroke-width="2"`, color)
	if dash {
		s.printf(` stroke-dasharray="6 4"`)
	}
	s.printf(` points="`)
	for i := range xs {
		s.printf("%.1f,%.1f ", xs[i], ys[i])
	}
	s.printf(`"/>` + "\n")
}

func (s *svg) legend(i int, color, label string, dash bool) {
	x, y := float64(chartW-padR+15), float64(padT+10+18*i)
	if dash {
		s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", x, y, x+22, y, color)
	} else {
		s.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", x, y, x+22, y, color)
	}
	s.text(x+28, y+4, "start", textColor, label)
}

// frame draws the plot's box and axis titles.
func (s *svg) frame(xTitle, yTitle string) {
	s.printf(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", padL, padT, plotW, plotH, axisColor)
	s.text(padL+plotW/2, chartH-10, "middle", textColor, xTitle)
	s.printf(`<text transform="translate(16 %d) rotate(-90)" text-anchor="middle" fill="%s">%s</text>`+"\n", padT+plotH/2, textColor, html.EscapeString(yTitle))
}

// RecallChart writes an SVG chart of evidence recall (solid) and answer
// presence (dashed), categories 1-4, against mean tokens sent per question
// on a log scale, one line per policy through its budgets. For LoCoMo it marks the published context
// sizes of full context, Zep and Mem0.
func RecallChart(w io.Writer, res *Result) error {
	s := &svg{w: bufio.NewWriter(w)}
	s.begin(fmt.Sprintf("Evidence recall and answer presence vs tokens sent per question (%s, %s)", res.Dataset, res.Tokenizer))
	s.frame("mean tokens sent per question (log scale)", "share (mean over questions)")

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range res.Rows {
		lo, hi = min(lo, r.Overall.TokensMean), max(hi, r.Overall.TokensMean)
	}
	if res.Dataset == "locomo" {
		for _, p := range published {
			lo, hi = min(lo, p.tokens), max(hi, p.tokens)
		}
	}
	if math.IsInf(lo, 0) || lo <= 0 {
		lo, hi = 1, 10
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	x := func(t float64) float64 {
		return padL + plotW*(math.Log10(max(t, lo))-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	y := func(v float64) float64 { return padT + plotH*(1-v) }
	for v := 0.0; v <= 1.0001; v += 0.2 {
		s.line(padL, y(v), padL+plotW, y(v), gridColor, false)
		s.text(padL-6, y(v)+4, "end", textColor, strconv.FormatFloat(v, 'f', 1, 64))
	}
	for t := lo; t <= hi*1.0001; t *= 10 {
		s.line(x(t), padT, x(t), padT+plotH, gridColor, false)
		s.text(x(t), padT+plotH+16, "middle", textColor, strconv.FormatFloat(t, 'f', -1, 64))
	}
	if res.Dataset == "locomo" {
		for i, p := range published {
			s.line(x(p.tokens), padT, x(p.tokens), padT+plotH, "#999", true)
			s.text(x(p.tokens)+3, float64(padT+16+14*i), "start", "#666", p.name)
		}
	}

	// One line per policy (and cache mode), through its rows in order of
	// tokens.
	order, byPolicy := linesOf(res.Rows)
	for i, p := range order {
		rows := slices.Clone(byPolicy[p])
		slices.SortStableFunc(rows, func(a, b Row) int { return int(a.Overall.TokensMean - b.Overall.TokensMean) })
		color := palette[i%len(palette)]
		var xs, ys []float64
		for _, r := range rows {
			xs, ys = append(xs, x(r.Overall.TokensMean)), append(ys, y(r.Overall.Recall))
		}
		s.polyline(xs, ys, color, false)
		var ps []float64
		for _, r := range rows {
			ps = append(ps, y(r.Overall.AnswerPresence))
		}
		s.polyline(xs, ps, color, true)
		for j := range rows {
			s.printf(`<circle cx="%.1f" cy="%.1f" r="3" fill="white" stroke="%s"/>`+"\n", xs[j], ps[j], color)
		}
		for j, r := range rows {
			s.printf(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", xs[j], ys[j], color)
			label := ""
			if r.Budget > 0 {
				label = strconv.Itoa(r.Budget)
			}
			if label != "" {
				s.text(xs[j]+5, ys[j]-7, "start", color, label)
			}
		}
		s.legend(i, color, rows[0].legendName(), false)
	}
	s.legend(len(order)+1, "#555", "evidence recall", false)
	s.legend(len(order)+2, "#555", "answer presence", true)
	return s.end()
}

// linesOf groups rows into a chart's lines, one per policy and cache
// mode, in the order they first come.
func linesOf(rows []Row) (order []string, byLine map[string][]Row) {
	byLine = make(map[string][]Row)
	for _, r := range rows {
		k := r.Policy + "/" + r.Cache
		if _, ok := byLine[k]; !ok {
			order = append(order, k)
		}
		byLine[k] = append(byLine[k], r)
	}
	return order, byLine
}

func (r Row) legendName() string {
	name := r.Policy
	if r.Cache != "" {
		name += " " + r.Cache
	}
	switch {
	case r.Budget > 0:
		return name + " (by budget)"
	case r.Turns > 0:
		return fmt.Sprintf("%s (%d turns)", name, r.Turns)
	}
	return name
}

// CostChart writes an SVG chart of evidence recall (categories 1-4)
// against the effective input cost per request under prompt caches (in
// tokens at the uncached price, log scale): OpenAI's (solid) and
// Anthropic's (dashed), one line per policy and cache mode through its
// budgets (see Cost). Rows without a cost (the BM25 baseline) are left
// out. A row above and left of another recalls more for less.
func CostChart(w io.Writer, res *Result) error {
	s := &svg{w: bufio.NewWriter(w)}
	s.begin(fmt.Sprintf("Evidence recall vs effective input cost per request under prompt caches (%s, %s)", res.Dataset, res.Tokenizer))
	s.frame("effective input cost per request, tokens at the uncached price (log scale)", "evidence recall (mean over questions)")
	var rows []Row
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range res.Rows {
		if r.Cost == nil || r.Cost.Requests == 0 {
			continue
		}
		rows = append(rows, r)
		for _, c := range []float64{r.Cost.OpenAI, r.Cost.Anthropic} {
			c /= float64(r.Cost.Requests)
			lo, hi = min(lo, c), max(hi, c)
		}
	}
	if math.IsInf(lo, 0) || lo <= 0 {
		lo, hi = 1, 10
	}
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	x := func(t float64) float64 {
		return padL + plotW*(math.Log10(max(t, lo))-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	y := func(v float64) float64 { return padT + plotH*(1-v) }
	for v := 0.0; v <= 1.0001; v += 0.2 {
		s.line(padL, y(v), padL+plotW, y(v), gridColor, false)
		s.text(padL-6, y(v)+4, "end", textColor, strconv.FormatFloat(v, 'f', 1, 64))
	}
	for t := lo; t <= hi*1.0001; t *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if t*m > hi*1.0001 {
				break
			}
			s.line(x(t*m), padT, x(t*m), padT+plotH, gridColor, false)
			s.text(x(t*m), padT+plotH+16, "middle", textColor, humanize(t*m))
		}
	}
	order, byLine := linesOf(rows)
	for i, k := range order {
		line := slices.Clone(byLine[k])
		slices.SortStableFunc(line, func(a, b Row) int { return a.Budget - b.Budget })
		color := palette[i%len(palette)]
		var xo, xa, ys []float64
		for _, r := range line {
			n := float64(r.Cost.Requests)
			xo, xa = append(xo, x(r.Cost.OpenAI/n)), append(xa, x(r.Cost.Anthropic/n))
			ys = append(ys, y(r.Overall.Recall))
		}
		s.polyline(xo, ys, color, false)
		s.polyline(xa, ys, color, true)
		for j, r := range line {
			s.printf(`<circle cx="%.1f" cy="%.1f" r="3" fill="white" stroke="%s"/>`+"\n", xa[j], ys[j], color)
			s.printf(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", xo[j], ys[j], color)
			if r.Budget > 0 {
				s.text(xo[j]+5, ys[j]-7, "start", color, strconv.Itoa(r.Budget))
			}
		}
		s.legend(i, color, line[0].legendName(), false)
	}
	s.legend(len(order)+1, "#555", "OpenAI cache", false)
	s.legend(len(order)+2, "#555", "Anthropic cache", true)
	return s.end()
}

// CumulativeChart writes an SVG chart of the tokens sent per user turn,
// summed over the turns of the traced conversation, one line per row:
// sending everything grows quadratically in total, a window linearly.
func CumulativeChart(w io.Writer, res *Result) error {
	s := &svg{w: bufio.NewWriter(w)}
	title := "Cumulative tokens sent"
	if res.Trace != nil {
		title = fmt.Sprintf("Cumulative tokens sent per user turn, one conversation (%s, %s)", res.Dataset, res.Tokenizer)
	}
	s.begin(title)
	s.frame("user turn", "tokens sent, cumulative")
	if res.Trace == nil || len(res.Trace.Series) == 0 {
		return s.end()
	}
	turns, top := 1, 1
	for _, se := range res.Trace.Series {
		turns = max(turns, len(se.Tokens))
		if c := se.Cumulative(); len(c) > 0 {
			top = max(top, c[len(c)-1])
		}
	}
	yMax := niceCeil(float64(top))
	x := func(i int) float64 { return padL + plotW*float64(i)/float64(turns) }
	y := func(v float64) float64 { return padT + plotH*(1-v/yMax) }
	for k := 0; k <= 5; k++ {
		v := yMax * float64(k) / 5
		s.line(padL, y(v), padL+plotW, y(v), gridColor, false)
		s.text(padL-6, y(v)+4, "end", textColor, humanize(v))
	}
	for k := 0; k <= 5; k++ {
		i := turns * k / 5
		s.text(x(i), padT+plotH+16, "middle", textColor, strconv.Itoa(i))
	}
	for i, se := range res.Trace.Series {
		color := palette[i%len(palette)]
		c := se.Cumulative()
		xs, ys := []float64{x(0)}, []float64{y(0)}
		for j, v := range c {
			xs, ys = append(xs, x(j+1)), append(ys, y(float64(v)))
		}
		dash := i >= len(palette) // colors repeat: tell them apart
		s.polyline(xs, ys, color, dash)
		s.legend(i, color, se.Label, dash)
	}
	return s.end()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// humanize prints 1200000 as "1.2M" and 45000 as "45k".
func humanize(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

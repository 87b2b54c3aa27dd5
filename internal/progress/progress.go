// Package progress draws a one-line progress bar on a terminal, redrawn in
// place, for the CLI's long runs (bench, eval, the load tests).
package progress

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bar is a progress bar of a known total. It is not safe for concurrent
// use.
type Bar struct {
	w         io.Writer
	label     string
	total     int
	lastDrawn time.Time
	lastPct   int
}

// New draws the bar at 0%.
func New(w io.Writer, label string, total int) *Bar {
	p := &Bar{w: w, label: label, total: total, lastPct: -1}
	p.Set(0)
	return p
}

// Set redraws the bar at done of its total, at most every 200ms or on a
// change of the whole percentage.
func (p *Bar) Set(done int) {
	pct := done * 100 / max(p.total, 1)
	if pct == p.lastPct || (time.Since(p.lastDrawn) < 200*time.Millisecond && done < p.total) {
		return
	}
	p.lastPct, p.lastDrawn = pct, time.Now()
	const width = 30
	filled := pct * width / 100
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%%", p.label, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), pct)
}

// Done draws the bar at 100% and ends its line.
func (p *Bar) Done() {
	p.Set(p.total)
	fmt.Fprintln(p.w)
}

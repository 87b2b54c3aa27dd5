package chatmem

import "testing"

// TestJobCarried: a job carries a range only when it holds every message
// of it; the appends of one process may skip another's messages between
// them (seen with three replicas on one Redis Cluster).
func TestJobCarried(t *testing.T) {
	msgs := func(seqs ...int64) []Message {
		out := make([]Message, len(seqs))
		for i, s := range seqs {
			out[i] = Message{Seq: s}
		}
		return out
	}
	for _, c := range []struct {
		seqs     []int64
		from, to int64
		want     int // messages carried; -1 for nil
	}{
		{[]int64{18, 19, 20}, 18, 20, 3},
		{[]int64{18, 19, 20}, 19, 20, 2},
		{[]int64{18, 20}, 18, 20, -1}, // 19 is another process's
		{[]int64{18, 20}, 19, 20, -1},
		{[]int64{18, 19}, 18, 20, -1},
		{nil, 1, 1, -1},
	} {
		got := job{msgs: msgs(c.seqs...)}.carried(c.from, c.to)
		if c.want < 0 && got != nil || c.want >= 0 && len(got) != c.want {
			t.Errorf("job%v.carried(%d, %d) = %d messages, want %d", c.seqs, c.from, c.to, len(got), c.want)
			continue
		}
		for i, m := range got {
			if m.Seq != c.from+int64(i) {
				t.Errorf("job%v.carried(%d, %d)[%d].Seq = %d", c.seqs, c.from, c.to, i, m.Seq)
			}
		}
	}
}

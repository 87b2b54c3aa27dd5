package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRecountPlans checks that Recount's statements search indexes: the
// UPDATE seeks its message in messages_seq, and the system seqs come from
// messages_system alone.
func TestRecountPlans(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "plan.db"))
	for q, index := range map[string]string{
		updateMessageCounts: "INDEX messages_seq (tenant=? AND conv_id=? AND seq=?)",
		selectSystemSeqs:    "COVERING INDEX messages_system",
		updateCounts:        "PRIMARY KEY (tenant=? AND id=?)",
	} {
		plan := explain(t, s.r.db, q)
		if !strings.Contains(plan, index) {
			t.Errorf("query %s: plan does not use %s:\n%s", oneLine(q), index, plan)
		}
		for _, line := range strings.Split(plan, "\n") {
			if strings.HasPrefix(line, "SCAN") || strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("query %s: plan has %q:\n%s", oneLine(q), line, plan)
			}
		}
	}
}

package memstore

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Dump prints everything s holds, for the conformance suite's erasure
// scan: every tenant, user, conversation and what each keeps.
func Dump(s *Store) []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(s.tenants)) {
		tn := s.tenants[name]
		fmt.Fprintf(&b, "tenant %s ids %v\n", name, tn.ids)
		for id, u := range tn.users {
			fmt.Fprintf(&b, "user %s convs %v facts %+v\n", id, u.convs, u.facts)
		}
		for id, c := range tn.convs {
			fmt.Fprintf(&b, "conv %s meta %+v msgs %+v system %v summary %+v facts %+v idem %+v\n",
				id, c.meta, c.msgs.slice(0, c.msgs.len()), c.system, c.summary, c.facts, c.idem)
			for _, chunk := range c.msgs.chunks {
				fmt.Fprintf(&b, "text %s\n", chunk)
			}
			c.index.mu.Lock()
			for term, seqs := range c.index.postings {
				fmt.Fprintf(&b, "posting %s %v\n", term, seqs)
			}
			c.index.mu.Unlock()
			for model, vecs := range c.vectors {
				fmt.Fprintf(&b, "vectors %s %v\n", model, vecs)
			}
		}
	}
	return []byte(b.String())
}

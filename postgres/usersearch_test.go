package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
)

// fillUser appends n messages of Zipf text to each of the user's
// conversations U-c-0..U-c-(convs-1), 1,000 per append, the conversations
// taking turns so that their dates interleave.
func fillUser(tb testing.TB, s chatmem.Store, user chatmem.Key, convs, n int, z *zipfText) {
	tb.Helper()
	for done := 0; done < n; {
		batch := min(1000, n-done)
		for c := range convs {
			msgs := make([]chatmem.Message, batch)
			for i := range msgs {
				role := chatmem.RoleUser
				if (done+i)%2 == 1 {
					role = chatmem.RoleAssistant
				}
				msgs[i] = chatmem.Message{Role: role, Content: z.sentence(), Tokens: 20}
			}
			key := chatmem.Key{Tenant: user.Tenant, ID: fmt.Sprintf("%s-c-%d", user.ID, c)}
			if _, err := s.Append(context.Background(), key, msgs, chatmem.AppendOptions{User: user.ID}); err != nil {
				tb.Fatalf("fill %s at %d: %v", key, done, err)
			}
		}
		done += batch
	}
	for c := range convs {
		indexPending(tb, s, chatmem.Key{Tenant: user.Tenant, ID: fmt.Sprintf("%s-c-%d", user.ID, c)})
	}
}

// TestUserPostingsPlan checks that UserPostings reads each term with a
// backward scan of message_terms_user under a Limit, with custom and
// generic plans alike: no sequential scan, no bitmap of all matches, no
// sort, and a probe of the conversation per posting; and UserMessagesAt with probes
// of the conversations' and messages' primary keys.
func TestUserPostingsPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 20,000 messages")
	}
	schema := newSchema(t)
	s := open(t, schema)
	z := newZipfText(1)
	user := chatmem.Key{Tenant: "plan", ID: "u"}
	fillUser(t, s, user, 10, 2000, z)
	// Conversations enough that reading them all costs more than
	// probing a few.
	for i := range 300 {
		fillUser(t, s, chatmem.Key{Tenant: "plan", ID: fmt.Sprintf("v%d", i)}, 1, 1, z)
	}
	pool, terms := analyzeForPlans(t, schema, z)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := explain(t, pool, postgres.UserPostingsSQL(schema), fmt.Sprintf("'plan', 'u', %s, now(), 256", terms), mode)
		if testing.Verbose() {
			t.Logf("UserPostings, %s:\n%s", mode, plan)
		}
		if !strings.Contains(plan, "Scan Backward using message_terms_user") || strings.Contains(plan, "Seq Scan on message_terms") ||
			strings.Contains(plan, "Bitmap") || strings.Contains(plan, "Sort") ||
			strings.Contains(plan, "Seq Scan on conversations") {
			t.Errorf("UserPostings plan with %s is not a backward index scan per term:\n%s", mode, plan)
		}
		plan = explain(t, pool, postgres.UserMessagesAtSQL(schema),
			"'plan', 'u', ARRAY['u-c-1', 'u-c-2', 'u-c-3']::text[], ARRAY[5, 900, 1700]::bigint[], now()", mode)
		if testing.Verbose() {
			t.Logf("UserMessagesAt, %s:\n%s", mode, plan)
		}
		if !strings.Contains(plan, "Index Scan using messages_pkey") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("UserMessagesAt plan with %s is not primary key probes:\n%s", mode, plan)
		}
	}
}

// BenchmarkUserPostings measures UserPostings of six terms of assorted
// frequencies (limit 256, as BenchmarkPostings) for a user with 1,000
// messages over 10 conversations and one with 1,000,000 over 1,000 (left
// out with -short), written by Append, each message dated a millisecond
// after the one before with the conversations' dates interleaved. The time
// per call should not grow with the user's history.
func BenchmarkUserPostings(b *testing.B) {
	type size struct{ messages, convs int }
	sizes := []size{{1000, 10}, {1000000, 1000}}
	if testing.Short() {
		sizes = sizes[:1]
	}
	schema := newSchema(b)
	s := open(b, schema)
	z := newZipfText(7)
	users := make([]chatmem.Key, len(sizes))
	for i, sz := range sizes {
		users[i] = chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("user-%d", sz.messages)}
		start := time.Now()
		fillUserDated(b, s, users[i], sz.convs, sz.messages/sz.convs, z)
		b.Logf("fill: %d messages over %d conversations in %v", sz.messages, sz.convs, time.Since(start).Round(time.Millisecond))
	}
	admin := testenv.PostgresAdmin(b)
	if _, err := admin.Exec(context.Background(), "VACUUM ANALYZE "+schema+".messages, "+schema+".message_terms, "+schema+".conversations"); err != nil {
		b.Fatal(err)
	}
	for _, set := range []struct {
		name  string
		ranks []int
	}{{"mixed", []int{0, 3, 20, 150, 1000, 4000}}, {"frequent", []int{0, 1, 2, 3, 4, 5}}} {
		var terms []string
		for _, r := range set.ranks {
			terms = append(terms, z.term(r))
		}
		for i, sz := range sizes {
			b.Run(fmt.Sprintf("terms=%s/messages=%d/convs=%d", set.name, sz.messages, sz.convs), func(b *testing.B) {
				b.ReportAllocs()
				var found int
				for b.Loop() {
					out, err := s.UserPostings(b.Context(), users[i], terms, 256)
					if err != nil {
						b.Fatal(err)
					}
					found = 0
					for _, hits := range out {
						found += len(hits)
					}
				}
				b.ReportMetric(float64(found), "postings/op")
			})
		}
	}
}

// fillUserDated appends n messages of Zipf text to each of the user's
// conversations U-c-0..U-c-(convs-1), 1,000 per append, message j of
// conversation c dated j*convs + c milliseconds after a fixed time.
func fillUserDated(tb testing.TB, s chatmem.Store, user chatmem.Key, convs, n int, z *zipfText) {
	tb.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for c := range convs {
		key := chatmem.Key{Tenant: user.Tenant, ID: fmt.Sprintf("%s-c-%d", user.ID, c)}
		for done := 0; done < n; {
			msgs := make([]chatmem.Message, min(1000, n-done))
			for i := range msgs {
				j := done + i
				role := chatmem.RoleUser
				if j%2 == 1 {
					role = chatmem.RoleAssistant
				}
				msgs[i] = chatmem.Message{Role: role, Content: z.sentence(), Tokens: 20,
					CreatedAt: base.Add(time.Duration(j*convs+c) * time.Millisecond)}
			}
			if _, err := s.Append(context.Background(), key, msgs, chatmem.AppendOptions{User: user.ID}); err != nil {
				tb.Fatalf("fill %s at %d: %v", key, done, err)
			}
			done += len(msgs)
		}
		indexPending(tb, s, key)
	}
}

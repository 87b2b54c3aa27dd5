package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/storetest"
)

// timedStore counts the time spent in Append, so that BenchmarkTail can
// report how long storetest took to fill its conversations.
type timedStore struct {
	chatmem.Store
	mu       sync.Mutex
	appended time.Duration
	messages int
}

func (s *timedStore) Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error) {
	start := time.Now()
	res, err := s.Store.Append(ctx, key, msgs, opts)
	s.mu.Lock()
	s.appended += time.Since(start)
	s.messages += len(msgs)
	s.mu.Unlock()
	return res, err
}

// BenchmarkTail measures Tail{Tokens: 4000} (a 200-message window) on
// conversations of 1,000 to 1,000,000 messages: the time per read should not
// grow with the conversation. It logs (shown with -v) how long the fill took.
func BenchmarkTail(b *testing.B) {
	s := &timedStore{Store: open(b, newSchema(b))}
	storetest.BenchmarkTail(b, s, []int{1000, 100000, 1000000})
	b.Logf("fill: %d messages in %v (%.0f messages/s, appends of 1000)",
		s.messages, s.appended.Round(time.Millisecond), float64(s.messages)/s.appended.Seconds())
}

// BenchmarkWindowVsRaw compares Store.Tail{Tokens: 4000} on a 100,000-message
// conversation with the least a client could do: one prepared query for the
// same 200 rows by a known seq range, scanned into the same Messages. The
// difference is what the store's window logic costs.
func BenchmarkWindowVsRaw(b *testing.B) {
	const n, window = 100000, 200
	schema := newSchema(b)
	s := open(b, schema)
	key := chatmem.Key{Tenant: "bench", ID: "window"}
	fill(b, s, key, n)
	ctx := context.Background()
	// Settle the table as autovacuum would, so that neither side of the
	// comparison runs while it works.
	if _, err := testenv.PostgresAdmin(b).Exec(ctx, "VACUUM ANALYZE "+schema+".messages"); err != nil {
		b.Fatal(err)
	}

	// The raw query selects the store's columns the way a hand-written
	// reader would, and scans them into chatmem.Message.
	raw := `SELECT seq, role, content, name, tool_calls, tool_call_id, tokens, created_at, metadata
		FROM ` + schema + `.messages
		WHERE tenant = $1 AND conv_id = $2 AND seq > $3
		ORDER BY seq`
	rawTail := func() ([]chatmem.Message, error) {
		rows, err := s.Pool().Query(ctx, raw, key.Tenant, key.ID, int64(n-window))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []chatmem.Message
		var m chatmem.Message
		var content, toolCalls, metadata []byte
		dest := []any{&m.Seq, &m.Role, &content, &m.Name, &toolCalls, &m.ToolCallID, &m.Tokens, &m.CreatedAt, &metadata}
		for rows.Next() {
			m = chatmem.Message{}
			if err := rows.Scan(dest...); err != nil {
				return nil, err
			}
			m.Content = string(content)
			out = append(out, m)
		}
		return out, rows.Err()
	}

	// Both must read the same window.
	got, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: 4000})
	if err != nil {
		b.Fatal(err)
	}
	want, err := rawTail()
	if err != nil {
		b.Fatal(err)
	}
	if len(got) != window || len(want) != window || got[0].Seq != want[0].Seq {
		b.Fatalf("Tail = %d messages from seq %d, raw = %d from seq %d; want %d each, same start",
			len(got), got[0].Seq, len(want), want[0].Seq, window)
	}

	// raw runs first, so that store can report the ratio to it.
	var rawPerOp time.Duration
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if msgs, err := rawTail(); err != nil || len(msgs) != window {
				b.Fatalf("%d messages, %v", len(msgs), err)
			}
		}
		rawPerOp = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("store", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if msgs, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: 4000}); err != nil || len(msgs) != window {
				b.Fatalf("%d messages, %v", len(msgs), err)
			}
		}
		if rawPerOp > 0 {
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(rawPerOp), "x-raw") // goal: at most 1.5
		}
	})
}

// BenchmarkAppend measures single-message appends to one conversation (each
// one transaction, so bound by the commit's WAL flush) and 1000-message
// batches.
func BenchmarkAppend(b *testing.B) {
	s := open(b, newSchema(b))
	ctx := context.Background()
	for _, size := range []int{1, 1000} {
		msgs := make([]chatmem.Message, size)
		for i := range msgs {
			msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: "a message of some length, as users write them", Tokens: 12}
		}
		key := chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("append-%d", size)}
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size*b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// zipfText writes chat-like messages: sentences of 6 to 20 words drawn from
// a vocabulary of 5,000 made-up words with a Zipf distribution (s = 1.07),
// so that a few terms are in most messages and most are rare, as in
// real conversations. It is deterministic for a seed.
type zipfText struct {
	words []string
	rng   *rand.Rand
	zipf  *rand.Zipf
}

func newZipfText(seed uint64) *zipfText {
	const vocabulary = 5000
	// The vocabulary is the same for every seed, so that a benchmark can
	// name words by rank.
	vr := rand.New(rand.NewPCG(1, 2))
	consonants, vowels := "bcdfghjklmnprstvz", "aeiou"
	seen := make(map[string]bool)
	var words []string
	for len(words) < vocabulary {
		var b strings.Builder
		for range 2 + vr.IntN(3) {
			b.WriteByte(consonants[vr.IntN(len(consonants))])
			b.WriteByte(vowels[vr.IntN(len(vowels))])
		}
		w := b.String()
		// Keep words that are one term of their own, distinct from the
		// others' after stemming.
		if t := chatmem.Terms(w); len(t) != 1 || seen[t[0]] {
			continue
		} else {
			seen[t[0]] = true
		}
		words = append(words, w)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return &zipfText{words: words, rng: rng, zipf: rand.NewZipf(rng, 1.07, 1, vocabulary-1)}
}

// term returns the search term of the word of rank r (0: the most common).
func (z *zipfText) term(r int) string { return chatmem.Terms(z.words[r])[0] }

// sentence returns one message's text.
func (z *zipfText) sentence() string {
	text, _ := z.draw()
	return text
}

// draw returns one message's text and the ranks of its words, each once,
// in order of first appearance: their terms are the message's IndexTerms.
func (z *zipfText) draw() (string, []int) {
	var b strings.Builder
	var ranks []int
	for i := range 6 + z.rng.IntN(15) {
		if i > 0 {
			b.WriteByte(' ')
		}
		r := int(z.zipf.Uint64())
		b.WriteString(z.words[r])
		if !slices.Contains(ranks, r) {
			ranks = append(ranks, r)
		}
	}
	b.WriteByte('.')
	return b.String(), ranks
}

// bulkFill stores n alternating user and assistant messages of zipfText
// sentences (20 tokens each) as a new conversation key, with their
// postings, by writing the tables directly with COPY, postings in primary
// key order: filling a million messages through Append would take most of
// an hour on a shared machine. TestBackfill and the conformance suite check
// that Append writes the same rows.
func bulkFill(tb testing.TB, s *postgres.Store, key chatmem.Key, n int, z *zipfText) {
	tb.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	terms := make([]string, len(z.words))
	for r := range z.words {
		terms[r] = z.term(r)
	}
	byTerm := make([]int, len(terms)) // rank -> position of its term in byte order
	order := make([]int, len(terms))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(terms[a], terms[b]) })
	for pos, r := range order {
		byTerm[r] = pos
	}

	var num int64
	if err := s.Pool().QueryRow(ctx, `INSERT INTO `+pgx.Identifier{s.Schema(), "conversations"}.Sanitize()+`
		(tenant, id, last_seq, tokens, turns, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)
		RETURNING num`, key.Tenant, key.ID, n, 20*n, (n+1)/2, now).Scan(&num); err != nil {
		tb.Fatalf("bulk fill %s: conversation: %v", key, err)
	}
	var postings []uint64 // byTerm[rank]<<32 | seq
	seq := 0
	rows := pgx.CopyFromFunc(func() ([]any, error) {
		if seq == n {
			return nil, nil
		}
		seq++
		text, ranks := z.draw()
		for _, r := range ranks {
			postings = append(postings, uint64(byTerm[r])<<32|uint64(seq))
		}
		role := "user"
		if seq%2 == 0 {
			role = "assistant"
		}
		return []any{key.Tenant, key.ID, int64(seq), role, []byte(text), "", nil, "", int64(20), int64(20 * seq), int64((seq + 1) / 2), now, nil}, nil
	})
	if _, err := s.Pool().CopyFrom(ctx, pgx.Identifier{s.Schema(), "messages"},
		[]string{"tenant", "conv_id", "seq", "role", "content", "name", "tool_calls", "tool_call_id", "tokens", "cum", "turn", "created_at", "metadata"},
		rows); err != nil {
		tb.Fatalf("bulk fill %s: messages: %v", key, err)
	}
	slices.Sort(postings)
	i := 0
	if _, err := s.Pool().CopyFrom(ctx, pgx.Identifier{s.Schema(), "message_terms"}, []string{"conv", "term", "seq"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(postings) {
				return nil, nil
			}
			p := postings[i]
			i++
			return []any{num, terms[order[p>>32]], int64(p & (1<<32 - 1))}, nil
		})); err != nil {
		tb.Fatalf("bulk fill %s: message_terms: %v", key, err)
	}
}

// fillText appends n alternating user and assistant messages of zipfText
// sentences to key, in appends of 1000.
func fillText(tb testing.TB, s chatmem.Store, key chatmem.Key, n int, z *zipfText) {
	tb.Helper()
	for done := 0; done < n; {
		msgs := make([]chatmem.Message, min(1000, n-done))
		for i := range msgs {
			role := chatmem.RoleUser
			if (done+i)%2 == 1 {
				role = chatmem.RoleAssistant
			}
			msgs[i] = chatmem.Message{Role: role, Content: z.sentence(), Tokens: 20}
		}
		if _, err := s.Append(context.Background(), key, msgs, chatmem.AppendOptions{}); err != nil {
			tb.Fatalf("fill %s at %d: %v", key, done, err)
		}
		done += len(msgs)
	}
	indexPending(tb, s, key)
}

// indexPending indexes the conversation's messages for search, as
// Memory's worker would have by then: appends do not (see IndexPending).
func indexPending(tb testing.TB, s chatmem.Store, key chatmem.Key) {
	tb.Helper()
	if err := s.(chatmem.IndexCatcher).IndexPending(context.Background(), key); err != nil {
		tb.Fatalf("index %s: %v", key, err)
	}
}

// benchQueries are the vocabulary ranks BenchmarkPostings searches for.
// "common" terms have more than 256 postings in any conversation of 1,000
// messages, so a search returns 6 x 256 at every size and any difference
// is the history's; "mixed" terms range from a word in one message in
// seven to one in one in 5,000, as a user's question would, and find more
// postings (up to the limit) in a longer history.
var benchQueries = []struct {
	name  string
	ranks []int
}{
	{"common", []int{0, 1, 2, 3, 4, 5}},
	{"mixed", []int{2, 20, 100, 300, 1000, 3000}},
}

// BenchmarkPostings measures Postings of 6 terms with limit 256 on
// conversations of 1,000 and 1,000,000 zipfText messages (the larger one
// skipped with -short), for each of benchQueries: the time per search
// should not grow with the conversation ("store"). "gin" runs the same
// search on the alternative PostgreSQL's full-text search offers, a
// tsvector of the same terms per message with a GIN index (one table and
// index per conversation, GIN's best case), queried with @@ ... ORDER BY
// seq DESC LIMIT 256 per term, in one statement of the same shape; its cost
// follows the matches in the conversation, and grows with it. Both report
// postings/op; the sizes of the tables and indexes are logged (-v). The
// conversations are written by bulkFill.
func BenchmarkPostings(b *testing.B) {
	sizes := []int{1000, 1000000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	const limit = 256
	schema := newSchema(b)
	s := open(b, schema)
	ctx := context.Background()
	admin := testenv.PostgresAdmin(b)
	exec := func(sql string) {
		b.Helper()
		if _, err := admin.Exec(ctx, strings.ReplaceAll(sql, "{s}", pgx.Identifier{schema}.Sanitize())); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	z := newZipfText(7)
	keys := make([]chatmem.Key, len(sizes))
	for i, n := range sizes {
		keys[i] = chatmem.Key{Tenant: "bench", ID: fmt.Sprintf("postings-%d", n)}
		start := time.Now()
		bulkFill(b, s, keys[i], n, z)
		b.Logf("fill: %d messages in %v", n, time.Since(start).Round(time.Millisecond))
	}
	checkPostings(b, s, keys[0], z) // the bulk fill wrote what Append would have

	// The alternative, built from the same postings: one table of
	// tsvectors per conversation, gin_docs_N, each with its own GIN index,
	// which is the best case for GIN (an index over all conversations
	// would also yield other conversations' matches).
	start := time.Now()
	for _, n := range sizes {
		exec(fmt.Sprintf(`CREATE TABLE {s}.gin_docs_%[1]d AS
			SELECT x.seq, array_to_tsvector(array_agg(x.term)) AS tsv
			FROM {s}.message_terms x JOIN {s}.conversations c ON c.num = x.conv
			WHERE c.tenant = 'bench' AND c.id = 'postings-%[1]d'
			GROUP BY x.seq;
			ALTER TABLE {s}.gin_docs_%[1]d ADD PRIMARY KEY (seq);
			CREATE INDEX gin_docs_%[1]d_tsv ON {s}.gin_docs_%[1]d USING gin (tsv)`, n))
		exec(fmt.Sprintf(`VACUUM ANALYZE {s}.gin_docs_%d`, n))
	}
	exec(`VACUUM ANALYZE {s}.messages, {s}.message_terms, {s}.conversations`)
	b.Logf("gin_docs built and tables vacuumed in %v", time.Since(start).Round(time.Millisecond))
	largest := sizes[len(sizes)-1]
	rels := []string{"messages", "messages_pkey", "message_terms", "message_terms_pkey",
		fmt.Sprintf("gin_docs_%d", largest), fmt.Sprintf("gin_docs_%d_tsv", largest)}
	var onDisk []string
	for _, rel := range rels {
		var size string
		if err := admin.QueryRow(ctx, "SELECT pg_size_pretty(pg_relation_size($1::regclass))", schema+"."+rel).Scan(&size); err != nil {
			b.Fatal(err)
		}
		onDisk = append(onDisk, rel+" "+size)
	}
	b.Logf("sizes: %s", strings.Join(onDisk, ", "))
	// gin is the search on gin_docs_N, in one statement of the store's
	// shape.
	gin := func(n int) string {
		return strings.ReplaceAll(fmt.Sprintf(`
SELECT t.ord, p.seq
FROM unnest($1::text[]) WITH ORDINALITY AS t (term, ord)
LEFT JOIN LATERAL (SELECT d.seq FROM {s}.gin_docs_%d d
                   WHERE d.tsv @@ t.term::tsquery AND d.seq < $2
                   ORDER BY d.seq DESC
                   LIMIT $3) p ON true`, n), "{s}", pgx.Identifier{schema}.Sanitize())
	}

	for _, q := range benchQueries {
		terms := make([]string, len(q.ranks))
		for i, r := range q.ranks {
			terms[i] = z.term(r)
		}
		for i, n := range sizes {
			key := keys[i]
			before := int64(n) + 1
			var want int
			b.Run(fmt.Sprintf("store/%s/messages=%d", q.name, n), func(b *testing.B) {
				b.ReportAllocs()
				var hits int
				for b.Loop() {
					out, err := s.Postings(ctx, key, terms, before, limit)
					if err != nil {
						b.Fatal(err)
					}
					hits = 0
					for _, p := range out {
						hits += len(p)
					}
				}
				want = hits
				b.ReportMetric(float64(hits), "postings/op")
			})
			b.Run(fmt.Sprintf("gin/%s/messages=%d", q.name, n), func(b *testing.B) {
				b.ReportAllocs()
				var hits int
				for b.Loop() {
					rows, err := s.Pool().Query(ctx, gin(n), terms, before, limit)
					if err != nil {
						b.Fatal(err)
					}
					hits = 0
					var ord int64
					var seq *int64
					if _, err := pgx.ForEachRow(rows, []any{&ord, &seq}, func() error {
						if seq != nil {
							hits++
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				if want != 0 && hits != want {
					b.Errorf("gin found %d postings, the store %d", hits, want)
				}
				b.ReportMetric(float64(hits), "postings/op")
			})
		}
	}
}

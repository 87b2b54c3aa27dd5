package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TestQueryPlans checks with EXPLAIN QUERY PLAN that every statement of the
// store searches an index and never scans a table or sorts: in particular
// that the tail read walks a covering index back from the newest message
// and reads an index range (both over the run it returns, whatever the
// length of the conversation: the plan cannot show where the walk stops,
// BenchmarkTailBounds shows it), and that the current facts are read without
// their history.
func TestQueryPlans(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "plan.db"))
	seen := map[string]bool{}
	for _, q := range append(append([]string{}, writeStatements...), readStatements...) {
		if seen[q] {
			continue
		}
		seen[q] = true
		plan := explain(t, s.r.db, q)
		t.Logf("%s\n%s", oneLine(q), plan)
		for _, line := range strings.Split(plan, "\n") {
			if allowedScans[line] {
				continue
			}
			if strings.HasPrefix(line, "SCAN") || strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("query %s: plan has %q, want index searches only:\n%s", oneLine(q), line, plan)
			}
		}
	}
	for q, index := range map[string]string{
		selectTailStart: "COVERING INDEX messages_seq (tenant=? AND conv_id=?)",
		selectRange:     "INDEX messages_seq",
		// The conversation's row, then the range of selectRange.
		selectConversationSince: "INDEX messages_seq (tenant=? AND conv_id=? AND seq>?)",
		selectSystem:            "INDEX messages_system",
		// One summary per conversation, one seek.
		selectSummary:       "INDEX summaries_conv (tenant=? AND conv_id=?)",
		selectSummaryCovers: "INDEX summaries_conv (tenant=? AND conv_id=?)",
		// Current facts without their history; one key's history, and
		// only its own, along the primary key.
		selectFacts:       "INDEX facts_current (tenant=? AND conv_id=?)",
		retireFact:        "INDEX facts_current (tenant=? AND conv_id=? AND key=?)",
		selectFactHistory: "PRIMARY KEY (tenant=? AND conv_id=? AND key=?)",
		deleteFact:        "PRIMARY KEY (tenant=? AND conv_id=? AND key=?)",
		// MATCH, both rowid bounds and the descending order go to FTS5.
		selectPostings: "SCAN message_terms VIRTUAL TABLE INDEX 192:M1><",
		// A user's conversations and facts along their own indexes.
		selectUserPage:            "INDEX conversations_user (tenant=? AND user_id=? AND id>?)",
		selectUserConversationIDs: "INDEX conversations_user (tenant=? AND user_id=?)",
		selectUserFacts:           "INDEX user_facts_current (tenant=? AND user_id=?)",
		selectUserFactHistory:     "PRIMARY KEY (tenant=? AND user_id=? AND key=?)",
		// The tenant's users: both index walks start at the cursor.
		selectUsers: "INDEX conversations_user (tenant=? AND user_id>?)",
		// One seek per seq asked for.
		selectMessagesAt: "SEARCH messages USING INDEX messages_seq (tenant=? AND conv_id=? AND seq=?)",
		// The user index: a term's postings are a range of the key, read
		// from its end; a conversation's hits checked by number.
		selectUserPostings:      "SEARCH user_postings USING PRIMARY KEY (uh=? AND term=?)",
		selectUserPostingsBelow: "SEARCH user_postings USING PRIMARY KEY (uh=? AND term=? AND (at,conv,seq)<(?,?,?))",
		selectUserPostingsTied:  "SEARCH user_postings USING PRIMARY KEY (uh=? AND term=? AND at=? AND conv<?)",
		selectUserPostingsRest:  "SEARCH user_postings USING PRIMARY KEY (uh=? AND term=? AND at=? AND conv=? AND seq<?)",
		// The delete trigger of 0015 (its first statement, old.num as ?1):
		// a seek per posting of the conversation, not a scan of the
		// user's postings.
		`DELETE FROM user_postings WHERE (uh, term, at, conv, seq) IN (
			SELECT p.uh, t.value, p.at, p.conv, p.seq FROM user_posted p, json_each(p.terms) t WHERE p.conv = ?1)`: "SEARCH user_postings USING PRIMARY KEY (uh=? AND term=? AND at=? AND conv=? AND seq=?)",
		selectUserConversations: "SEARCH c USING INDEX conversations_num (num=?",
		selectUserIdents:        "SEARCH c USING INDEX conversations_num (num=?",
		selectExpiredNums:       "SEARCH conversations USING INDEX conversations_expires (expires_at>? AND expires_at<?)",
		selectUserMessagesAt:    "SEARCH m USING INDEX messages_seq (tenant=? AND conv_id=? AND seq=?)",
	} {
		if plan := explain(t, s.r.db, q); !strings.Contains(plan, index) {
			t.Errorf("query %s: plan does not use %s:\n%s", oneLine(q), index, plan)
		}
	}
}

// allowedScans are the plan steps named SCAN that read no more than a
// search would.
var allowedScans = map[string]bool{
	// FTS5 takes the MATCH (M), the rowid bounds (>, <) and the order by
	// rowid descending (192 = FTS5_BI_ORDER_ROWID | FTS5_BI_ORDER_DESC
	// per sqlite's fts5_main.c): a seek in one doclist and at most LIMIT rowids.
	"SCAN message_terms VIRTUAL TABLE INDEX 192:M1><": true,
	// The user index's reads join the rows of a range of user_postings
	// (at most a LIMIT of them, or one date's) into one row.
	"SCAN (subquery-1)": true,
	// selectConversationSince's messages: the subquery's range, at most
	// its LIMIT rows, materialized and then read once.
	"SCAN m LEFT-JOIN": true,
	// The JSON array of seqs MessagesAt asks for.
	"SCAN json_each VIRTUAL TABLE INDEX 1:": true,
	// UserMessagesAt's JSON object of conversations, and each one's array
	// of seqs.
	"SCAN hc VIRTUAL TABLE INDEX 1:": true,
	"SCAN hs VIRTUAL TABLE INDEX 1:": true,
	// The backfill's partial index holds only the conversations still to
	// index, and it takes the first.
	"SCAN conversations USING INDEX conversations_unindexed": true,
	// The same for the user index's backfill.
	"SCAN conversations USING INDEX conversations_user_unindexed": true,
}

// explain returns the EXPLAIN QUERY PLAN of q, one step per line, with its
// parameters (?1, ?2, ...) bound to 1.
func explain(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	var args []any
	for i := 1; strings.Contains(q, "?"+strconv.Itoa(i)); i++ {
		args = append(args, 1)
	}
	if args == nil { // anonymous parameters, one per ?
		for range strings.Count(q, "?") {
			args = append(args, 1)
		}
	}
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", oneLine(q), err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }

// TestReopen checks that what one store wrote, another store over the same
// file reads, also after the first is closed.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reopen.db")
	key := chatmem.Key{Tenant: "acme", ID: "c1"}
	ctx := t.Context()
	s1, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "be brief", Tokens: 3},
		{Role: chatmem.RoleUser, Content: "nul\x00inside", Tokens: 4},
	}
	if _, err := s1.Append(ctx, key, msgs, chatmem.AppendOptions{IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Errorf("second Close error = %v, want nil", err)
	}
	s2 := open(t, path)
	got, err := s2.Range(ctx, key, 0, 0)
	if err != nil || len(got) != 2 || got[1].Content != "nul\x00inside" {
		t.Fatalf("Range after reopen = %+v, %v; want the 2 messages", got, err)
	}
	res, err := s2.Append(ctx, key, msgs, chatmem.AppendOptions{IdempotencyKey: "k"})
	if err != nil || !res.Replayed {
		t.Errorf("retry after reopen: Replayed = %v, %v; want true, nil", res.Replayed, err)
	}
	// The NUL is stored in the TEXT value, not cut off at it.
	var n int
	if err := s2.r.db.QueryRow(`SELECT length(CAST(content AS BLOB)) FROM messages WHERE seq = 2`).Scan(&n); err != nil || n != len("nul\x00inside") {
		t.Errorf("stored content is %d bytes, %v; want %d", n, err, len("nul\x00inside"))
	}
}

// TestOddPath checks that characters with a meaning in URIs (space, ?, #,
// %) are taken as part of the file name.
func TestOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%20e")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "chat mem?.db")
	s := open(t, path)
	key := chatmem.Key{Tenant: "t", ID: "c"}
	if _, err := s.Append(t.Context(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not at %q: %v", path, err)
	}
	if c, err := open(t, path).Conversation(t.Context(), key); err != nil || c.LastSeq != 1 {
		t.Errorf("Conversation through a second store = %+v, %v; want LastSeq 1", c, err)
	}
}

// TestOpenConcurrently opens one new file from several stores at once, as
// processes starting together do: the migrations must apply exactly once
// and every store must work.
func TestOpenConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.db")
	const n = 8
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(t.Context(), path, Options{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	for i, s := range stores {
		key := chatmem.Key{Tenant: "t", ID: "c"}
		res, err := s.Append(t.Context(), key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}, chatmem.AppendOptions{})
		if err != nil || res.Messages[0].Seq != int64(i+1) {
			t.Fatalf("store %d: Append = %+v, %v; want seq %d", i, res.Messages, err, i+1)
		}
	}
	var version int
	if err := stores[0].r.db.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if want := ms[len(ms)-1].version; version != want {
		t.Errorf("user_version = %d, want %d", version, want)
	}
}

// TestNewerSchema checks that a database migrated by a newer chatmem is
// refused, not written to.
func TestNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "newer.db")
	s := open(t, path)
	if _, err := s.w.db.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(t.Context(), path, Options{}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a schema version 999 database: error = %v, want one saying it is newer", err)
	}
}

// TestUpgradeFromVersion1 opens a database written before summaries and
// facts existed (schema version 1, with a conversation in it): Open adds
// them, and the conversation takes a summary and facts, which go with it.
func TestUpgradeFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	ctx := t.Context()
	key := chatmem.Key{Tenant: "t", ID: "old"}
	old := open(t, path)
	if _, err := old.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	// Back to what 0001 alone made.
	for _, q := range append(undoSearch, "DROP TABLE facts", "DROP TABLE summaries", "PRAGMA user_version = 1") {
		if _, err := old.w.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := open(t, path)
	// Messages stored before the fact mark existed count as extracted.
	if mk, err := s.FactMark(ctx, key); err != nil || mk.Seq != 1 || mk.LastSeq != 1 {
		t.Errorf("FactMark after the upgrade = %+v, %v; want Seq 1 = LastSeq", mk, err)
	}
	if err := s.PutSummary(ctx, key, chatmem.Summary{Text: "said hi", CoversSeq: 1, Summarizer: "offline"}, 0); err != nil {
		t.Fatalf("PutSummary after the upgrade: %v", err)
	}
	if err := s.SetFacts(ctx, key, []chatmem.Fact{{Key: "name", Value: "Ada", SetBy: "app", Confidence: 1}}); err != nil {
		t.Fatalf("SetFacts after the upgrade: %v", err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"summaries", "facts"} {
		var n int
		if err := s.r.db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s after Delete: %d rows, %v; want 0 (ON DELETE CASCADE)", table, n, err)
		}
	}
}

// TestMigrations checks the embedded migrations' numbering.
func TestMigrations(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
}

// TestOpenRefusesMemory checks that Open wants a file.
func TestOpenRefusesMemory(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file::memory:"} {
		if _, err := Open(t.Context(), p, Options{}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Open(%q) error = %v, want ErrInvalid", p, err)
		}
	}
}

// lockFile holds the database's write lock, as another process in the
// middle of a write transaction does, until the test ends or release is
// called.
func lockFile(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// TestWaitForLock checks what an append does while another process holds
// the write lock: it waits, gives up when its context ends (with the
// context's error) or, with a short busy timeout, wraps ErrUnavailable, and
// succeeds once the lock is released.
func TestWaitForLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock.db")
	s, err := Open(t.Context(), path, Options{BusyTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	key := chatmem.Key{Tenant: "t", ID: "c"}
	one := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}
	release := lockFile(t, path)

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Append(ctx, key, one, chatmem.AppendOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Append with a 100ms context while locked: error = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("Append with a 100ms context gave up after %v", d)
	}

	_, err = s.Append(t.Context(), key, one, chatmem.AppendOptions{})
	if !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Append past the busy timeout: error = %v, want ErrUnavailable", err)
	}

	// Readers are not blocked by a writer (WAL).
	if _, err := s.Conversation(t.Context(), key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Conversation while locked: error = %v, want ErrNotFound", err)
	}

	time.AfterFunc(100*time.Millisecond, release)
	s2, err := Open(t.Context(), path, Options{}) // default busy timeout: waits out the lock
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	if res, err := s2.Append(t.Context(), key, one, chatmem.AppendOptions{}); err != nil || res.Messages[0].Seq != 1 {
		t.Errorf("Append after the lock is released = %+v, %v; want seq 1", res.Messages, err)
	}
}

// Environment of the writer process TestTwoProcesses starts.
const (
	envWriterDB = "CHATMEM_SQLITE_TEST_WRITER_DB"
	envWriterN  = "CHATMEM_SQLITE_TEST_WRITER_N"
)

// TestTwoProcesses appends to one conversation from this process and from
// a second one (this test binary run again as TestWriterProcess) at the
// same time. Every append must land, sequence numbers must be dense, and
// each writer's messages must keep their order.
func TestTwoProcesses(t *testing.T) {
	const perWriter = 300
	path := filepath.Join(t.TempDir(), "procs.db")
	s := open(t, path)
	key := chatmem.Key{Tenant: "t", ID: "shared"}

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestWriterProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envWriterDB+"="+path, envWriterN+"="+strconv.Itoa(perWriter))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until the child has opened the store, then both go at once.
	out := bufio.NewScanner(stdout)
	var childOut strings.Builder
	for out.Scan() {
		childOut.WriteString(out.Text() + "\n")
		if out.Text() == "ready" {
			break
		}
	}
	if _, err := fmt.Fprintln(stdin, "go"); err != nil {
		t.Fatal(err)
	}
	for i := range perWriter {
		m := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("parent %d", i), Tokens: 1}
		if _, err := s.Append(t.Context(), key, []chatmem.Message{m}, chatmem.AppendOptions{}); err != nil {
			t.Fatalf("parent append %d: %v", i, err)
		}
	}
	for out.Scan() {
		childOut.WriteString(out.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("writer process: %v\nstdout:\n%s\nstderr:\n%s", err, childOut.String(), stderr.String())
	}

	msgs, err := s.Range(t.Context(), key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2*perWriter {
		t.Fatalf("Range = %d messages, want %d", len(msgs), 2*perWriter)
	}
	next := map[string]int{}
	switches := 0
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d, want %d", i, m.Seq, i+1)
		}
		who, n, _ := strings.Cut(m.Content, " ")
		if got, _ := strconv.Atoi(n); got != next[who] {
			t.Fatalf("seq %d holds %q, want %s %d: a writer's messages out of order or lost", m.Seq, m.Content, who, next[who])
		}
		next[who]++
		if i > 0 && !strings.HasPrefix(msgs[i-1].Content, who) {
			switches++
		}
	}
	if next["parent"] != perWriter || next["child"] != perWriter {
		t.Errorf("stored %d parent and %d child messages, want %d each", next["parent"], next["child"], perWriter)
	}
	t.Logf("the writers took turns %d times over %d appends", switches, 2*perWriter)
	if switches < 2 {
		t.Errorf("the writers took turns %d times: the two processes did not append concurrently", switches)
	}
}

// TestWriterProcess is the second process of TestTwoProcesses; it does
// nothing unless started by it.
func TestWriterProcess(t *testing.T) {
	path := os.Getenv(envWriterDB)
	if path == "" {
		t.Skip("runs only as TestTwoProcesses' writer process")
	}
	n, err := strconv.Atoi(os.Getenv(envWriterN))
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, path)
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "t", ID: "shared"}
	for i := range n {
		m := chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("child %d", i), Tokens: 1}
		if _, err := s.Append(t.Context(), key, []chatmem.Message{m}, chatmem.AppendOptions{}); err != nil {
			t.Fatalf("child append %d: %v", i, err)
		}
	}
}

// Package faults is chatmem's fault-injection suite. It has no code of its
// own, only tests, and proves that acknowledged appends survive the failures
// a deployment meets, for every store that persists:
//
//   - sqlite-kill: a writer process, appending from two goroutines to three
//     conversations, is killed with SIGKILL at random points, 20 times.
//     After each kill the file passes PRAGMA integrity_check and
//     foreign_key_check, and, reopened with sqlite.Open, holds every append
//     the writer acknowledged (printed only after Append returned nil), at
//     the sequence number it was given, in order, numbered densely 1..LastSeq.
//   - redis-restart: a redis-server owned by the test (appendonly yes,
//     appendfsync always, no RDB snapshots) is stopped by SHUTDOWN, SIGTERM
//     or SIGKILL and started again on the same port and directory, six times,
//     while four clients append. During each outage clients get errors
//     wrapping chatmem.ErrUnavailable, retry with backoff under the same
//     IdempotencyKey, and recover without help; afterwards every acknowledged
//     append is stored exactly once. A second test shows the other side:
//     without persistence a restart loses the data.
//   - postgres-terminate: the store's connections (found by a distinct
//     application_name) are killed with pg_terminate_backend fifteen times
//     while four clients append with retries as above; nothing acknowledged is
//     lost or duplicated and no sequence number repeats.
//   - summary-worker-kill: a process running Memory's summary worker over
//     SQLite with a slow summarizer is killed while the summarizer runs, ten
//     times, then runs once more to the end. A stored summary never covers
//     more than the conversation holds and always ends before a user message;
//     Memory.Context under PolicySummaryBuffer sends it only followed, with no
//     gap, by every message after it; and the last run brings every summary
//     up to date.
//   - proxy-sqlite-kill, proxy-postgres-kill: the chat proxy runs in a
//     server process over a SQLite file or a PostgreSQL schema, in front of
//     a fake model, while four clients send turns (streamed and not) to
//     three conversations; it is killed with SIGKILL right after a client
//     got a whole reply, six times, and started again over the same data.
//     Every turn whose reply a client received (a 200 with the reply, or a
//     stream read to data: [DONE]) is stored, the user's message and the
//     reply after it.
//
// Each fault kind logs one line,
//
//	faults: <kind>: faults=<n> acknowledged=<n> found=<n> conversations=<n>
//
// and appends it to the file named by $CHATMEM_FAULTS_SUMMARY, if set (CI
// prints that file). acknowledged counts appends whose success the client
// saw, found those of them stored as acknowledged; a difference fails the
// test. Kill points and timings are random, seeded from the clock; each test
// logs its seed.
//
// The suite runs with the rest: go test ./... (CI adds -race). Alone:
//
//	go test -count=1 -v ./faults
//
// A SIGKILL ends the process, not the machine: the kernel still writes out
// what the process wrote, so these tests prove crash safety of the stores'
// transactions and recovery, not durability against power loss (which is
// what synchronous(FULL) in SQLite and appendfsync always in Redis are for).
//
// Everything stays on loopback. The Redis test needs redis-server on PATH,
// the PostgreSQL test the server of internal/testenv (CHATMEM_POSTGRES_URL);
// they skip without them, and fail under CI=true. The package takes about
// 30 seconds, and a little over a minute with -race on a busy two-core
// machine; every test is bounded by a 45-second context.
package faults

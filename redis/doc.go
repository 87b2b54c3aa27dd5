// Package redis is a chatmem.Store on Redis (standalone, Sentinel or Cluster),
// through github.com/redis/go-redis/v9.
//
// # Key layout
//
// Every key of one conversation shares the hash tag {<tenant>/<id>}, so they
// all live in one hash slot and every operation on a conversation is one Lua
// script on one node, on a Redis Cluster too. With the default prefix
// "chatmem", conversation acme/c1 has:
//
//	chatmem:{acme/c1}:meta      hash: tokenizer, last_seq, tokens, system_tokens,
//	                            turns, created_at, updated_at, expires_at
//	                            (times in Unix nanoseconds; expires_at 0: never),
//	                            gen (a random token set when the conversation
//	                            is created), ixseq (the search index's
//	                            watermark), user (set when it is created for
//	                            a user; see users.go for the user's own keys,
//	                            chatmem:user:{acme/u-42}:...)
//	chatmem:{acme/c1}:msgs      list: message JSON, seq n at index n-1
//	chatmem:{acme/c1}:cum       list: non-system tokens of messages 1..n, at n-1
//	chatmem:{acme/c1}:users     list: the seqs of the user messages
//	chatmem:{acme/c1}:sys       list: the system messages' JSON (a copy)
//	chatmem:{acme/c1}:idem      hash: idempotency key -> "first:last:fingerprint"
//	chatmem:{acme/c1}:summary   hash: covers_seq, text, tokens, summarizer,
//	                            created_at
//	chatmem:{acme/c1}:facts     hash: fact key -> current chatmem.Fact JSON
//	chatmem:{acme/c1}:facthist  hash: fact key -> JSON array of its values
//	chatmem:{acme/c1}:terms     set: the terms the conversation's messages
//	                            are indexed under
//	chatmem:{acme/c1}:t:<term>  sorted set, one per term: the seqs of the
//	                            messages with the term (score = member = seq)
//
// (Recount's script also builds chatmem:{acme/c1}:recount:msgs and
// :recount:cum, and renames them over msgs and cum before it ends.)
//
// Tenants and IDs pass chatmem.ValidateID, which excludes * ? [ ] { } and /,
// so no ID can reach into another conversation's keys, change a hash tag or
// widen a SCAN pattern; the prefix is held to a similar set.
//
// Append is one script: it checks expiry, replays an applied idempotency key,
// checks ExpectedLastSeq and ExpectedTokenizer, assigns the seqs and pushes
// the messages, running totals and indexes, and sets the expiry; it
// replies the conversation's metadata as the append leaves it. It does
// not index the messages for search (see Search below), so that it costs
// the server a handful of commands: Memory.Turn's steady turn is this one
// script, with the ZADD of the tenant's index pipelined behind it, in one
// round trip; an append with ExpectedLastSeq (Turn's) sends its records
// with their seqs in front, since it lands with those or not at all, so
// the script only pushes them. Open loads the scripts of a turn in the
// round trip of its ping, so a process's first turn does not meet a
// NOSCRIPT reply after Redis restarted. The client never resends the
// append script on its own (go-redis retries other commands after network
// errors), so a lost reply cannot make an append land twice; a retry with
// an IdempotencyKey is the safe way to repeat one.
//
// AppendTail (chatmem.TailAppender, Memory.Turn's first turn on a
// conversation) is the same script with a tail query: after appending, it
// reads the system messages and finds the tail as Tail's script does (the
// two share tailStart), and the tail's messages are read as Tail reads
// them (below), by an LRANGE and a re-read of meta pipelined behind it:
// the append and both reads are one round trip when the guess holds the
// tail. A store that has learned no rates yet guesses with cold ones
// (messages of 32 tokens, turns of 4 messages), so that a process's first
// turn is one round trip too; a query too long to guess has the script
// read the messages itself, through Lua, which on Redis 7.0 costs the
// server about a microsecond per message of a few hundred bytes, some
// fifteen times what an LRANGE of them costs.
//
// Tail reads the messages with a plain LRANGE, never through Lua, which on
// Redis 7.0 would cost the server several times the LRANGE itself. A script
// checks the conversation and finds where the run starts on the cum list:
// it probes the entry that the conversation's mean tokens per message
// predicts, gallops from there (distances 1, 2, 4, ...) until the boundary
// lies between two probes and bisects between them, every read counting
// from the tail of the list, so the cost follows the size of the window,
// not the length of the conversation. It replies with the run's first and
// last seq and meta's gen. The store sends the script pipelined with an
// LRANGE of the newest messages, as many as a hint learned from earlier
// Tails guesses the run holds, and a re-read of meta's last_seq and gen:
// one round trip. When the guess falls short (or the store has none yet),
// a second round trip reads the run by its absolute list indexes (seq n is
// at index n-1). BenchmarkWindowVsRaw measures both against one LRANGE of
// the window plus decoding.
//
// These reads are not one atomic operation, yet Tail returns exactly the
// run as of its script: messages never change once appended and lists only
// grow at the tail, so a later read finds the same messages at the same
// indexes, and the seqs in the messages place the newest ones read. Only a
// Delete (or expiry) could intervene, perhaps followed by an Append that
// creates the conversation again under the same key, with the same seqs;
// every creation records a new random gen, and gen is re-read after the
// LRANGE, so an unchanged gen proves the messages belong to the
// conversation the script saw. A Rewind, which cuts the lists, records a
// new gen too. If the check fails (or a client that reads from replicas
// read a lagging one), a last script reads the run and checks gen
// atomically on the master; if the conversation is not the same, Tail
// runs its script once more (a rewound conversation is still there), and
// returns chatmem.ErrNotFound if it is gone, as a Tail at that moment
// would have. The one write that changes stored messages is
// Recount, which rewrites their counts: a Tail beside it may find its run
// by the old counts and read the messages with the new ones (see
// Store.Recount).
//
// # Search
//
// The store is a chatmem.Searcher. Postings reads each term's sorted set
// with ZREVRANGEBYSCORE key (before -inf LIMIT 0 limit, O(log n + limit),
// in one MULTI/EXEC with the read of meta that tells whether the
// conversation exists; MessagesAt reads the messages it names the way
// Range does, by list index, with one LRANGE per run of consecutive seqs,
// in one MULTI/EXEC too. A term is lower-case letters, digits and
// apostrophes, so "t:" and a term name no other kind of key. Delete,
// PurgeInactive and an append that creates a conversation again over an
// expired one delete the term keys the terms set names, in their scripts.
//
// The store is a chatmem.UserSearcher too: an index of each user's messages
// across their conversations lives in the user's slot and is written after
// the append script, in a step that a later append catches up if it
// failed (see usersearch.go).
//
// The append script writes nothing of the index: meta's ixseq is the
// index's watermark, the last seq up to which every message is indexed.
// IndexPending (chatmem.IndexCatcher; Memory's worker calls it every few
// dozen messages) reads the messages past it, 1,000 at a time, and
// indexes each batch with a script that checks the conversation was not
// replaced meanwhile and moves the watermark with the postings it adds, so
// an interrupted catch-up resumes and a repeated one changes nothing.
// Postings reads the watermark with the postings and, when it lags behind
// what it is asked about, calls IndexPending first: a message is found from
// the moment its append returned, and a crash only delays the indexing.
// Conversations stored by earlier versions have no ixseq: those that
// indexed in the append have "indexed" (the watermark is the last seq), the
// older ones perhaps a backfill's "backfilled" progress (else 0); the next
// append records ixseq from them. All processes writing to one Redis must
// run a version that keeps the watermark: an earlier one would index its
// appends but not move ixseq (harmless), or take a conversation with ixseq
// and no "indexed" for one never indexed.
//
// # Listing
//
// List reads a per-tenant sorted set, chatmem:tenant:<tenant>:convs, whose
// members are the conversation IDs (all with score 0, so ZRANGE BYLEX pages
// through them in ID order). On a Cluster that key lives in another slot than
// the conversations, so it cannot be written by the Append script: Append
// adds the ID with a ZADD pipelined after its script (whatever the script
// answers: a pipeline does not wait for it) and Delete removes it after its
// script ran. The index may therefore name conversations that no longer exist
// (expired, deleted, a refused append that would have created one, or a
// crash between the two steps); List checks each
// candidate's meta and removes stale members lazily. Removing a member is
// always followed by a check that the conversation was not created again
// meanwhile (and a re-add if it was), so a concurrent Append never leaves a
// live conversation unlisted.
//
// Users (chatmem.UserLister) are listed the same way from
// chatmem:tenant:<tenant>:users, the tenant's user IDs at score 0. Its
// member is added before the user's facts or a conversation bound to the
// user are written, so it never misses a user with something left; Users
// skips members with neither facts nor a live conversation, and only
// DeleteUser removes one (users.go says why).
//
// # Expiry
//
// An append with a TTL records expires_at and sets PEXPIRE on all of the
// conversation's keys (keys written later, such as facts, take the time to
// live meta has left), so Redis removes them by itself; reads also compare
// expires_at with the store's clock, so a conversation is not found from the
// moment it expires. Index members of expired conversations are removed
// lazily, by List and PurgeInactive.
//
// The term keys would cost an append a PEXPIRE each if they followed the
// conversation's expiry exactly, and a conversation has thousands. Instead,
// they and the terms set get twice the conversation's time to live
// whenever the set has less left than the conversation, and term keys
// created in between take the set's remaining time; so they expire at
// most one time to live after the conversation (reads check meta, and an
// append that starts the conversation again deletes them first).
//
// Arguments are checked before anything is read or written, with package
// storekit and the root package's validators, as every store checks them:
// a malformed key, tenant, user or fact name, a limit out of range and an
// empty search term wrap chatmem.ErrInvalid (see chatmem.Store). The
// methods' docs name only the refusals of their own.
package redis

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
//	                            (times in Unix nanoseconds; expires_at 0: never)
//	chatmem:{acme/c1}:msgs      list: message JSON, seq n at index n-1
//	chatmem:{acme/c1}:cum       list: non-system tokens of messages 1..n, at n-1
//	chatmem:{acme/c1}:users     list: the seqs of the user messages
//	chatmem:{acme/c1}:sys       list: the system messages' JSON (a copy)
//	chatmem:{acme/c1}:idem      hash: idempotency key -> "first:last" seq
//	chatmem:{acme/c1}:summary   hash: covers_seq, text, tokens, summarizer,
//	                            created_at
//	chatmem:{acme/c1}:facts     hash: fact key -> current chatmem.Fact JSON
//	chatmem:{acme/c1}:facthist  hash: fact key -> JSON array of its values
//
// Tenants and IDs pass chatmem.ValidateID, which excludes * ? [ ] { } and /,
// so no ID can reach into another conversation's keys, change a hash tag or
// widen a SCAN pattern; the prefix is held to a similar set.
//
// Append is one script: it checks expiry, replays an applied idempotency key,
// checks ExpectedLastSeq, assigns the seqs and pushes the messages, running
// totals and indexes, and sets the expiry. The client never resends it on its
// own (go-redis retries other commands after network errors), so a lost
// reply cannot make an append land twice; a retry with an IdempotencyKey is
// the safe way to repeat one.
//
// Tail is one script as well: it finds where the run starts on the cum list,
// reading it back from the newest entry in chunks (the first sized by the
// conversation's mean tokens per message, each further one doubled) and
// bisecting the chunk that holds the boundary, then returns the run with one
// LRANGE; every read counts from the tail of its list, so the cost follows
// the size of the window, not the length of the conversation. The messages
// pass through the script's Lua, which on Redis 7.0 costs the server roughly
// four times a bare LRANGE of them; BenchmarkWindowVsRaw measures the
// difference.
//
// # Listing
//
// List reads a per-tenant sorted set, chatmem:tenant:<tenant>:convs, whose
// members are the conversation IDs (all with score 0, so ZRANGE BYLEX pages
// through them in ID order). On a Cluster that key lives in another slot than
// the conversations, so it cannot be written by the Append script: Append
// adds the ID after its script succeeded and Delete removes it after its
// script ran. The index may therefore name conversations that no longer exist
// (expired, deleted, or a crash between the two steps); List checks each
// candidate's meta and removes stale members lazily. Removing a member is
// always followed by a check that the conversation was not created again
// meanwhile (and a re-add if it was), so a concurrent Append never leaves a
// live conversation unlisted.
//
// # Expiry
//
// An append with a TTL records expires_at and sets PEXPIRE on all of the
// conversation's keys (keys written later, such as facts, take the time to
// live meta has left), so Redis removes them by itself; reads also compare
// expires_at with the store's clock, so a conversation is not found from the
// moment it expires. Index members of expired conversations are removed
// lazily, by List and PurgeInactive.
package redis

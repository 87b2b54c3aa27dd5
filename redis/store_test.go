package redis

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
)

// These tests cover what the shared suite cannot see: the key layout, URL
// parsing, error translation, and the tail search against a brute force.

func TestKeysShareHashTag(t *testing.T) {
	s, err := New(goredis.NewClient(&goredis.Options{}), Options{Prefix: "p"})
	if err != nil {
		t.Fatal(err)
	}
	key := chatmem.Key{Tenant: "acme", ID: "c:1@x.y-z"}
	for _, k := range s.convKeys(key) {
		open, close := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
		if tag := k[open+1 : close]; tag != "acme/c:1@x.y-z" {
			t.Errorf("key %q has hash tag %q, want acme/c:1@x.y-z", k, tag)
		}
	}
	if got, want := s.indexKey("acme"), "p:tenant:acme:convs"; got != want {
		t.Errorf("indexKey = %q, want %q", got, want)
	}
}

func TestPrefixValidation(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{})
	for _, p := range []string{"a:b", "a*", "{x}", "a b", strings.Repeat("x", 65)} {
		if _, err := New(c, Options{Prefix: p}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("New(prefix %q) = %v, want ErrInvalid", p, err)
		}
	}
	s, err := New(c, Options{})
	if err != nil || s.Prefix() != DefaultPrefix {
		t.Errorf("New(zero options) prefix = %q, %v; want %q", s.Prefix(), err, DefaultPrefix)
	}
}

func TestOpen(t *testing.T) {
	dialer(t) // skips without a server
	ctx := context.Background()
	s, err := Open(ctx, testenv.RedisURL()+"?prefix=viaurl&dial_timeout=2s", Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if s.Prefix() != "viaurl" {
		t.Errorf("Open(...?prefix=viaurl) prefix = %q", s.Prefix())
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}

	for _, u := range []string{"http://localhost", "localhost:6379", "redis://localhost?bogus=1", "redis+cluster://a:1,b:2/3"} {
		if _, err := Open(ctx, u, Options{}); !errors.Is(err, chatmem.ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", u, err)
		}
	}
	// A port nothing listens on (the discard port, on loopback).
	if _, err := Open(ctx, "redis://127.0.0.1:9?dial_timeout=1s&max_retries=-1", Options{}); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Open(unreachable) = %v, want ErrUnavailable", err)
	}
}

func TestDialClusterURL(t *testing.T) {
	c, prefix, err := dial("redis+cluster://u:pw@127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003?prefix=px&dial_timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*goredis.ClusterClient)
	if !ok {
		t.Fatalf("dial(redis+cluster://...) = %T, want *ClusterClient", c)
	}
	o := cc.Options()
	if got := strings.Join(o.Addrs, ","); got != "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003" || o.Username != "u" || o.Password != "pw" || o.DialTimeout != time.Second || prefix != "px" {
		t.Errorf("cluster options = %v user %q pw %q dial %v prefix %q", o.Addrs, o.Username, o.Password, o.DialTimeout, prefix)
	}
}

func TestErrors(t *testing.T) {
	s := newTestStore(t, dialer(t))
	key := chatmem.Key{Tenant: "t", ID: "c"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}
	if _, err := s.Append(ctx, key, msg, chatmem.AppendOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Append(canceled) = %v, want context.Canceled", err)
	}
	if _, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: 10}); !errors.Is(err, context.Canceled) {
		t.Errorf("Tail(canceled) = %v, want context.Canceled", err)
	}
	if _, err := s.Conversation(ctx, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Conversation(canceled) = %v, want context.Canceled", err)
	}

	closed := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:9", DialTimeout: time.Second, MaxRetries: -1})
	s2, _ := New(closed, Options{})
	if _, err := s2.Append(context.Background(), key, msg, chatmem.AppendOptions{}); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Append(unreachable) = %v, want ErrUnavailable", err)
	}
	closed.Close()
	if _, err := s2.Tail(context.Background(), key, chatmem.TailQuery{Tokens: 1}); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Tail(closed client) = %v, want ErrUnavailable", err)
	}
	if err := s2.Ping(context.Background()); !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Ping(closed client) = %v, want ErrUnavailable", err)
	}
}

// TestTailSearch compares Tail with a brute force over conversations with
// system messages, zero-token messages and uneven turns, and over two whose
// recent messages are far smaller or far larger than their mean, so that
// the search starts far from the boundary, on either side of it.
func TestTailSearch(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	roles := []chatmem.Role{chatmem.RoleSystem, chatmem.RoleUser, chatmem.RoleUser, chatmem.RoleAssistant, chatmem.RoleAssistant}

	var random []chatmem.Message
	for range 600 {
		random = append(random, chatmem.Message{Role: roles[r.IntN(5)], Tokens: r.IntN(30)})
	}
	var skewed []chatmem.Message
	for i := range 4000 {
		m := chatmem.Message{Role: roles[1+i%4], Tokens: 100}
		if i >= 2000 {
			m.Tokens = 1
		}
		if i%97 == 0 {
			m.Role = chatmem.RoleSystem
		}
		skewed = append(skewed, m)
	}
	// rising is skewed the other way round: its recent messages are far
	// larger than its mean, so the search starts too far back.
	rising := slices.Clone(skewed)
	slices.Reverse(rising)
	for name, msgs := range map[string][]chatmem.Message{"random": random, "skewed": skewed, "rising": rising} {
		key := chatmem.Key{Tenant: "t", ID: name}
		for i := range msgs {
			msgs[i].Content = fmt.Sprintf("m%d", i+1)
		}
		for done := 0; done < len(msgs); {
			n := min(1+r.IntN(300), len(msgs)-done)
			if _, err := s.Append(ctx, key, msgs[done:done+n], chatmem.AppendOptions{}); err != nil {
				t.Fatal(err)
			}
			done += n
		}
		var total, users int
		for i := range msgs {
			msgs[i].Seq = int64(i + 1)
			if msgs[i].Role != chatmem.RoleSystem {
				total += msgs[i].Tokens
			}
			if msgs[i].Role == chatmem.RoleUser {
				users++
			}
		}
		queries := []chatmem.TailQuery{
			{}, {Tokens: 1}, {Tokens: 7}, {Tokens: 100}, {Tokens: 1999}, {Tokens: 2000}, {Tokens: 2001}, {Tokens: 2100},
			{Tokens: total - 1}, {Tokens: total}, {Tokens: total + 5}, {Tokens: min(1<<62, math.MaxInt)},
			{Turns: 1}, {Turns: 3}, {Turns: users}, {Turns: users + 1}, {Turns: min(1<<40, math.MaxInt)}, {Turns: math.MaxInt}, {Tokens: math.MaxInt},
			{Tokens: 50, Turns: 2}, {Tokens: 50, Turns: 20},
		}
		for range 50 {
			queries = append(queries, chatmem.TailQuery{Tokens: r.IntN(total + 10)})
		}
		for _, q := range queries {
			want := bruteTail(msgs, q)
			// Each query runs with no hint (two round trips), with the
			// hint that run taught (one round trip, mostly), and with a
			// hint far too small (the guessed read falls short).
			for _, hint := range []string{"none", "learned", "small"} {
				switch hint {
				case "none":
					setHint(s, 0, 0)
				case "small":
					setHint(s, 1e-9, 1e-9)
				}
				got, err := s.Tail(ctx, key, q)
				if err != nil {
					t.Fatalf("%s: Tail(%+v), hint %s: %v", name, q, hint, err)
				}
				if len(got) != len(want) || len(got) > 0 && got[0].Seq != want[0].Seq {
					t.Errorf("%s: Tail(%+v), hint %s = %d msgs from seq %d, want %d from seq %d", name, q, hint, len(got), firstSeq(got), len(want), firstSeq(want))
					continue
				}
				for i := range got {
					if got[i].Content != want[i].Content || got[i].Seq != want[i].Seq {
						t.Errorf("%s: Tail(%+v), hint %s [%d] = %d %q, want %d %q", name, q, hint, i, got[i].Seq, got[i].Content, want[i].Seq, want[i].Content)
						break
					}
				}
			}
		}
	}
}

// TestRunIn checks how Tail finds its run in the newest messages it read
// along with its script.
func TestRunIn(t *testing.T) {
	var list []string // seqs 5..12
	for seq := 5; seq <= 12; seq++ {
		list = append(list, fmt.Sprintf(`{"seq":%d,"role":"user","tokens":1}`, seq))
	}
	for _, c := range []struct {
		first, last int64
		want        string // the seqs of the part, or "short"
	}{
		{7, 10, "7..10"}, // messages appended after the run, as if after the script
		{5, 12, "5..12"},
		{12, 12, "12..12"},
		{4, 12, "short"},
		{1, 3, "short"},
		{7, 13, "short"}, // cannot happen: lists only grow
		{8, 7, "short"},
	} {
		part, ok := runIn(tailRun{first: c.first, last: c.last}, list)
		got := "short"
		if ok {
			first, _ := recordSeq(part[0])
			last, _ := recordSeq(part[len(part)-1])
			got = fmt.Sprintf("%d..%d", first, last)
			if int64(len(part)) != last-first+1 {
				got += fmt.Sprintf(" (%d entries)", len(part))
			}
		}
		if got != c.want {
			t.Errorf("runIn(%d..%d) = %s, want %s", c.first, c.last, got, c.want)
		}
	}
	if _, ok := runIn(tailRun{first: 1, last: 1}, nil); ok {
		t.Error("runIn(empty list) = true")
	}
	if _, ok := runIn(tailRun{first: 12, last: 12}, []string{`{"role":"user","seq":12}`}); ok {
		t.Error("runIn(record without leading seq) = true")
	}
}

// setHint sets the store's tail hint rates (0: unknown).
func setHint(s *Store, perToken, perTurn float64) {
	s.hint.perToken.Store(math.Float64bits(perToken))
	s.hint.perTurn.Store(math.Float64bits(perTurn))
}

// TestTailWhileAppending reads the window while another client appends:
// every window must be the newest messages of some moment, whichever path
// Tail takes, including reads whose LRANGE sees messages newer than its
// script did.
func TestTailWhileAppending(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "t", ID: "busy"}
	msg := func(i int) chatmem.Message {
		return chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("m%d", i), Tokens: 10}
	}
	if _, err := s.Append(ctx, key, []chatmem.Message{msg(1), msg(2), msg(3)}, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		writer, err := New(s.client, Options{Prefix: s.Prefix()})
		for i := 4; err == nil; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			_, err = writer.Append(ctx, key, []chatmem.Message{msg(i)}, chatmem.AppendOptions{})
		}
		done <- err
	}()
	var prev int64
	for i := range 3000 {
		if i%3 == 0 {
			setHint(s, 0, 0) // two round trips now and then
		}
		got, err := s.Tail(ctx, key, chatmem.TailQuery{Tokens: 30})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[2].Seq < prev {
			t.Fatalf("Tail = %d messages ending at seq %d after one ending at %d", len(got), firstSeq(got)+int64(len(got))-1, prev)
		}
		for j, m := range got {
			if m.Seq != got[0].Seq+int64(j) || m.Content != fmt.Sprintf("m%d", m.Seq) {
				t.Fatalf("Tail[%d] = seq %d %q in a window from seq %d", j, m.Seq, m.Content, got[0].Seq)
			}
		}
		prev = got[2].Seq
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func firstSeq(msgs []chatmem.Message) int64 {
	if len(msgs) == 0 {
		return 0
	}
	return msgs[0].Seq
}

// bruteTail is TailQuery's definition, read literally.
func bruteTail(all []chatmem.Message, q chatmem.TailQuery) []chatmem.Message {
	if q.Tokens <= 0 && q.Turns <= 0 {
		return nil
	}
	start := 0
	if q.Tokens > 0 {
		sum := 0
		start = len(all)
		for i := len(all) - 1; i >= 0; i-- {
			if all[i].Role != chatmem.RoleSystem {
				sum += all[i].Tokens
			}
			if sum > q.Tokens {
				break
			}
			start = i
		}
	}
	if q.Turns > 0 {
		seen := 0
		for i := len(all) - 1; i >= 0; i-- {
			if all[i].Role == chatmem.RoleUser {
				if seen++; seen == q.Turns {
					start = max(start, i)
					break
				}
			}
		}
	}
	return all[start:]
}

// TestLifecycle runs one conversation through what the suite checks too, as
// a smoke test of the scripts.
func TestLifecycle(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "acme", ID: "c1"}
	sys := chatmem.Message{Role: chatmem.RoleSystem, Content: "be brief", Tokens: 3}
	user := chatmem.Message{Role: chatmem.RoleUser, Content: "hi", Tokens: 2}
	asst := chatmem.Message{Role: chatmem.RoleAssistant, Content: "hello", Tokens: 4,
		ToolCalls: []chatmem.ToolCall{{ID: "x", Type: "function", Function: chatmem.FunctionCall{Name: "f", Arguments: "{}"}}}}
	now := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	res, err := s.Append(ctx, key, []chatmem.Message{sys, user, asst}, chatmem.AppendOptions{Tokenizer: "estimate", IdempotencyKey: "k1", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Conversation
	if c.LastSeq != 3 || c.Tokens != 6 || c.SystemTokens != 3 || c.Turns != 1 || c.Tokenizer != "estimate" || !c.CreatedAt.Equal(now) || !c.UpdatedAt.Equal(now) || !c.ExpiresAt.IsZero() {
		t.Errorf("conversation after append = %+v", c)
	}
	if res.Messages[2].Seq != 3 || !res.Messages[2].CreatedAt.Equal(now) {
		t.Errorf("appended message = %+v", res.Messages[2])
	}
	again, err := s.Append(ctx, key, []chatmem.Message{sys}, chatmem.AppendOptions{IdempotencyKey: "k1"})
	if err != nil || !again.Replayed || len(again.Messages) != 3 || again.Messages[2].ToolCalls[0].Function.Name != "f" || again.Conversation.LastSeq != 3 {
		t.Errorf("replay = %+v, %v", again, err)
	}
	stale := int64(2)
	if _, err := s.Append(ctx, key, []chatmem.Message{user}, chatmem.AppendOptions{ExpectedLastSeq: &stale}); !errors.Is(err, chatmem.ErrConflict) {
		t.Errorf("Append(expected 2) = %v, want ErrConflict", err)
	}
	got, err := s.System(ctx, key)
	if err != nil || len(got) != 1 || got[0].Seq != 1 || got[0].Content != "be brief" {
		t.Errorf("System = %+v, %v", got, err)
	}
	got, err = s.Range(ctx, key, 1, 1)
	if err != nil || len(got) != 1 || got[0].Seq != 2 {
		t.Errorf("Range(1, 1) = %+v, %v", got, err)
	}
	page, err := s.List(ctx, "acme", chatmem.PageRequest{})
	if err != nil || len(page.Conversations) != 1 || page.Conversations[0].Key != key {
		t.Errorf("List = %+v, %v", page, err)
	}
	if err := s.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}
	if _, err := s.Tail(ctx, key, chatmem.TailQuery{Turns: 1}); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Tail after Delete = %v, want ErrNotFound", err)
	}

	// Expiry: already over by the store's clock, then by Redis.
	if _, err := s.Append(ctx, key, []chatmem.Message{user}, chatmem.AppendOptions{TTL: time.Hour, Now: time.Now().Add(-2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Conversation(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Conversation after expiry = %v, want ErrNotFound", err)
	}
	res, err = appendIndexed(ctx, s, key, []chatmem.Message{user}, chatmem.AppendOptions{TTL: 200 * time.Millisecond})
	if err != nil || res.Conversation.LastSeq != 1 {
		t.Fatalf("Append over expired conversation = %+v, %v; want a new conversation", res.Conversation, err)
	}
	if ttl := s.client.PTTL(ctx, s.convKeys(key)[1]).Val(); ttl <= 0 || ttl > 200*time.Millisecond {
		t.Errorf("PTTL of msgs = %v, want (0, 200ms]", ttl)
	}
	// The term keys expire too, up to a TTL later (see addPostings).
	for _, k := range []string{s.convKeys(key)[kTerms], s.termKey(key, "hi")} {
		if ttl := s.client.PTTL(ctx, k).Val(); ttl <= 200*time.Millisecond || ttl > 400*time.Millisecond {
			t.Errorf("PTTL of %s = %v, want (200ms, 400ms]", k, ttl)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := s.client.Exists(ctx, s.convKeys(key)[:kTerms]...).Val(); n != 0 {
		t.Errorf("%d keys left after the TTL", n)
	}
	page, err = s.List(ctx, "acme", chatmem.PageRequest{})
	if err != nil || len(page.Conversations) != 0 {
		t.Errorf("List after expiry = %+v, %v", page, err)
	}
	if n := s.client.ZCard(ctx, s.indexKey("acme")).Val(); n != 0 {
		t.Errorf("index holds %d members after List saw them expired", n)
	}
}

func TestListAndPurge(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	old := time.Now().Add(-48 * time.Hour)
	for i := range 25 {
		for _, tenant := range []string{"a", "b"} {
			opts := chatmem.AppendOptions{}
			if i%2 == 0 {
				opts.Now = old
			}
			msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: "x", Tokens: 1}}
			if _, err := s.Append(ctx, chatmem.Key{Tenant: tenant, ID: fmt.Sprintf("c%02d", i)}, msg, opts); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A stale member, as a crash between Delete's two steps leaves.
	s.client.ZAdd(ctx, s.indexKey("a"), goredis.Z{Member: "c05x"})
	var ids []string
	for after := ""; ; {
		page, err := s.List(ctx, "a", chatmem.PageRequest{After: after, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Conversations {
			ids = append(ids, c.Key.ID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(ids) != 25 || ids[0] != "c00" || ids[24] != "c24" {
		t.Errorf("listed %d: %v", len(ids), ids)
	}
	n, err := s.PurgeInactive(ctx, "a", time.Now().Add(-24*time.Hour))
	if err != nil || n != 13 {
		t.Errorf("PurgeInactive(a) = %d, %v; want 13", n, err)
	}
	n, err = s.PurgeInactive(ctx, "", time.Now().Add(-24*time.Hour))
	if err != nil || n != 13 {
		t.Errorf("PurgeInactive(all) = %d, %v; want 13 (tenant b)", n, err)
	}
	for _, tenant := range []string{"a", "b"} {
		page, err := s.List(ctx, tenant, chatmem.PageRequest{Limit: 100})
		if err != nil || len(page.Conversations) != 12 {
			t.Errorf("List(%s) after purge = %d, %v; want 12", tenant, len(page.Conversations), err)
		}
	}
}

// TestAppendNotResent checks that a reply lost to a read timeout does not
// make the client send the append script again (go-redis resends other
// commands after timeouts), so an append never lands twice. The batch is
// big enough that the script outlasts the client's read timeout.
func TestAppendNotResent(t *testing.T) {
	s := newTestStore(t, dialer(t))
	o, err := goredis.ParseURL(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 2*time.Millisecond, 10*time.Second, 5
	impatient := goredis.NewClient(o)
	defer impatient.Close()
	s2, err := New(impatient, Options{Prefix: s.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := chatmem.Key{Tenant: "t", ID: "slow"}
	msgs := make([]chatmem.Message, 2000)
	for i := range msgs {
		msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: strings.Repeat("x", 1000), Tokens: 1}
	}
	_, err = s2.Append(ctx, key, msgs, chatmem.AppendOptions{})
	if err == nil {
		t.Skip("the append beat a 2ms read timeout; nothing to check")
	}
	if !errors.Is(err, chatmem.ErrUnavailable) {
		t.Errorf("Append error = %v, want ErrUnavailable", err)
	}
	// The script runs at most once: after the client gave up on its reply,
	// or not at all if the timeout struck before it was sent. Never twice.
	var last int64
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		if c, err := s.Conversation(ctx, key); err == nil {
			last = c.LastSeq
		}
	}
	if last != 0 && last != int64(len(msgs)) {
		t.Errorf("after a timed-out append: LastSeq = %d, want %d (stored once) or 0 (never sent)", last, len(msgs))
	}
}

// TestExpiryCoversLaterKeys checks that a summary and facts written after
// the last append of a conversation with a TTL expire with it.
func TestExpiryCoversLaterKeys(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "t", ID: "ttl"}
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}
	if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSummary(ctx, key, chatmem.Summary{Text: "hi", CoversSeq: 1}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFacts(ctx, key, []chatmem.Fact{{Key: "name", Value: "Ada", SetBy: "app", Confidence: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range s.keysAt(key, kSummary, kFacts, kFactHist) {
		if ttl := s.client.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("PTTL %s = %v, want (0, 1m]", k, ttl)
		}
	}
}

// TestTailBetweenSteps runs Tail's two steps (findTail, then readRun or its
// fallback readRunAtomic) with writes between them: appends leave the run as
// the script found it, and a Delete, with or without a new conversation
// under the key, is ErrNotFound.
func TestTailBetweenSteps(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "t", ID: "steps"}
	batch := func(n, from int) []chatmem.Message {
		msgs := make([]chatmem.Message, n)
		for i := range msgs {
			msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("m%d", from+i), Tokens: 10}
		}
		return msgs
	}
	appendN := func(n, from int) {
		t.Helper()
		if _, err := s.Append(ctx, key, batch(n, from), chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	find := func() tailRun {
		t.Helper()
		run, err := s.findTail(ctx, key, chatmem.TailQuery{Tokens: 50})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}

	appendN(20, 1)
	run := find()
	if run.first != 16 || run.last != 20 || run.gen == "" {
		t.Fatalf("findTail = %+v, want seqs 16..20 and a gen", run)
	}
	appendN(7, 21)
	for name, read := range map[string]func(context.Context, chatmem.Key, tailRun) ([]chatmem.Message, error){
		"readRun": s.readRun, "readRunAtomic": s.readRunAtomic,
	} {
		got, err := read(ctx, key, run)
		if err != nil || len(got) != 5 || got[0].Seq != 16 || got[4].Seq != 20 || got[4].Content != "m20" {
			t.Errorf("%s after appends = %+v, %v; want seqs 16..20", name, got, err)
		}
	}

	for _, recreate := range []int{0, 3, 27, 40} {
		run := find()
		if err := s.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if recreate > 0 {
			appendN(recreate, 100)
		}
		if got, err := s.readRun(ctx, key, run); !errors.Is(err, chatmem.ErrNotFound) {
			t.Errorf("readRun after Delete and %d new messages = %d messages, %v; want ErrNotFound", recreate, len(got), err)
		}
		if got, err := s.readRunAtomic(ctx, key, run); !errors.Is(err, chatmem.ErrNotFound) {
			t.Errorf("readRunAtomic after Delete and %d new messages = %d messages, %v; want ErrNotFound", recreate, len(got), err)
		}
		if recreate == 0 {
			appendN(27, 1)
		}
	}

	// A conversation stored before meta had gen.
	if err := s.client.HDel(ctx, s.metaKey(key), "gen").Err(); err != nil {
		t.Fatal(err)
	}
	run = find()
	if got, err := s.readRun(ctx, key, run); err != nil || run.gen != "" || len(got) != 5 {
		t.Errorf("readRun without gen = %d messages, %v (gen %q); want 5", len(got), err, run.gen)
	}
	if got, err := s.readRunAtomic(ctx, key, run); err != nil || len(got) != 5 {
		t.Errorf("readRunAtomic without gen = %d messages, %v; want 5", len(got), err)
	}
}

// TestTTLReachesNewKeys: an append without a TTL to a conversation that
// expires may create keys (its first system message, user message or
// idempotency key); they take the conversation's expiry, so nothing of it
// outlives its meta.
func TestTTLReachesNewKeys(t *testing.T) {
	ctx := t.Context()
	s := newTestStore(t, dialer(t))
	key := chatmem.Key{Tenant: "t", ID: "ttl"}
	if _, err := s.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleAssistant, Content: "hello", Tokens: 1}},
		chatmem.AppendOptions{TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, key, []chatmem.Message{
		{Role: chatmem.RoleSystem, Content: "be brief", Tokens: 2},
		{Role: chatmem.RoleUser, Content: "hi", Tokens: 1},
	}, chatmem.AppendOptions{IdempotencyKey: "k1"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range s.keysAt(key, kMeta, kSys, kUsers, kIdem) {
		ttl, err := s.client.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > time.Hour {
			t.Errorf("PTTL(%s) = %v, want the conversation's (within an hour)", k, ttl)
		}
	}
}

// TestAppendTailPaths checks AppendTail's three ways to read the tail
// against Tail: the LRANGE pipelined behind the script, at a guess that
// holds the tail and at one that falls short (a second round trip), and
// the script's own read, when the query is too long to guess.
func TestAppendTailPaths(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "t", ID: "appendtail-paths"}
	msgs := make([]chatmem.Message, 3000)
	for i := range msgs {
		role := chatmem.RoleUser
		if i%2 == 1 {
			role = chatmem.RoleAssistant
		}
		if i == 1 {
			role = chatmem.RoleSystem
		}
		msgs[i] = chatmem.Message{Role: role, Content: fmt.Sprintf("m%d", i+1), Tokens: 1 + i%7}
	}
	if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &tripCounter{}
	s.client.AddHook(h)
	for _, c := range []struct {
		name     string
		perToken float64 // the hint's rate (0: none)
		q        chatmem.TailQuery
		trips    []string
	}{
		{"guessed", 1, chatmem.TailQuery{Tokens: 200}, []string{"evalsha zadd lrange hmget"}},
		{"short", 0.001, chatmem.TailQuery{Tokens: 200}, []string{"evalsha zadd lrange hmget", "lrange hmget"}},
		{"in the script", 0, chatmem.TailQuery{Turns: 600}, []string{"evalsha zadd"}},
	} {
		s.hint.perToken.Store(math.Float64bits(c.perToken))
		s.hint.perTurn.Store(0)
		batch := []chatmem.Message{{Role: chatmem.RoleUser, Content: c.name, Tokens: 3}}
		h.trips = nil
		res, read, err := s.AppendTail(ctx, key, batch, chatmem.AppendOptions{}, c.q)
		if err != nil {
			t.Fatalf("%s: AppendTail: %v", c.name, err)
		}
		if !slices.Equal(h.trips, c.trips) {
			t.Errorf("%s: round trips %q, want %q", c.name, h.trips, c.trips)
		}
		tail, err := s.Tail(ctx, key, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if len(read.Recent) == 0 || !slices.EqualFunc(read.Recent, tail, func(a, b chatmem.Message) bool {
			return a.Seq == b.Seq && a.Content == b.Content && a.Tokens == b.Tokens && a.Role == b.Role
		}) || read.Recent[len(read.Recent)-1].Seq != res.Conversation.LastSeq {
			t.Errorf("%s: AppendTail read %d messages (%v..), Tail %d", c.name, len(read.Recent), read.Recent[:min(1, len(read.Recent))], len(tail))
		}
		if len(read.System) != 1 || read.System[0].Seq != 2 {
			t.Errorf("%s: AppendTail read system messages %v, want seq 2", c.name, read.System)
		}
	}
}

// TestTailAfterRewind: a rewind cuts the lists, so it records a new gen: a
// run found before it and read after it (with new messages at the same
// seqs) is refused, never read from the new messages, and Tail then
// finds the new ones.
func TestTailAfterRewind(t *testing.T) {
	s := newTestStore(t, dialer(t))
	ctx := context.Background()
	key := chatmem.Key{Tenant: "t", ID: "rewound"}
	batch := func(n, from int) []chatmem.Message {
		msgs := make([]chatmem.Message, n)
		for i := range msgs {
			msgs[i] = chatmem.Message{Role: chatmem.RoleUser, Content: fmt.Sprintf("m%d", from+i), Tokens: 10}
		}
		return msgs
	}
	if _, err := s.Append(ctx, key, batch(20, 1), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	q := chatmem.TailQuery{Tokens: 50}
	run, err := s.findTail(ctx, key, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Rewind(ctx, key, 10, 20); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, key, batch(10, 100), chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, read := range map[string]func(context.Context, chatmem.Key, tailRun) ([]chatmem.Message, error){
		"readRun": s.readRun, "readRunAtomic": s.readRunAtomic,
	} {
		if got, err := read(ctx, key, run); !errors.Is(err, chatmem.ErrNotFound) {
			t.Errorf("%s of a run found before the rewind = %d messages, %v; want ErrNotFound", name, len(got), err)
		}
	}
	got, err := s.Tail(ctx, key, q)
	if err != nil || len(got) != 5 || got[4].Content != "m109" {
		t.Errorf("Tail after the rewind = %+v, %v; want the newest five new messages", got, err)
	}
}

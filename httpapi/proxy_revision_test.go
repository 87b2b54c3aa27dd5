package httpapi

import (
	"context"
	"crypto/rand"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/redis"
	"github.com/chatmem/chatmem/sqlite"
)

// twoStores opens two stores over the same data, as two server processes
// would: two connections to one SQLite file, or two clients of one Redis
// under one prefix.
var twoStores = []struct {
	name string
	open func(t *testing.T) (chatmem.Store, chatmem.Store)
}{
	{"sqlite", func(t *testing.T) (chatmem.Store, chatmem.Store) {
		path := filepath.Join(t.TempDir(), "chatmem.db")
		open := func() chatmem.Store {
			s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
			if err != nil {
				t.Fatalf("sqlite.Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open()
	}},
	{"redis", func(t *testing.T) (chatmem.Store, chatmem.Store) {
		prefix := "httpapitest-" + strings.ToLower(rand.Text()[:12])
		open := func() chatmem.Store {
			client := goredis.NewClient(testenv.RedisOptions(t))
			t.Cleanup(func() { client.Close() })
			s, err := redis.New(client, redis.Options{Prefix: prefix})
			if err != nil {
				t.Fatalf("redis.New: %v", err)
			}
			return s
		}
		a := open()
		t.Cleanup(func() {
			client := goredis.NewClient(testenv.RedisOptions(t))
			defer client.Close()
			ctx := context.Background()
			iter := client.Scan(ctx, 0, prefix+":*", 1000).Iterator()
			for iter.Next(ctx) {
				client.Unlink(ctx, iter.Val())
			}
		})
		return a, open()
	}},
}

// TestProxyStaleCacheRewound: two proxies (two Memory instances, each
// with its tail cache, over one store). One of them regenerates the last
// reply of a conversation, a rewind and an append that bring it back to
// the same length; the other, whose cache still holds the replaced
// reply, is then sent a history that continues the replaced branch. Its
// line-up must be against the stored conversation, not its cache: the
// client's branch diverges from the store at the regenerated reply, so
// the conversation is rewound there and follows the client, and the
// upstream gets the history the client shows.
func TestProxyStaleCacheRewound(t *testing.T) {
	for _, b := range twoStores {
		t.Run(b.name, func(t *testing.T) {
			sa, sb := b.open(t)
			policy := chatmem.Policy{Kind: chatmem.PolicyTokenBudget, Budget: 4000}
			a := newProxyEnv(t, proxyConfig{store: sa, policy: policy, onDiverge: DivergeRewind})
			other := newProxyEnv(t, proxyConfig{store: sb, policy: policy, onDiverge: DivergeRewind})
			post := func(env *proxyEnv, what string, msgs ...string) {
				t.Helper()
				status, _, body := env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, msgs...))
				if status != http.StatusOK {
					t.Fatalf("%s: status %d: %s", what, status, body)
				}
			}
			// Two turns through the other proxy: its tail cache holds
			// the conversation, up to "answer 2".
			post(other, "turn 1", "u:hi")
			post(other, "turn 2", "u:hi", "a:answer 1", "u:my order is the bluebird kettle")
			branch := []string{"u:hi", "a:answer 1", "u:my order is the bluebird kettle", "a:answer 2"}
			wantBrief(t, "after two turns", brief(a.stored(t, "c")), normBrief(branch))
			if _, last, _, ok := other.mem.CachedTail(chatmem.Key{Tenant: "acme", ID: "c"}, 4); !ok || last != 4 {
				t.Fatalf("the other proxy's tail cache: last %d, ok %v; want it to hold the conversation up to 4", last, ok)
			}

			// The first proxy regenerates the last reply: rewound to 3,
			// "answer 1" (its upstream's first) stored as 4.
			post(a, "regenerate", "u:hi", "a:answer 1", "u:my order is the bluebird kettle")
			wantBrief(t, "after the regeneration", brief(a.stored(t, "c")),
				normBrief([]string{"u:hi", "a:answer 1", "u:my order is the bluebird kettle", "a:answer 1"}))
			if conv, err := a.mem.Conversation(t.Context(), chatmem.Key{Tenant: "acme", ID: "c"}); err != nil || conv.LastSeq != 4 || conv.Revision == 0 {
				t.Fatalf("after the regeneration: %+v, %v; want LastSeq 4 at a revision above 0", conv, err)
			}

			// A client still showing the replaced reply goes on through
			// the other proxy.
			next := append(branch, "u:thanks")
			post(other, "next turn on the replaced branch", next...)
			wantBrief(t, "sent upstream", brief(other.up.last(t).messages(t)), normBrief(next))
			wantBrief(t, "stored", brief(a.stored(t, "c")), normBrief(append(next, "a:answer 3")))
		})
	}
}

// racingStore is a memstore whose first rewind lets another process's
// rewind and appends in first: the conversation is taken back to seq 2
// and appended back to its LastSeq on another branch, after the proxy's
// read and before its rewind.
type racingStore struct {
	*memstore.Store
	raced bool
}

func (s *racingStore) race(ctx context.Context, key chatmem.Key) error {
	if s.raced {
		return nil
	}
	s.raced = true
	conv, err := s.Store.Rewind(ctx, key, 2, 5)
	if err != nil {
		return err
	}
	_, err = s.Store.Append(ctx, key, chatMsgs("u:my order is the owl clock", "a:the owl clock ships monday", "u:thanks"),
		chatmem.AppendOptions{ExpectedLastSeq: &conv.LastSeq})
	return err
}

func (s *racingStore) Rewind(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq int64) (chatmem.Conversation, error) {
	if err := s.race(ctx, key); err != nil {
		return chatmem.Conversation{}, err
	}
	return s.Store.Rewind(ctx, key, toSeq, expectedLastSeq)
}

func (s *racingStore) RewindRevision(ctx context.Context, key chatmem.Key, toSeq, expectedLastSeq, expectedRevision int64) (chatmem.Conversation, error) {
	if err := s.race(ctx, key); err != nil {
		return chatmem.Conversation{}, err
	}
	return s.Store.RewindRevision(ctx, key, toSeq, expectedLastSeq, expectedRevision)
}

// TestProxyRewindAtRevision: between the proxy's read of a conversation
// and its rewind for a diverging request, another process rewinds it and
// appends another branch back to the same LastSeq. The proxy's rewind is
// conditional on the revision it read, so it is refused (409) and the
// other branch, which the proxy never read, stays whole.
func TestProxyRewindAtRevision(t *testing.T) {
	store := &racingStore{Store: memstore.New()}
	env := newProxyEnv(t, proxyConfig{store: store, policy: chatmem.Policy{Kind: chatmem.PolicyAll}, onDiverge: DivergeRewind})
	env.seed(t, "c", "u:hi", "a:hello", "u:my order is the bluebird kettle", "a:the bluebird kettle ships today", "u:thanks")
	edited := []string{"u:hi", "a:hello", "u:my order is the sparrow lamp"}
	status, _, body := env.post(t, map[string]string{headerConversation: "c"}, reconcileBody(t, edited...))
	if !store.raced {
		t.Fatal("the proxy did not rewind")
	}
	if status != http.StatusConflict {
		t.Errorf("edit racing another rewind: status %d, want %d: %s", status, http.StatusConflict, body)
	}
	wantBrief(t, "stored", brief(env.stored(t, "c")),
		normBrief([]string{"u:hi", "a:hello", "u:my order is the owl clock", "a:the owl clock ships monday", "u:thanks"}))
}

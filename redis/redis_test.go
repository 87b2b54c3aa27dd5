package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/storetest"
)

// dialer returns a function that makes new clients for the Redis server
// the tests use (testenv.RedisURL), after checking once that it answers.
func dialer(tb testing.TB) func() goredis.UniversalClient {
	tb.Helper()
	o := testenv.RedisOptions(tb)
	return func() goredis.UniversalClient { return goredis.NewClient(o) }
}

// randomPrefix returns a key prefix no other test run uses.
func randomPrefix() string { return "cmtest-" + rand.Text()[:12] }

// newTestStore returns a store over a fresh client and prefix, whose keys
// and client are removed when tb ends.
func newTestStore(tb testing.TB, dial func() goredis.UniversalClient) *Store {
	tb.Helper()
	client := dial()
	s, err := New(client, Options{Prefix: randomPrefix()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := deletePrefix(context.Background(), client, s.Prefix()); err != nil {
			tb.Errorf("delete keys of prefix %s: %v", s.Prefix(), err)
		}
		client.Close()
	})
	return s
}

// harness is the storetest harness over clients from dial.
func harness(dial func() goredis.UniversalClient) storetest.Harness {
	return storetest.Harness{
		New: func(t *testing.T) chatmem.Store { return newTestStore(t, dial) },
		Reopen: func(t *testing.T, s chatmem.Store) chatmem.Store {
			client := dial()
			t.Cleanup(func() { client.Close() })
			s2, err := New(client, Options{Prefix: s.(*Store).Prefix()})
			if err != nil {
				t.Fatal(err)
			}
			return s2
		},
		Dump: func(t *testing.T, s chatmem.Store) []byte {
			b, err := dumpPrefix(t.Context(), s.(*Store).Client(), s.(*Store).Prefix())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		EraseSteps: func(s chatmem.Store, step func()) { s.(*Store).eraseStep = step },
	}
}

// dumpPrefix returns every key under prefix with its value, on every
// master of a cluster.
func dumpPrefix(ctx context.Context, c goredis.UniversalClient, prefix string) ([]byte, error) {
	var out []byte
	var mu sync.Mutex
	dump := func(ctx context.Context, node *goredis.Client) error {
		iter := node.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			var v any
			var err error
			switch typ, _ := node.Type(ctx, k).Result(); typ {
			case "string":
				v, err = node.Get(ctx, k).Result()
			case "hash":
				v, err = node.HGetAll(ctx, k).Result()
			case "list":
				v, err = node.LRange(ctx, k, 0, -1).Result()
			case "set":
				v, err = node.SMembers(ctx, k).Result()
			case "zset":
				v, err = node.ZRangeWithScores(ctx, k, 0, -1).Result()
			default:
				v = typ
			}
			if err != nil && err != goredis.Nil {
				return err
			}
			mu.Lock()
			out = fmt.Appendf(out, "%s %v\n", k, v)
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := c.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, dump)
	case *goredis.Client:
		err = dump(ctx, c)
	}
	return out, err
}

// deletePrefix deletes every key under prefix, on every master of a
// cluster.
func deletePrefix(ctx context.Context, c goredis.UniversalClient, prefix string) error {
	del := func(ctx context.Context, node *goredis.Client) error {
		iter := node.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			// Keys of one prefix span slots, so one UNLINK per key on a
			// cluster node; pipelined.
			if _, err := node.Pipelined(ctx, func(p goredis.Pipeliner) error {
				for _, k := range keys[:n] {
					p.Unlink(ctx, k)
				}
				return nil
			}); err != nil {
				return err
			}
			keys = keys[n:]
		}
		return nil
	}
	switch c := c.(type) {
	case *goredis.ClusterClient:
		return c.ForEachMaster(ctx, del)
	case *goredis.Client:
		return del(ctx, c)
	}
	return nil
}

func TestStore(t *testing.T) {
	storetest.Run(t, harness(dialer(t)))
}

func BenchmarkTail(b *testing.B) {
	s := newTestStore(b, dialer(b))
	storetest.BenchmarkTail(b, s, []int{1000, 100000, 1000000})
}

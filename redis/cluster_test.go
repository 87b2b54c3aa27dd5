package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/storetest"
)

// TestCluster runs the suite against a real three-master Redis Cluster,
// started from the redis-server binary on loopback ports for this test.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped with -short")
	}
	addrs := testenv.RedisCluster(t)
	dial := func() goredis.UniversalClient {
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	}

	t.Run("Layout", func(t *testing.T) {
		// Every key of a conversation hashes to one slot, and conversations
		// spread over the masters.
		s := newTestStore(t, dial)
		ctx := context.Background()
		c := s.client.(*goredis.ClusterClient)
		slots := map[int64]bool{}
		for i := range 20 {
			key := chatmem.Key{Tenant: "acme", ID: fmt.Sprintf("c%d", i)}
			var slot int64 = -1
			for _, k := range append(s.convKeys(key), s.termKey(key, "order"), s.termKey(key, "o'brien")) {
				n, err := c.ClusterKeySlot(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				if slot >= 0 && n != slot {
					t.Errorf("%s: key %s in slot %d, others in %d", key, k, n, slot)
				}
				slot = n
			}
			slots[slot] = true
		}
		if len(slots) < 10 {
			t.Errorf("20 conversations landed in only %d slots", len(slots))
		}
	})

	t.Run("Open", func(t *testing.T) {
		ctx := context.Background()
		s, err := Open(ctx, "redis+cluster://"+strings.Join(addrs, ",")+"?prefix="+randomPrefix(), Options{})
		if err != nil {
			t.Fatalf("Open(redis+cluster://...): %v", err)
		}
		t.Cleanup(func() {
			deletePrefix(context.Background(), s.client, s.Prefix())
			s.Close()
		})
		if _, ok := s.client.(*goredis.ClusterClient); !ok {
			t.Errorf("Open(redis+cluster://...) client is %T", s.client)
		}
		key := chatmem.Key{Tenant: "acme", ID: "c1"}
		msg := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}
		if _, err := s.Append(ctx, key, msg, chatmem.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
		if n, err := s.PurgeInactive(ctx, "", time.Now().Add(time.Hour)); err != nil || n != 1 {
			t.Errorf("PurgeInactive(all tenants) = %d, %v; want 1", n, err)
		}
	})

	t.Run("Suite", func(t *testing.T) {
		storetest.Run(t, harness(dial))
	})
}

package replicas

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/testenv"
)

// TestThroughput measures appends and context reads per second through 1,
// 2 and 3 replicas on PostgreSQL and on a Redis Cluster (and 1 on SQLite),
// and the store's size per message after the appends. It is a measurement,
// not a check: it runs only with CHATMEM_REPLICA_BENCH=1 and logs a table
// (docs/deployment.md holds the figures).
//
//	CHATMEM_REPLICA_BENCH=1 go test -count=1 -run TestThroughput -v ./replicas
func TestThroughput(t *testing.T) {
	if os.Getenv("CHATMEM_REPLICA_BENCH") != "1" {
		t.Skip("a measurement; set CHATMEM_REPLICA_BENCH=1 to run it")
	}
	d := 5 * time.Second
	if s := os.Getenv("CHATMEM_REPLICA_BENCH_DURATION"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	type store struct {
		name string
		open func(t *testing.T) (url string, size func() int64)
		max  int
	}
	stores := []store{
		{"sqlite", func(t *testing.T) (string, func() int64) {
			path := filepath.Join(t.TempDir(), "chatmem.db")
			return "sqlite:" + path, func() int64 { return dirSize(t, filepath.Dir(path)) }
		}, 1},
		{"postgres", func(t *testing.T) (string, func() int64) {
			url := postgresURL(t)
			db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
			return url, func() int64 {
				var n int64
				if err := testenv.PostgresAdmin(t).QueryRow(context.Background(), "SELECT pg_database_size($1)", db).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
		}, 3},
		{"redis-cluster", func(t *testing.T) (string, func() int64) {
			addrs := testenv.RedisCluster(t)
			return "redis+cluster://" + strings.Join(addrs, ","), clusterMemory(t, addrs)
		}, 3},
	}
	for _, s := range stores {
		for n := 1; n <= s.max; n++ {
			t.Run(fmt.Sprintf("%s/%d", s.name, n), func(t *testing.T) {
				url, size := s.open(t)
				reps := startReplicas(t, url, n)
				before := size()
				appends := drive(t, reps, d, true)
				grown := size() - before
				reads := drive(t, reps, d, false)
				t.Logf("%s, %d replica(s), %d clients: %.0f appends/s, %.0f context reads/s; %d messages took %d bytes (%.0f bytes/message)",
					s.name, n, benchClients, float64(appends)/d.Seconds(), float64(reads)/d.Seconds(), appends, grown, float64(grown)/float64(max(appends, 1)))
			})
		}
	}
}

const (
	benchClients = 32
	benchConvs   = 256
)

// benchText is a message of 200 characters, about 50 tokens.
var benchText = strings.Repeat("The order 12345 ships on Monday; ", 7)[:200]

// drive runs benchClients clients for d, round-robin over reps, each on
// conversations of its own, appending one message per request (appends) or
// reading a 1,000-token context, and returns how many requests succeeded.
func drive(t *testing.T, reps []*replica, d time.Duration, appends bool) int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	deadline := time.Now().Add(d)
	for c := range benchClients {
		wg.Go(func() {
			for i := c; time.Now().Before(deadline); i++ {
				r := reps[i%len(reps)]
				conv := fmt.Sprintf("b%d", (c+i*benchClients)%benchConvs)
				var err error
				if appends {
					_, err = r.client.Append(ctx, conv, []chatmem.Message{{Role: chatmem.RoleUser, Content: benchText}}, client.AppendOptions{})
				} else {
					_, err = r.client.Context(ctx, conv, client.ContextParams{Policy: chatmem.PolicyTokenBudget, Budget: 1000})
				}
				if err != nil {
					t.Errorf("%v", err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return n.Load()
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// clusterMemory returns a function that sums used_memory over the masters
// of the Redis Cluster at addrs.
func clusterMemory(t *testing.T, addrs []string) func() int64 {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { c.Close() })
	return func() int64 {
		var total atomic.Int64
		err := c.ForEachMaster(context.Background(), func(ctx context.Context, n *goredis.Client) error {
			info, err := n.Info(ctx, "memory").Result()
			for _, l := range strings.Split(info, "\r\n") {
				if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
					var used int64
					fmt.Sscan(v, &used)
					total.Add(used)
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return total.Load()
	}
}

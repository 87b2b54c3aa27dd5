package replicas

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/postgres"
	"github.com/chatmem/chatmem/redis"
	"github.com/chatmem/chatmem/sqlite"
	"github.com/chatmem/chatmem/tokenizer"
)

// TestSizePerMessage measures what a stored message costs each store:
// 20,000 messages of 200 characters (50 conversations of 400) appended
// through chatmem.Memory, and the growth of the SQLite file (with its WAL),
// the PostgreSQL database and the Redis Cluster's used_memory. A
// measurement for docs/deployment.md, run only with CHATMEM_REPLICA_BENCH=1.
func TestSizePerMessage(t *testing.T) {
	if os.Getenv("CHATMEM_REPLICA_BENCH") != "1" {
		t.Skip("a measurement; set CHATMEM_REPLICA_BENCH=1 to run it")
	}
	ctx := context.Background()
	const convs, perConv, batch = 50, 400, 50
	fill := func(t *testing.T, store chatmem.Store) {
		mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		msgs := make([]chatmem.Message, batch)
		for c := range convs {
			for i := 0; i < perConv; i += batch {
				for j := range msgs {
					role := chatmem.RoleUser
					if j%2 == 1 {
						role = chatmem.RoleAssistant
					}
					msgs[j] = chatmem.Message{Role: role, Content: fmt.Sprintf("%05d %s", i+j, benchText[6:])}
				}
				if _, err := mem.Append(ctx, chatmem.Key{Tenant: chatmem.DefaultTenant, ID: fmt.Sprintf("s%d", c)}, msgs, chatmem.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	report := func(t *testing.T, name string, before, after int64) {
		n := int64(convs * perConv)
		t.Logf("%s: %d messages of 200 characters grew the store by %d bytes: %d bytes/message, %.2f GB per million messages",
			name, n, after-before, (after-before)/n, float64(after-before)/float64(n)*1e6/1e9)
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		s, err := sqlite.Open(ctx, filepath.Join(dir, "chatmem.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		before := dirSize(t, dir)
		fill(t, s)
		s.Close() // checkpoints the WAL into the file
		report(t, "sqlite", before, dirSize(t, dir))
	})
	t.Run("postgres", func(t *testing.T) {
		url := postgresURL(t)
		s, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
		var before, after int64
		q := "SELECT pg_database_size($1)"
		if err := s.Pool().QueryRow(ctx, q, db).Scan(&before); err != nil {
			t.Fatal(err)
		}
		fill(t, s)
		if err := s.Pool().QueryRow(ctx, q, db).Scan(&after); err != nil {
			t.Fatal(err)
		}
		report(t, "postgres", before, after)
	})
	t.Run("redis-cluster", func(t *testing.T) {
		url := redisClusterURL(t)
		s, err := redis.Open(ctx, url, redis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		size := clusterMemory(t, strings.Split(strings.TrimPrefix(url[:strings.Index(url, "?")], "redis+cluster://"), ","))
		before := size()
		fill(t, s)
		report(t, "redis-cluster", before, size())
	})
}

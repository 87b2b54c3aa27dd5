package redis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	addrs := startCluster(t)
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

// startCluster starts three redis-server processes in cluster mode on free
// loopback ports, joins them into one cluster with three masters, and stops
// them when t ends. It returns their addresses.
func startCluster(t *testing.T) []string {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.SkipOrFail(t, "redis-server not installed: %v", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		testenv.SkipOrFail(t, "redis-cli not installed: %v", err)
	}
	dir := t.TempDir()
	var addrs []string
	for _, port := range freePorts(t, 3) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		logf := filepath.Join(dir, fmt.Sprintf("redis-%d.log", port))
		cmd := exec.Command(server,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)),
			"--cluster-node-timeout", "5000", "--dir", dir, "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--logfile", logf)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				if b, err := os.ReadFile(logf); err == nil {
					t.Logf("%s:\n%s", logf, lastLines(string(b), 20))
				}
			}
		})
		addrs = append(addrs, addr)
	}
	for _, addr := range addrs {
		waitFor(t, addr+" answers PING", func(ctx context.Context) (bool, error) {
			c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err() == nil, nil
		})
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range addrs {
		waitFor(t, addr+" reports cluster_state:ok with 3 nodes", func(ctx context.Context) (bool, error) {
			c := goredis.NewClient(&goredis.Options{Addr: addr})
			defer c.Close()
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil {
				return false, err
			}
			return strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") &&
				strings.Contains(info, "cluster_slots_ok:16384"), nil
		})
	}
	return addrs
}

// freePorts returns n loopback ports that are free, and whose cluster bus
// ports (port+10000) are free too.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var hold []net.Listener
	defer func() {
		for _, l := range hold {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n && tries < 200; tries++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			l.Close()
			continue
		}
		hold = append(hold, l, bus)
		ports = append(ports, port)
	}
	if len(ports) < n {
		t.Fatalf("found only %d free port pairs", len(ports))
	}
	return ports
}

// waitFor polls cond for up to 30 seconds.
func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok, err := cond(ctx)
		cancel()
		if ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting until %s (last error: %v)", what, last)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

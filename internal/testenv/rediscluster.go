package testenv

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
)

// RedisCluster starts three redis-server processes in cluster mode on free
// loopback ports, joins them into one cluster with three masters, and stops
// them when tb ends. It returns their addresses. Without redis-server or
// redis-cli on the PATH it skips or fails tb as SkipOrFail does.
func RedisCluster(tb testing.TB) []string {
	tb.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		SkipOrFail(tb, "redis-server not installed: %v", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		SkipOrFail(tb, "redis-cli not installed: %v", err)
	}
	dir := tb.TempDir()
	var addrs []string
	for _, port := range freePorts(tb, 3) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		logf := filepath.Join(dir, fmt.Sprintf("redis-%d.log", port))
		cmd := exec.Command(server,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)),
			"--cluster-node-timeout", "5000", "--dir", dir, "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--logfile", logf)
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start redis-server: %v", err)
		}
		tb.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if tb.Failed() {
				if b, err := os.ReadFile(logf); err == nil {
					tb.Logf("%s:\n%s", logf, LastLines(string(b), 20))
				}
			}
		})
		addrs = append(addrs, addr)
	}
	for _, addr := range addrs {
		WaitFor(tb, addr+" answers PING", func(ctx context.Context) (bool, error) {
			c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
			defer c.Close()
			return c.Ping(ctx).Err() == nil, nil
		})
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range addrs {
		WaitFor(tb, addr+" reports cluster_state:ok with 3 nodes", func(ctx context.Context) (bool, error) {
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
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
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
			tb.Fatal(err)
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
		tb.Fatalf("found only %d free port pairs", len(ports))
	}
	return ports
}

// WaitFor polls cond for up to 30 seconds, each call with a 1-second
// context, and fails tb with what and the last error if it never holds.
func WaitFor(tb testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	tb.Helper()
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
	tb.Fatalf("timed out waiting until %s (last error: %v)", what, last)
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

package replicas

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem/client"
	"github.com/chatmem/chatmem/internal/testenv"
)

var binary string // the chatmem binary TestMain builds

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "chatmem-replicas")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "chatmem")
	out, err := exec.Command("go", "build", "-o", binary, "github.com/chatmem/chatmem/cmd/chatmem").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// postgresURL returns the URL of a fresh database on the test server,
// dropped when tb ends: each replica test gets its own tables.
func postgresURL(tb testing.TB) string {
	tb.Helper()
	pool := testenv.PostgresAdmin(tb)
	name := "chatmem_replicas_" + strings.ToLower(rand.Text()[:10])
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	cfg := pool.Config().ConnConfig
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
}

// redisClusterURL starts a Redis Cluster for tb and returns its store URL.
func redisClusterURL(tb testing.TB) string {
	tb.Helper()
	addrs := testenv.RedisCluster(tb)
	return "redis+cluster://" + strings.Join(addrs, ",") + "?prefix=rep" + strings.ToLower(rand.Text()[:8])
}

// replica is one running `chatmem serve`.
type replica struct {
	url    string
	cmd    *exec.Cmd
	client *client.Client
	done   chan struct{} // closed when the process has exited
}

// kill ends the replica with SIGKILL and waits until it has exited.
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// startReplicas starts n `chatmem serve` processes on loopback ports
// against storeURL and stops them when tb ends.
func startReplicas(tb testing.TB, storeURL string, n int, extra ...string) []*replica {
	tb.Helper()
	var reps []*replica
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := range n {
		logf, err := os.Create(filepath.Join(tb.TempDir(), fmt.Sprintf("replica-%d.log", i)))
		if err != nil {
			tb.Fatal(err)
		}
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--store", storeURL, "--log-level", "warn"}, extra...)
		cmd := exec.Command(binary, args...)
		cmd.Stderr = logf
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			tb.Fatalf("start replica: %v", err)
		}
		r := &replica{cmd: cmd, done: make(chan struct{})}
		lines := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if u, ok := strings.CutPrefix(sc.Text(), "chatmem listening on "); ok {
					lines <- u
				}
			}
		}()
		go func() { _ = cmd.Wait(); close(r.done) }()
		tb.Cleanup(func() {
			r.kill()
			logf.Close()
			if tb.Failed() {
				if b, err := os.ReadFile(logf.Name()); err == nil && len(b) > 0 {
					tb.Logf("replica %d log:\n%s", i, testenv.LastLines(string(b), 20))
				}
			}
		})
		select {
		case r.url = <-lines:
		case <-r.done:
			b, _ := os.ReadFile(logf.Name())
			tb.Fatalf("replica %d exited before listening:\n%s", i, b)
		case <-time.After(60 * time.Second):
			tb.Fatalf("replica %d did not listen within a minute", i)
		}
		r.client = client.New(r.url, "", hc)
		reps = append(reps, r)
	}
	return reps
}

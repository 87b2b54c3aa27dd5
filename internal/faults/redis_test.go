package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/redis"
	"github.com/chatmem/chatmem/tokenizer"
)

const (
	redisRestarts = 6
	redisClients  = 4
)

// TestRedisRestart stops a test-owned redis-server with appendonly yes and
// appendfsync always, redisRestarts times (by SIGKILL, SIGTERM and
// SHUTDOWN in turn), and starts it again on the same port and directory,
// while redisClients clients append to two conversations. Each outage must
// show in the clients as errors wrapping chatmem.ErrUnavailable, every
// client must append again after each restart without help, and at the
// end every acknowledged append must be stored, once.
func TestRedisRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	seed := seedFromClock(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	srv := startRedis(t, ctx, "--appendonly", "yes", "--appendfsync", "always")
	client := srv.client()
	store, err := redis.New(client, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := chatmem.New(store, chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	keys := keysOf(2)
	cl := startClients(t, ctx, mem, keys, redisClients, seed)

	stops := []string{"SIGKILL", "SIGTERM", "SHUTDOWN"}
	for i := range redisRestarts {
		sleep(ctx, 200*time.Millisecond+time.Duration(rng.Int64N(int64(400*time.Millisecond))))
		failed := cl.failed.Load()
		srv.stop(ctx, stops[i%len(stops)])
		outage := 100*time.Millisecond + time.Duration(rng.Int64N(int64(400*time.Millisecond)))
		sleep(ctx, outage)
		srv.start(ctx)
		before := cl.ackedEach()
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		recovered := cl.waitProgress(wctx, before)
		cancel()
		if !recovered {
			t.Fatalf("restart %d (%s): not every client appended again within 15s of the restart (acknowledged %v, then %v)", i+1, stops[i%len(stops)], before, cl.ackedEach())
		}
		seen := cl.failed.Load() - failed
		t.Logf("restart %d: %s, down %v: %d failed attempts, all ErrUnavailable; every client appended again", i+1, stops[i%len(stops)], outage.Round(time.Millisecond), seen)
		if seen == 0 {
			t.Errorf("restart %d (%s): no client saw an error while Redis was down", i+1, stops[i%len(stops)])
		}
	}
	sleep(ctx, 100*time.Millisecond)
	cl.close()
	if ctx.Err() != nil {
		t.Fatal(ctx.Err())
	}
	found := verify(t, ctx, store, keys, &cl.led, verifyOptions{sent: cl.sentTexts()})
	t.Logf("the first error a client saw: %v", cl.sample.Load())
	t.Logf("%d retries replayed an append whose reply was lost", cl.replay.Load())
	report(t, "redis-restart", redisRestarts, cl.led.len(), found, len(keys))
}

// TestRedisRestartWithoutPersistence shows what the persistence settings
// are for: with neither AOF nor RDB snapshots, a restart loses every
// conversation.
func TestRedisRestartWithoutPersistence(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	srv := startRedis(t, ctx, "--appendonly", "no")
	store, err := redis.New(srv.client(), redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := keysOf(1)[0]
	msgs := batch("volatile", 2)
	for i := range msgs {
		msgs[i].Tokens = 1
	}
	if _, err := store.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.stop(ctx, "SIGTERM")
	srv.start(ctx)
	conv, err := store.Conversation(ctx, key)
	if !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("after a restart without persistence: Conversation = %d messages, %v; want ErrNotFound (lost)", conv.LastSeq, err)
	}
}

// redisServer is a redis-server the test owns: on a free loopback port,
// with its files in a temporary directory, and killed when the test ends.
type redisServer struct {
	t    *testing.T
	addr string
	log  string // the server's log file
	args []string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// startRedis starts redis-server with args added to the test's settings.
func startRedis(t *testing.T, ctx context.Context, args ...string) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.SkipOrFail(t, "redis-server is not on PATH: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	s := &redisServer{t: t, addr: l.Addr().String(), log: filepath.Join(dir, "redis.log")}
	s.args = append([]string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--daemonize", "no", "--logfile", s.log}, args...)
	t.Cleanup(func() {
		if s.cmd != nil {
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	s.start(ctx)
	return s
}

// start starts the server and waits until it answers PING (after loading
// its data).
func (s *redisServer) start(ctx context.Context) {
	s.t.Helper()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	c := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("redis-server exited at start: %v (see %s)", s.cmd.ProcessState, s.log)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.t.Fatalf("redis-server at %s did not answer: %v", s.addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop stops the server, by "SIGKILL", "SIGTERM" or "SHUTDOWN" (the
// command), and waits for it to exit.
func (s *redisServer) stop(ctx context.Context, how string) {
	s.t.Helper()
	switch how {
	case "SIGKILL":
		s.cmd.Process.Signal(syscall.SIGKILL)
	case "SIGTERM":
		s.cmd.Process.Signal(syscall.SIGTERM)
	case "SHUTDOWN":
		c := goredis.NewClient(&goredis.Options{Addr: s.addr, MaxRetries: -1})
		// The server closes the connection instead of replying.
		if err := c.Shutdown(ctx).Err(); err != nil && !errors.Is(err, goredis.ErrClosed) && err.Error() != "EOF" && !isConnReset(err) {
			s.t.Logf("SHUTDOWN: %v", err)
		}
		c.Close()
	default:
		panic("unknown way to stop redis: " + how)
	}
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.t.Fatalf("redis-server did not exit after %s", how)
	}
	s.cmd = nil
}

func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// client returns a client of the server that gives up soon on a server that
// is down, and is closed when the test ends.
func (s *redisServer) client() *goredis.Client {
	c := goredis.NewClient(&goredis.Options{
		Addr:        s.addr,
		DialTimeout: 250 * time.Millisecond,
		// Fail fast while the server is down, so the test's own retries
		// (with the idempotency key) are what recovers.
		DialerRetries:      2,
		DialerRetryTimeout: 50 * time.Millisecond,
		ReadTimeout:        2 * time.Second,
		WriteTimeout:       2 * time.Second,
		MaxRetries:         1,
	})
	s.t.Cleanup(func() { c.Close() })
	return c
}

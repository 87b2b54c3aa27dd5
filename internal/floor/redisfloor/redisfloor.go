// Package redisfloor is the raw floor of a chat turn on Redis, the
// yardstick of the Redis store's turn in its benchmarks and in chatmem
// bench: the turn's job done with the store's client and nothing of the
// store's data layout.
package redisfloor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/jsonstr"
)

// Floor is the floor of a turn on one list of message records. Make one
// with New; it is not safe for concurrent use.
type Floor struct {
	client goredis.UniversalClient
	key    string
	n      int // records in the list
}

// floorRead is how many of the newest records a floor turn reads back.
const floorRead = 64

// New fills a list of its own, beside a store's keys (under the store's
// prefix, with a random hash tag), with n message records of content,
// alternately of a user and an assistant, encoded as the store encodes a
// message (Record); and returns the floor of a turn on it. client and
// prefix are the store's (redis.Store's Client and Prefix). Drop deletes
// the list. It wraps chatmem.ErrInvalid for a negative n and returns
// Redis's errors.
func New(ctx context.Context, client goredis.UniversalClient, prefix string, n int, content string) (*Floor, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: a Redis turn floor of %d messages", chatmem.ErrInvalid, n)
	}
	f := &Floor{client: client, key: prefix + ":{turn-floor-" + rand.Text()[:10] + "}:msgs", n: n}
	for done := 0; done < n; done += 1000 {
		items := make([]any, 0, 1000)
		for i := done; i < min(done+1000, n); i++ {
			role := chatmem.RoleUser
			if i%2 == 1 {
				role = chatmem.RoleAssistant
			}
			items = append(items, Record(nil, role, content, len(content)/4))
		}
		if err := f.client.RPush(ctx, f.key, items...).Err(); err != nil {
			_ = f.Drop(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("redis: fill the turn floor: %w", err)
		}
	}
	return f, nil
}

// Record appends to b the record of a message of role, content and tokens
// and nothing else, byte for byte as the Redis store encodes such a
// message (its test holds the two together), at the cost of its encoder's
// fast path: the floor pays what a store's turn pays to encode.
func Record(b []byte, role chatmem.Role, content string, tokens int) []byte {
	b = jsonstr.Append(append(b, `{"role":`...), string(role))
	if content != "" {
		b = jsonstr.Append(append(b, `,"content":`...), content)
	}
	b = strconv.AppendInt(append(b, `,"tokens":`...), int64(tokens), 10)
	return append(b, '}')
}

// Turn is one turn of the floor: RPUSH of a user message's record of
// content and LRANGE of the newest 64 records, pipelined (one round trip).
// It fails if it reads back fewer than 64, or than the list holds.
func (f *Floor) Turn(ctx context.Context, content string) error {
	rec := Record(make([]byte, 0, 40+len(content)), chatmem.RoleUser, content, len(content)/4)
	var last *goredis.StringSliceCmd
	_, err := f.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.RPush(ctx, f.key, rec)
		last = p.LRange(ctx, f.key, -floorRead, -1)
		return nil
	})
	if err != nil {
		return err
	}
	f.n++
	if want := min(floorRead, f.n); len(last.Val()) != want {
		return fmt.Errorf("redis: the turn floor read %d records, want %d", len(last.Val()), want)
	}
	return nil
}

// Reply is the rest of a chat turn on the floor: RPUSH of an assistant
// message's record of content, the reply appended before the next turn.
func (f *Floor) Reply(ctx context.Context, content string) error {
	rec := Record(make([]byte, 0, 40+len(content)), chatmem.RoleAssistant, content, len(content)/4)
	if err := f.client.RPush(ctx, f.key, rec).Err(); err != nil {
		return err
	}
	f.n++
	return nil
}

// ServerTime returns the CPU time client's Redis server has spent in its
// main thread, where it runs every command, script and socket read and
// write: INFO cpu's used_cpu_user_main_thread and
// used_cpu_sys_main_thread, summed. (INFO commandstats would count each
// command a script calls twice, in the script's time and in its own.) It
// is the whole server's (with a cluster client, one node's), so a
// difference of two readings is a benchmark's only on a server nothing
// else uses meanwhile.
func ServerTime(ctx context.Context, client goredis.UniversalClient) (time.Duration, error) {
	info, err := client.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	found := 0
	for line := range strings.Lines(info) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || name != "used_cpu_user_main_thread" && name != "used_cpu_sys_main_thread" {
			continue
		}
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("redis: INFO cpu: %q: %w", line, err)
		}
		total += time.Duration(sec * float64(time.Second))
		found++
	}
	if found != 2 {
		return 0, errors.New("redis: INFO cpu has no main thread's time (Redis 6.2 or later has)")
	}
	return total, nil
}

// Drop deletes the floor's list. The client stays open: it is the store's.
func (f *Floor) Drop(ctx context.Context) error {
	return f.client.Unlink(ctx, f.key).Err()
}

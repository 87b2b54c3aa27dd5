package redis

import (
	"context"
	"crypto/rand"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/chatmem/chatmem"
)

// Floor is the raw floor of a chat turn on Redis, issue 18's yardstick
// for the store's turn: the turn's job done with the store's client and
// nothing of the store's data layout. Make one with TurnFloor; it is not
// safe for concurrent use.
type Floor struct {
	client goredis.UniversalClient
	key    string
	n      int // records in the list
}

// floorRead is how many of the newest records a floor turn reads back.
const floorRead = 64

// TurnFloor fills a list of its own, beside s's keys (under s's prefix,
// with a random hash tag), with n message records of content, alternately
// of a user and an assistant, encoded as the store encodes a message; and
// returns the floor of a turn on it. Drop deletes the list. It wraps
// chatmem.ErrInvalid for a negative n and returns Redis's errors.
func TurnFloor(ctx context.Context, s *Store, n int, content string) (*Floor, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: redis.TurnFloor of %d messages", chatmem.ErrInvalid, n)
	}
	f := &Floor{client: s.client, key: s.prefix + ":{turn-floor-" + rand.Text()[:10] + "}:msgs", n: n}
	for done := 0; done < n; done += 1000 {
		items := make([]any, 0, 1000)
		for i := done; i < min(done+1000, n); i++ {
			role := chatmem.RoleUser
			if i%2 == 1 {
				role = chatmem.RoleAssistant
			}
			r, err := encodeRecord(chatmem.Message{Role: role, Content: content, Tokens: len(content) / 4})
			if err != nil {
				return nil, err
			}
			items = append(items, r)
		}
		if err := f.client.RPush(ctx, f.key, items...).Err(); err != nil {
			_ = f.Drop(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("redis: fill the turn floor: %w", err)
		}
	}
	return f, nil
}

// Turn is one turn of the floor: RPUSH of a user message's record of
// content and LRANGE of the newest 64 records, pipelined (one round trip).
// It fails if it reads back fewer than 64, or than the list holds.
func (f *Floor) Turn(ctx context.Context, content string) error {
	rec, err := encodeRecord(chatmem.Message{Role: chatmem.RoleUser, Content: content, Tokens: len(content) / 4})
	if err != nil {
		return err
	}
	var last *goredis.StringSliceCmd
	_, err = f.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
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

// Drop deletes the floor's list. The client stays open: it is the store's.
func (f *Floor) Drop(ctx context.Context) error {
	return f.client.Unlink(ctx, f.key).Err()
}

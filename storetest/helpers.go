package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"chatmem"
)

// randomTenant returns a tenant name no other run uses, so that stores over
// shared backends (one Redis, one Postgres) keep subtests apart.
func randomTenant() string {
	return "t-" + rand.Text()[:12]
}

// fill appends n alternating user and assistant messages of 20 tokens each to
// key, in batches of up to 1000.
func fill(tb testing.TB, ctx context.Context, s chatmem.Store, key chatmem.Key, n int) {
	tb.Helper()
	const batch = 1000
	for done := 0; done < n; {
		m := min(batch, n-done)
		msgs := make([]chatmem.Message, m)
		for i := range msgs {
			role := chatmem.RoleUser
			if (done+i)%2 == 1 {
				role = chatmem.RoleAssistant
			}
			msgs[i] = chatmem.Message{Role: role, Content: fmt.Sprintf("message %d", done+i+1), Tokens: 20}
		}
		if _, err := s.Append(ctx, key, msgs, chatmem.AppendOptions{}); err != nil {
			tb.Fatalf("fill %s: Append at %d: %v", key, done, err)
		}
		done += m
	}
}

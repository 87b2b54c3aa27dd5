package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// randomTenant returns a tenant name no other run uses, so that stores over
// shared backends (one Redis, one Postgres) keep subtests apart.
func randomTenant() string {
	return "t-" + rand.Text()[:12]
}

// randomKey returns a key in a fresh tenant.
func randomKey(id string) chatmem.Key {
	return chatmem.Key{Tenant: randomTenant(), ID: id}
}

// fill appends n alternating user and assistant messages of 20 tokens each to
// key (users at odd sequence numbers), in batches of up to 1000.
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

// msg returns a message of role with content and tokens.
func msg(role chatmem.Role, content string, tokens int) chatmem.Message {
	return chatmem.Message{Role: role, Content: content, Tokens: tokens}
}

// mustAppend appends msgs and fails the test on an error.
func mustAppend(t *testing.T, s chatmem.Store, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) chatmem.AppendResult {
	t.Helper()
	res, err := s.Append(t.Context(), key, msgs, opts)
	if err != nil {
		t.Fatalf("Append(%s, %d messages) error = %v, want nil", key, len(msgs), err)
	}
	return res
}

// mustConversation reads key's metadata and fails the test on an error.
func mustConversation(t *testing.T, s chatmem.Store, key chatmem.Key) chatmem.Conversation {
	t.Helper()
	c, err := s.Conversation(t.Context(), key)
	if err != nil {
		t.Fatalf("Conversation(%s) error = %v, want nil", key, err)
	}
	return c
}

// mustRange reads key's messages after after and fails the test on an error.
func mustRange(t *testing.T, s chatmem.Store, key chatmem.Key, after int64, limit int) []chatmem.Message {
	t.Helper()
	msgs, err := s.Range(t.Context(), key, after, limit)
	if err != nil {
		t.Fatalf("Range(%s, %d, %d) error = %v, want nil", key, after, limit, err)
	}
	return msgs
}

// mustSystem calls System, failing the test on an error.
func mustSystem(t *testing.T, s chatmem.Store, key chatmem.Key) []chatmem.Message {
	t.Helper()
	msgs, err := s.System(t.Context(), key)
	if err != nil {
		t.Fatalf("System(%s): %v", key, err)
	}
	return msgs
}

// mustTail reads key's tail and fails the test on an error.
func mustTail(t *testing.T, s chatmem.Store, key chatmem.Key, q chatmem.TailQuery) []chatmem.Message {
	t.Helper()
	msgs, err := s.Tail(t.Context(), key, q)
	if err != nil {
		t.Fatalf("Tail(%s, %+v) error = %v, want nil", key, q, err)
	}
	return msgs
}

// wantErr fails the test unless err wraps target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s error = %v, want %v", what, err, target)
	}
}

// wantNotFound fails the test unless the conversation at key is not found by
// Conversation, Tail, Range and System.
func wantNotFound(t *testing.T, s chatmem.Store, key chatmem.Key) {
	t.Helper()
	ctx := t.Context()
	_, err := s.Conversation(ctx, key)
	wantErr(t, fmt.Sprintf("Conversation(%s)", key), err, chatmem.ErrNotFound)
	_, err = s.Tail(ctx, key, chatmem.TailQuery{Tokens: 1000, Turns: 10})
	wantErr(t, fmt.Sprintf("Tail(%s)", key), err, chatmem.ErrNotFound)
	_, err = s.Range(ctx, key, 0, 0)
	wantErr(t, fmt.Sprintf("Range(%s)", key), err, chatmem.ErrNotFound)
	_, err = s.System(ctx, key)
	wantErr(t, fmt.Sprintf("System(%s)", key), err, chatmem.ErrNotFound)
}

// seqs returns the sequence numbers of msgs.
func seqs(msgs []chatmem.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

// span returns the sequence numbers from..to.
func span(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// wantSeqs fails the test unless msgs have exactly the sequence numbers want.
func wantSeqs(t *testing.T, what string, msgs []chatmem.Message, want ...int64) {
	t.Helper()
	if got := seqs(msgs); !slices.Equal(got, want) {
		t.Errorf("%s seqs = %v, want %v", what, got, want)
	}
}

// diffMessage describes the first difference between got and want, or
// returns "". Times compare with Equal (stores may change the location), nil
// and empty slices and maps are equal.
func diffMessage(got, want chatmem.Message) string {
	switch {
	case got.Seq != want.Seq:
		return fmt.Sprintf("Seq = %d, want %d", got.Seq, want.Seq)
	case got.Role != want.Role:
		return fmt.Sprintf("Role = %q, want %q", got.Role, want.Role)
	case got.Content != want.Content:
		return fmt.Sprintf("Content = %q, want %q", got.Content, want.Content)
	case got.Name != want.Name:
		return fmt.Sprintf("Name = %q, want %q", got.Name, want.Name)
	case got.ToolCallID != want.ToolCallID:
		return fmt.Sprintf("ToolCallID = %q, want %q", got.ToolCallID, want.ToolCallID)
	case got.Tokens != want.Tokens:
		return fmt.Sprintf("Tokens = %d, want %d", got.Tokens, want.Tokens)
	case !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Sprintf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	case !slices.Equal(got.ToolCalls, want.ToolCalls):
		return fmt.Sprintf("ToolCalls = %+v, want %+v", got.ToolCalls, want.ToolCalls)
	case !maps.Equal(got.Metadata, want.Metadata):
		return fmt.Sprintf("Metadata = %v, want %v", got.Metadata, want.Metadata)
	}
	return ""
}

// wantMessages fails the test unless got equals want message by message.
func wantMessages(t *testing.T, what string, got, want []chatmem.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %d messages (seqs %v), want %d (seqs %v)", what, len(got), seqs(got), len(want), seqs(want))
		return
	}
	for i := range got {
		if d := diffMessage(got[i], want[i]); d != "" {
			t.Errorf("%s message %d: %s", what, i, d)
		}
	}
}

// withSeqs returns deep copies of msgs numbered from first, with CreatedAt
// set to now where it is zero: what the store should hold after appending
// them.
func withSeqs(msgs []chatmem.Message, first int64, now time.Time) []chatmem.Message {
	out := make([]chatmem.Message, len(msgs))
	for i, m := range msgs {
		m = m.Clone()
		m.Seq = first + int64(i)
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		out[i] = m
	}
	return out
}

// ptr returns a pointer to v, for AppendOptions.ExpectedLastSeq.
func ptr[T any](v T) *T { return &v }

// endings ends one conversation in each way a conversation can end, and
// brings each ID back: Delete; expiry, with the next append starting the
// conversation afresh before any sweep; Sweep (if the store is a Sweeper);
// and PurgeInactive (if it is a Purger). add gives each conversation what
// the caller checks (a summary, facts) before it ends; gone checks each
// conversation once it has ended, and fresh once one new append has
// brought its ID back.
func endings(t *testing.T, s chatmem.Store, add func(key chatmem.Key), gone, fresh func(how string, key chatmem.Key)) {
	t.Helper()
	const ttl = 100 * time.Millisecond
	ctx := t.Context()
	tenant := randomTenant()
	now := time.Now()
	two := []chatmem.Message{msg(chatmem.RoleUser, "hello", 1), msg(chatmem.RoleAssistant, "hi", 1)}
	sw, sweeps := s.(chatmem.Sweeper)
	p, purges := s.(chatmem.Purger)

	deleted := chatmem.Key{Tenant: tenant, ID: "deleted"}
	expired := chatmem.Key{Tenant: tenant, ID: "expired"}
	swept := chatmem.Key{Tenant: tenant, ID: "swept"}
	purged := chatmem.Key{Tenant: tenant, ID: "purged"}
	mustAppend(t, s, deleted, two, chatmem.AppendOptions{})
	add(deleted)
	res := mustAppend(t, s, expired, two, chatmem.AppendOptions{TTL: ttl})
	add(expired)
	if sweeps {
		res = mustAppend(t, s, swept, two, chatmem.AppendOptions{TTL: ttl})
		add(swept)
	}
	if purges {
		mustAppend(t, s, purged, two, chatmem.AppendOptions{Now: now.Add(-48 * time.Hour)})
		add(purged)
	}
	back := func(how string, key chatmem.Key) {
		t.Helper()
		gone(how, key)
		mustAppend(t, s, key, two, chatmem.AppendOptions{})
		fresh(how, key)
	}

	if err := s.Delete(ctx, deleted); err != nil {
		t.Fatalf("Delete(%s) error = %v, want nil", deleted, err)
	}
	back("Delete", deleted)

	time.Sleep(time.Until(res.Conversation.ExpiresAt) + 50*time.Millisecond)
	// Before any sweep: the append itself must drop what the expired
	// conversation left behind.
	back("expiry", expired)

	if sweeps {
		if n, err := sw.Sweep(ctx, time.Now()); err != nil || n < 1 {
			t.Errorf("Sweep = %d, %v; want >= 1, nil", n, err)
		}
		back("Sweep", swept)
	} else {
		t.Log("store is not a Sweeper")
	}
	if purges {
		if n, err := p.PurgeInactive(ctx, tenant, now.Add(-24*time.Hour)); err != nil || n != 1 {
			t.Errorf("PurgeInactive(%s) = %d, %v; want 1, nil", tenant, n, err)
		}
		back("PurgeInactive", purged)
	} else {
		t.Log("store is not a Purger")
	}
}

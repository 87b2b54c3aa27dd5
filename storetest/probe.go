package storetest

import (
	"errors"
	"math"
	"testing"

	"github.com/chatmem/chatmem"
)

// testIdempotencyProbe checks the lookup the chat proxy makes of an
// idempotency key: an append under the key that expects a LastSeq no
// conversation reaches replays the key's append if it was applied (the key
// is checked before ExpectedLastSeq), and otherwise fails with ErrConflict
// and writes nothing: no conversation created, no message, and the key
// still free for the append that will use it.
func testIdempotencyProbe(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("probe")
	never := int64(math.MaxInt64)
	probe := []chatmem.Message{msg(chatmem.RoleAssistant, "probe", 1)}
	opts := chatmem.AppendOptions{IdempotencyKey: "k1", ExpectedLastSeq: &never}

	_, err := s.Append(t.Context(), key, probe, opts)
	if !errors.Is(err, chatmem.ErrConflict) {
		t.Fatalf("probe of a conversation that does not exist: error = %v, want ErrConflict", err)
	}
	if _, err := s.Conversation(t.Context(), key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Fatalf("after a probe, Conversation = %v, want ErrNotFound (nothing created)", err)
	}

	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "hello", 2)}, chatmem.AppendOptions{})
	if _, err := s.Append(t.Context(), key, probe, opts); !errors.Is(err, chatmem.ErrConflict) {
		t.Fatalf("probe of a key not applied: error = %v, want ErrConflict", err)
	}
	if got := mustConversation(t, s, key).LastSeq; got != 1 {
		t.Fatalf("after a probe, LastSeq = %d, want 1", got)
	}

	turn := []chatmem.Message{msg(chatmem.RoleUser, "order 1", 3), msg(chatmem.RoleAssistant, "ok", 1)}
	orig := mustAppend(t, s, key, turn, chatmem.AppendOptions{IdempotencyKey: "k1"})
	if orig.Replayed {
		t.Fatal("the append after probes of its key was replayed: a probe recorded the key")
	}
	res, err := s.Append(t.Context(), key, probe, opts)
	if err != nil || !res.Replayed {
		t.Fatalf("probe of an applied key: Replayed %v, error %v; want a replay", res.Replayed, err)
	}
	wantMessages(t, "probe of an applied key: Messages", res.Messages, orig.Messages)
	if got := mustConversation(t, s, key).LastSeq; got != 3 {
		t.Errorf("after a replayed probe, LastSeq = %d, want 3", got)
	}
}

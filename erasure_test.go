package chatmem_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memstore"
	"github.com/chatmem/chatmem/tokenizer"
)

// emailExtractor states the email of each user message "my email is X".
type emailExtractor struct{}

func (emailExtractor) Name() string { return "email" }
func (emailExtractor) Extract(ctx context.Context, msgs []chatmem.Message) ([]chatmem.Fact, error) {
	var out []chatmem.Fact
	for _, m := range msgs {
		if v, ok := strings.CutPrefix(m.Content, "my email is "); ok && m.Role == chatmem.RoleUser {
			out = append(out, chatmem.Fact{Key: "email", Value: v, SourceSeq: m.Seq, Confidence: 1})
		}
	}
	return out, nil
}

// erasingStore is a memory store that erases a user once, when the
// extraction reads the user's facts: after the worker checked that the
// conversation exists, before it writes what it extracted.
type erasingStore struct {
	*memstore.Store
	erase func()
}

func (s *erasingStore) UserFacts(ctx context.Context, user chatmem.Key) ([]chatmem.Fact, error) {
	if f := s.erase; f != nil {
		s.erase = nil
		f()
	}
	return s.Store.UserFacts(ctx, user)
}

// Regression: DeleteUser answered, then the worker wrote the user facts
// it had extracted from one of the user's conversations, unconditionally:
// the user's email came back.
func TestErasedUserFactsDoNotComeBackFromTheWorker(t *testing.T) {
	ctx := context.Background()
	st := &erasingStore{Store: memstore.New()}
	mem, err := chatmem.New(st, chatmem.Options{Counter: tokenizer.Estimate{}, Extractors: []chatmem.Extractor{emailExtractor{}}, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	user := chatmem.Key{Tenant: "t", ID: "ana"}
	key := chatmem.Key{Tenant: "t", ID: "c1"}
	erased := false
	st.erase = func() {
		if _, err := mem.DeleteUser(ctx, user); err != nil {
			t.Errorf("DeleteUser = %v", err)
		}
		erased = true
	}
	// Sync: the append runs the extraction before it returns.
	mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "my email is ana@example.com"}}, chatmem.AppendOptions{User: user.ID})
	if !erased {
		t.Fatal("the extraction never read the user's facts: the test does not erase where it means to")
	}
	if facts, err := mem.UserFacts(ctx, user); err != nil || len(facts) != 0 {
		t.Errorf("UserFacts after DeleteUser = %+v, %v; want none", facts, err)
	}
	if p, err := mem.UserConversations(ctx, user, chatmem.PageRequest{}); err != nil || len(p.Conversations) != 0 {
		t.Errorf("UserConversations after DeleteUser = %+v, %v; want none", p.Conversations, err)
	}
}

// Regression: a turn in flight during DeleteUser stored its reply after
// the erasure, and the reply's append re-created the conversation bound
// to the erased user, with what the user had said in the window.
func TestErasedUserIsNotBroughtBackByAReply(t *testing.T) {
	ctx := context.Background()
	mem, err := chatmem.New(memstore.New(), chatmem.Options{Counter: tokenizer.Estimate{}})
	if err != nil {
		t.Fatal(err)
	}
	user := chatmem.Key{Tenant: "t", ID: "ana"}
	key := chatmem.Key{Tenant: "t", ID: "c1"}
	started := mem.Now() // the turn begins
	turn := chatmem.AppendOptions{User: user.ID, Started: started}
	if _, err := mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleUser, Content: "my email is ana@example.com"}}, turn); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.DeleteUser(ctx, user); err != nil { // while the upstream answers
		t.Fatal(err)
	}
	_, err = mem.Append(ctx, key, []chatmem.Message{{Role: chatmem.RoleAssistant, Content: "noted, ana@example.com"}}, turn)
	if !errors.Is(err, chatmem.ErrErased) {
		t.Errorf("the reply's append after DeleteUser = %v, want ErrErased", err)
	}
	if c, err := mem.Store().Conversation(ctx, key); !errors.Is(err, chatmem.ErrNotFound) {
		t.Errorf("Conversation after DeleteUser = %+v, %v; want ErrNotFound", c, err)
	}
	if p, err := mem.UserConversations(ctx, user, chatmem.PageRequest{}); err != nil || len(p.Conversations) != 0 {
		t.Errorf("UserConversations after DeleteUser = %+v, %v; want none", p.Conversations, err)
	}
}

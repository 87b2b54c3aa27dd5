package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/chatmem/chatmem"
)

// receiptTests lists the chatmem.ReceiptStore subtests.
var receiptTests = []subtest{
	{"Stored", testReceiptsStored},
	{"Paged", testReceiptsPaged},
	{"NotFound", testReceiptsNotFound},
	{"Replayed", testReceiptsReplayed},
	{"Deleted", testReceiptsDeleted},
	{"Rewound", testReceiptsRewound},
	{"Erased", testReceiptsErased},
}

// receipt returns a receipt's stored bytes, told apart by n.
func receipt(n int) []byte {
	return fmt.Appendf(nil, `{"policy":{"kind":"token_budget","budget":%d},"sent":[]}`, n)
}

// receipts reads key's receipts after seq after, failing the test on an
// error.
func receipts(t *testing.T, s chatmem.Store, key chatmem.Key, after int64, limit int) []chatmem.StoredReceipt {
	t.Helper()
	rs, err := as[chatmem.ReceiptStore](t, s).Receipts(t.Context(), key, after, limit)
	if err != nil {
		t.Fatalf("Receipts(%s, %d, %d) error = %v, want nil", key, after, limit, err)
	}
	return rs
}

// wantReceipts checks rs against want, receipt(n) at seq for each pair.
func wantReceipts(t *testing.T, what string, rs []chatmem.StoredReceipt, want ...int64) {
	t.Helper()
	if len(rs) != len(want)/2 {
		t.Fatalf("%s: %d receipts, want %d", what, len(rs), len(want)/2)
	}
	for i, r := range rs {
		seq, n := want[2*i], want[2*i+1]
		if r.Seq != seq || !bytes.Equal(r.Data, receipt(int(n))) {
			t.Errorf("%s: receipt %d = seq %d %q, want seq %d %q", what, i, r.Seq, r.Data, seq, receipt(int(n)))
		}
	}
}

// turnWithReceipt appends a user message and a reply carrying receipt(n).
func turnWithReceipt(t *testing.T, s chatmem.Store, key chatmem.Key, n int, opts chatmem.AppendOptions) chatmem.AppendResult {
	t.Helper()
	opts.Receipt = receipt(n)
	return mustAppend(t, s, key, []chatmem.Message{
		msg(chatmem.RoleUser, fmt.Sprintf("question %d", n), 3),
		msg(chatmem.RoleAssistant, fmt.Sprintf("answer %d", n), 3),
	}, opts)
}

// The receipt is stored with the batch's last message, in the append, and
// read back as it was given, by a second process too; appends without one
// store none.
func testReceiptsStored(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("receipts")
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleSystem, "be brief", 2)}, chatmem.AppendOptions{})
	turnWithReceipt(t, s, key, 1, chatmem.AppendOptions{})                                                    // 2, 3
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "no receipt", 2)}, chatmem.AppendOptions{}) // 4
	if ta, ok := s.(chatmem.TailAppender); ok {
		_, _, err := ta.AppendTail(t.Context(), key, []chatmem.Message{msg(chatmem.RoleAssistant, "tail", 2)},
			chatmem.AppendOptions{Receipt: receipt(2)}, chatmem.TailQuery{Turns: 1}) // 5
		if err != nil {
			t.Fatalf("AppendTail with a receipt: %v", err)
		}
	} else {
		mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleAssistant, "tail", 2)}, chatmem.AppendOptions{Receipt: receipt(2)})
	}
	wantReceipts(t, "Receipts", receipts(t, h.reopen(t, s), key, 0, 0), 3, 1, 5, 2)
	if got := mustRange(t, s, key, 2, 1); len(got) != 1 || got[0].Content != "answer 1" {
		t.Errorf("Range(after 2) = %v, want the reply the receipt is stored with", got)
	}
}

// Receipts pages by seq: after and limit as Range takes them.
func testReceiptsPaged(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("receipts-paged")
	for n := 1; n <= 5; n++ {
		turnWithReceipt(t, s, key, n, chatmem.AppendOptions{})
	}
	wantReceipts(t, "first page", receipts(t, s, key, 0, 2), 2, 1, 4, 2)
	wantReceipts(t, "second page", receipts(t, s, key, 4, 2), 6, 3, 8, 4)
	wantReceipts(t, "last page", receipts(t, s, key, 8, 2), 10, 5)
	wantReceipts(t, "past the end", receipts(t, s, key, 10, 2))
	wantReceipts(t, "between", receipts(t, s, key, 5, 0), 6, 3, 8, 4, 10, 5)
}

// A conversation that does not exist, or of another tenant, has no
// receipts to read: ErrNotFound.
func testReceiptsNotFound(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("receipts-missing")
	_, err := as[chatmem.ReceiptStore](t, s).Receipts(t.Context(), key, 0, 10)
	wantErr(t, "Receipts of a missing conversation", err, chatmem.ErrNotFound)
	turnWithReceipt(t, s, key, 1, chatmem.AppendOptions{})
	other := chatmem.Key{Tenant: randomTenant(), ID: key.ID}
	_, err = as[chatmem.ReceiptStore](t, s).Receipts(t.Context(), other, 0, 10)
	wantErr(t, "Receipts of another tenant", err, chatmem.ErrNotFound)
}

// A retried append (its idempotency key applied) writes nothing: the
// receipt stored first stays.
func testReceiptsReplayed(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("receipts-replayed")
	turnWithReceipt(t, s, key, 1, chatmem.AppendOptions{IdempotencyKey: "k"})
	res := turnWithReceipt(t, s, key, 2, chatmem.AppendOptions{IdempotencyKey: "k"})
	if !res.Replayed {
		t.Fatal("the retry was not replayed")
	}
	wantReceipts(t, "after the retry", receipts(t, s, key, 0, 0), 2, 1)
}

// Receipts go with their conversation: a conversation deleted and
// started again has none of the old ones.
func testReceiptsDeleted(t *testing.T, h Harness) {
	s := h.New(t)
	key := randomKey("receipts-deleted")
	turnWithReceipt(t, s, key, 1, chatmem.AppendOptions{})
	if err := s.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	_, err := as[chatmem.ReceiptStore](t, s).Receipts(t.Context(), key, 0, 10)
	wantErr(t, "Receipts after Delete", err, chatmem.ErrNotFound)
	mustAppend(t, s, key, []chatmem.Message{msg(chatmem.RoleUser, "again", 2), msg(chatmem.RoleAssistant, "hello", 2)}, chatmem.AppendOptions{})
	wantReceipts(t, "Receipts of the new conversation", receipts(t, s, key, 0, 0))
}

// A rewind deletes the receipts of the messages it takes back, and keeps
// the others.
func testReceiptsRewound(t *testing.T, h Harness) {
	s := h.New(t)
	rw, ok := s.(chatmem.Rewinder)
	if !ok {
		t.Skip("store does not rewind")
	}
	key := randomKey("receipts-rewound")
	for n := 1; n <= 3; n++ {
		turnWithReceipt(t, s, key, n, chatmem.AppendOptions{})
	}
	if _, err := rw.Rewind(t.Context(), key, 3, 6); err != nil {
		t.Fatal(err)
	}
	wantReceipts(t, "after Rewind to 3", receipts(t, s, key, 0, 0), 2, 1)
	turnWithReceipt(t, s, key, 9, chatmem.AppendOptions{}) // 4, 5
	wantReceipts(t, "after the new branch", receipts(t, h.reopen(t, s), key, 0, 0), 2, 1, 5, 9)
}

// A user's erasure takes the receipts of the user's conversations.
func testReceiptsErased(t *testing.T, h Harness) {
	s := h.New(t)
	us, ok := s.(chatmem.UserStore)
	if !ok {
		t.Skip("store does not bind users")
	}
	key := randomKey("receipts-erased")
	turnWithReceipt(t, s, key, 1, chatmem.AppendOptions{User: "u1"})
	if _, err := us.DeleteUser(t.Context(), chatmem.Key{Tenant: key.Tenant, ID: "u1"}); err != nil {
		t.Fatal(err)
	}
	_, err := as[chatmem.ReceiptStore](t, s).Receipts(t.Context(), key, 0, 10)
	if !errors.Is(err, chatmem.ErrNotFound) {
		t.Fatalf("Receipts after DeleteUser error = %v, want ErrNotFound", err)
	}
	if h.Dump != nil && bytes.Contains(h.Dump(t, s), []byte(`"budget":1}`)) {
		t.Error("the erased user's receipt is still in the backend")
	}
}

package chatmem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/chatmem/chatmem"
)

// TestEncodeReceiptTooLarge: a receipt whose JSON DecodeReceipt would
// refuse is not encoded (ErrTooLarge), so none is stored that cannot be
// read back; without its request frame the same receipt is.
func TestEncodeReceiptTooLarge(t *testing.T) {
	r := &chatmem.Receipt{Request: &chatmem.RequestFrame{Body: `{"tools":"` + strings.Repeat("x", 2<<20) + `"}`}}
	if _, err := chatmem.EncodeReceipt(r); !errors.Is(err, chatmem.ErrTooLarge) {
		t.Fatalf("EncodeReceipt of a 2 MiB frame: %v, want ErrTooLarge", err)
	}
	r.Request = nil
	b, err := chatmem.EncodeReceipt(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chatmem.DecodeReceipt(b); err != nil {
		t.Fatalf("DecodeReceipt: %v", err)
	}
}

package chatmem_test

import (
	"bytes"
	"compress/flate"
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

// TestDecodeReceiptDeflate: receipts stored in the first, DEFLATE form
// still read.
func TestDecodeReceiptDeflate(t *testing.T) {
	j := `{"policy":{"kind":"last_turns","turns":10},"tokenizer":"estimate","tokens":{"pinned":0,"recent":12},"sent":[],"left_out":3,"timings":{"read_us":1,"assembly_us":1}}`
	var buf bytes.Buffer
	buf.WriteByte(1)
	zw, err := flate.NewWriterDict(&buf, flate.BestCompression, chatmem.ReceiptDictionary())
	if err != nil {
		t.Fatal(err)
	}
	zw.Write([]byte(j))
	zw.Close()
	r, err := chatmem.DecodeReceipt(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if r.Policy.Turns != 10 || r.LeftOut != 3 || r.Tokens.Recent != 12 {
		t.Fatalf("read back %+v", r)
	}
	if _, err := chatmem.DecodeReceipt([]byte{2, 0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3}); !errors.Is(err, chatmem.ErrInvalid) {
		t.Fatalf("a broken Zstandard receipt: %v, want ErrInvalid", err)
	}
}

// BenchmarkEncodeReceipt: the stored form of a chat proxy turn's receipt
// (the shape BenchmarkProxyReceipts stores), made once per stored reply.
func BenchmarkEncodeReceipt(b *testing.B) {
	r := &chatmem.Receipt{
		Policy:    chatmem.ReceiptPolicy{Kind: chatmem.PolicyTokenBudget, Budget: 4000},
		Tokenizer: "estimate",
		Tokens:    chatmem.ReceiptTokens{Recent: 944},
		Sent:      []chatmem.SentSpan{{Part: chatmem.PartRecent, From: 1, To: 19, Hash: "46dcf1a275403dd6"}},
		Timings:   chatmem.ReceiptTiming{ReadMicros: 3, AssemblyMicros: 1},
		TailCache: true,
		Upstream: &chatmem.UpstreamUse{Model: "gpt-4o-mini", InputTokens: 42, CachedTokens: 32, OutputTokens: 7,
			ReasoningTokens: 3, RequestID: "req_4d5354324f57564d5737554751475a4f", ChatmemTokens: 944},
		Request: &chatmem.RequestFrame{Body: `{"model":"gpt-4o-mini","temperature":0.2,"messages":}`, At: 52},
	}
	var n int
	for b.Loop() {
		out, err := chatmem.EncodeReceipt(r)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.ReportMetric(float64(n), "bytes")
}

package redis

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/internal/floor/redisfloor"
)

// withSeq does to an encoded record what the append script does.
func withSeq(b []byte, seq string) string {
	return `{"seq":` + seq + `,` + string(b[1:])
}

var codecCases = []chatmem.Message{
	{Role: chatmem.RoleUser, Content: "hi", Tokens: 2, CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 678901000, time.UTC)},
	{Role: chatmem.RoleSystem, Content: "line\nnext \"quoted\" back\\slash tab\t <html> & \u2028 \x00 nul", Tokens: 0},
	{Role: chatmem.RoleUser, Content: "hi 👋🏽 你好 cafe\u0301 مرحبا \ufeff", Name: "Zoë", Tokens: 5,
		CreatedAt: time.Date(2024, 2, 29, 23, 59, 59, 1, time.FixedZone("", -7*3600-30*60)),
		Metadata:  map[string]string{"città": "東京 🗼", "empty": "", "q\"k": "v\\"}},
	{Role: chatmem.RoleAssistant, Tokens: 31, ToolCalls: []chatmem.ToolCall{
		{ID: "call_1", Type: "function", Function: chatmem.FunctionCall{Name: "lookup", Arguments: `{"id":"A-17","n":[1,{"x":"]}"}]}`}},
		{ID: "call_2", Type: "function", Function: chatmem.FunctionCall{Name: "f", Arguments: "{}"}},
	}},
	{Role: chatmem.RoleTool, Content: `{"status":"shipped"}`, ToolCallID: "call_1", Tokens: 8},
	{Role: chatmem.RoleUser, Content: "invalid \xff utf-8 becomes U+FFFD", Tokens: 1},
	{Role: chatmem.RoleUser, Content: strings.Repeat("日本語 ", 1000), Tokens: min(1<<40, math.MaxInt)},
}

// TestCodec checks that the scanner and encoding/json decode every record
// alike, and that the scanner (not the fallback) handles what the store
// writes.
func TestCodec(t *testing.T) {
	for i, m := range codecCases {
		b, err := encodeRecord(m)
		if err != nil {
			t.Fatal(err)
		}
		s := withSeq(b, "12345")
		got, err := decodeRecord(s)
		if err != nil {
			t.Fatalf("case %d: decodeRecord(%s): %v", i, s, err)
		}
		var want record
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if w := fromRecord(want); !reflect.DeepEqual(got, w) {
			t.Errorf("case %d: decodeRecord =\n%#v\nencoding/json =\n%#v", i, got, w)
		}
		if got.Seq != 12345 {
			t.Errorf("case %d: Seq = %d", i, got.Seq)
		}
		if _, ok := scanRecord(s); !ok && !strings.Contains(m.Content, "\xff") {
			t.Errorf("case %d: the scanner fell back to encoding/json on %s", i, s)
		}
	}
}

func fromRecord(r record) chatmem.Message {
	return chatmem.Message{
		Seq: r.Seq, Role: r.Role, Content: r.Content, Name: r.Name, ToolCalls: r.ToolCalls,
		ToolCallID: r.ToolCallID, Tokens: r.Tokens, CreatedAt: r.CreatedAt, Metadata: r.Metadata,
	}
}

// FuzzScanRecord checks that whenever the scanner accepts an input,
// encoding/json accepts it too and decodes the same message.
func FuzzScanRecord(f *testing.F) {
	for _, m := range codecCases {
		b, _ := encodeRecord(m)
		f.Add(withSeq(b, "7"))
	}
	for _, s := range []string{`{}`, `{"seq":01}`, `{"role":"\ud83d\ude00\ud800"}`, `{"metadata":{"a":"b"},"metadata":{"c":"d"}}`,
		`{"content":"a\u0000\/b"}`, `{"tokens":-0}`, `{"created_at":"2025-01-02T03:04:05+25:00"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := scanRecord(s)
		if !ok {
			return
		}
		var r record
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("scanner accepted %q, encoding/json refuses it: %v", s, err)
		}
		if want := fromRecord(r); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: scanner =\n%#v\nencoding/json =\n%#v", s, got, want)
		}
	})
}

// TestEncodeRecord checks that encodeRecord writes what encoding/json
// writes for the record.
func TestEncodeRecord(t *testing.T) {
	cases := append([]chatmem.Message{
		{Role: chatmem.RoleUser, Content: "\x7f\b\f\x1f<>&\u2029 \xe2\x80 \xed\xa0\x80", Name: "a\"b", ToolCallID: "\\",
			CreatedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{Role: chatmem.RoleUser, Content: "x", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Role: chatmem.RoleUser, Content: "x", CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("", 0))},
		{Role: chatmem.RoleUser, Content: "x", CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))},
		{Role: "", Tokens: -3},
	}, codecCases...)
	for i, m := range cases {
		checkEncodeRecord(t, i, m)
	}
}

func checkEncodeRecord(t *testing.T, i int, m chatmem.Message) {
	t.Helper()
	got, err := encodeRecord(m)
	want, werr := jsonRecord(m)
	if (err == nil) != (werr == nil) || string(got) != string(want) {
		t.Errorf("case %d: encodeRecord = %s, %v; encoding/json = %s, %v", i, got, err, want, werr)
	}
}

// TestFloorRecord checks that the turn floor's records (redisfloor) are
// the store's, byte for byte, so that the floor stores and reads what the
// store's turn does.
func TestFloorRecord(t *testing.T) {
	for i, m := range []chatmem.Message{
		{Role: chatmem.RoleUser, Content: "What is the capital of France?", Tokens: 7},
		{Role: chatmem.RoleAssistant, Content: "\"quoted\" <b> & \u2028 \x00 \xff", Tokens: 0},
		{Role: chatmem.RoleUser, Tokens: 3},
	} {
		want, err := encodeRecord(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := redisfloor.Record([]byte("x"), m.Role, m.Content, m.Tokens); string(got) != "x"+string(want) {
			t.Errorf("case %d: redisfloor.Record = %s, want x%s", i, got, want)
		}
	}
}

// FuzzEncodeRecord checks encodeRecord against encoding/json on any text.
func FuzzEncodeRecord(f *testing.F) {
	for _, m := range codecCases {
		f.Add(m.Content, m.Name, int64(m.Tokens), m.CreatedAt.UnixNano())
	}
	f.Fuzz(func(t *testing.T, content, name string, tokens, nanos int64) {
		checkEncodeRecord(t, 0, chatmem.Message{Role: chatmem.RoleUser, Content: content, Name: name, ToolCallID: content,
			Tokens: int(tokens), CreatedAt: time.Unix(0, nanos).UTC()})
	})
}

// TestEncodeRecordAt checks that a record encoded with its seq is the one
// the append script makes of the record without it.
func TestEncodeRecordAt(t *testing.T) {
	for i, m := range append(codecCases, chatmem.Message{Role: chatmem.RoleUser, Content: "x",
		CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3600))}) {
		b, err := encodeRecord(m)
		if err != nil {
			t.Fatal(err)
		}
		at, err := encodeRecordAt(12345, m)
		if err != nil {
			t.Fatal(err)
		}
		if want := withSeq(b, "12345"); string(at) != want {
			t.Errorf("case %d: encodeRecordAt = %s, want %s", i, at, want)
		}
	}
}

// FuzzParseUTC checks that whatever parseUTC accepts, time's JSON parser
// reads as the same time.
func FuzzParseUTC(f *testing.F) {
	for _, s := range []string{"2025-01-02T03:04:05.678901Z", "2024-02-29T23:59:59Z", "2023-02-29T00:00:00Z",
		"0000-01-01T00:00:00.1Z", "2025-13-01T00:00:00Z", "2025-01-01T24:00:00Z", "2025-01-01T00:00:60Z",
		"2025-01-01T00:00:00.Z", "2025-01-01T00:00:00.1234567890Z", "2025-01-01T00:00:00+01:00", "2025-00-10T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseUTC(s)
		if !ok {
			return
		}
		var want time.Time
		if err := want.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
			t.Fatalf("parseUTC accepted %q, time refuses it: %v", s, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: parseUTC = %v, time = %v", s, got, want)
		}
	})
}

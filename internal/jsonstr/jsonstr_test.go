package jsonstr

import (
	"encoding/json"
	"testing"
)

// FuzzAppend checks Append against encoding/json's quoting of any string:
// control characters, HTML characters, U+2028/2029 and invalid UTF-8.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\b\f\n\r\t\x00\x1f\x7f", "<a href='x'>&amp;</a>", "\u2028\u2029", "\xff\xfe bad", "héllo wörld 日本", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Append([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("Append(%q) = %s, want %s", s, got[1:], want)
		}
	})
}

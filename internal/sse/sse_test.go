package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// event is an Event copied out of the Reader's buffers.
type event struct{ raw, data string }

// readAll reads every event of r with a limit of max, and the error that
// ended the stream (nil for io.EOF).
func readAll(r io.Reader, max int) ([]event, error) {
	rd := NewReader(r, max)
	var out []event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, event{string(ev.Raw), string(ev.Data)})
	}
}

// reference splits a whole stream into events the simplest way: lines by
// "\n", a blank line ("\n" or "\r\n") ending an event.
func reference(s string) []event {
	var out []event
	var cur event
	var data []string
	open := false
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		line := s
		if i >= 0 {
			line = s[:i+1]
		}
		s = s[len(line):]
		cur.raw += line
		open = true
		text := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if text == "" && strings.HasSuffix(line, "\n") {
			cur.data = strings.Join(data, "\n")
			out = append(out, cur)
			cur, data, open = event{}, nil, false
			continue
		}
		if v, ok := strings.CutPrefix(text, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
	if open {
		cur.data = strings.Join(data, "\n")
		out = append(out, cur)
	}
	return out
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []event
	}{
		{"empty", "", nil},
		{"one", "data: {}\n\n", []event{{"data: {}\n\n", "{}"}}},
		{"no space", "data:{}\n\n", []event{{"data:{}\n\n", "{}"}}},
		{"two spaces", "data:  x\n\n", []event{{"data:  x\n\n", " x"}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []event{{"data: a\r\n\r\n", "a"}, {"data: b\r\n\r\n", "b"}}},
		{"named", "event: ping\ndata: {\"type\":\"ping\"}\n\n", []event{{"event: ping\ndata: {\"type\":\"ping\"}\n\n", `{"type":"ping"}`}}},
		{"several data fields", "data: a\n: comment\ndata:\ndata: c\n\n", []event{{"data: a\n: comment\ndata:\ndata: c\n\n", "a\n\nc"}}},
		{"comment only", ": keep-alive\n\n", []event{{": keep-alive\n\n", ""}}},
		{"blank lines", "\n\ndata: x\n\n", []event{{"\n", ""}, {"\n", ""}, {"data: x\n\n", "x"}}},
		{"no blank line at the end", "data: a\n\ndata: [DONE]\n", []event{{"data: a\n\n", "a"}, {"data: [DONE]\n", "[DONE]"}}},
		{"no newline at the end", "data: [DONE]", []event{{"data: [DONE]", "[DONE]"}}},
		{"lone cr", "data: a\rb\n\n", []event{{"data: a\rb\n\n", "a\rb"}}},
		{"not data", "datax: 1\nid: 2\n\n", []event{{"datax: 1\nid: 2\n\n", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := readAll(r, 0)
				if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("events of %q = %q, %v; want %q", tc.in, got, err, tc.want)
				}
			}
			if ref := reference(tc.in); fmt.Sprint(ref) != fmt.Sprint(tc.want) {
				t.Errorf("reference(%q) = %q, want %q", tc.in, ref, tc.want)
			}
		})
	}
}

// eventSizes are the sizes of data the tests send in one event: small,
// around the read buffer's size and its multiples, and several MiB.
var eventSizes = []int{0, 1, 100, readSize - 9, readSize - 8, readSize - 7, readSize - 1, readSize, readSize + 1,
	2*readSize - 8, 2 * readSize, 65536 + 1, 300000, 1 << 20, 3 << 20, 3<<20 + 17}

// TestReaderSizes: an event of any size up to the limit comes out whole,
// byte for byte, between small ones, whether the stream arrives in one
// piece, byte by byte or in halves.
func TestReaderSizes(t *testing.T) {
	for _, n := range eventSizes {
		payload := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), n/36+1)[:n]
		big := "data: " + string(payload) + "\n\n"
		in := "data: first\n\n" + big + ": comment\n\n" + "data: [DONE]\n\n"
		want := []event{{"data: first\n\n", "first"}, {big, string(payload)}, {": comment\n\n", ""}, {"data: [DONE]\n\n", "[DONE]"}}
		readers := map[string]io.Reader{"whole": strings.NewReader(in), "halves": iotest.HalfReader(strings.NewReader(in))}
		if n <= 2*readSize {
			readers["bytes"] = iotest.OneByteReader(strings.NewReader(in))
		}
		for name, r := range readers {
			got, err := readAll(r, 0)
			if err != nil || len(got) != len(want) {
				t.Fatalf("size %d, %s: %d events, %v; want %d", n, name, len(got), err, len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("size %d, %s: event %d is %d bytes (data %d), want %d (data %d)", n, name, i, len(got[i].raw), len(got[i].data), len(want[i].raw), len(want[i].data))
				}
			}
		}
	}
}

// TestReaderLimit: an event of exactly the limit is read; one byte more
// is ErrEventTooLarge, from then on, and nothing of it is returned.
func TestReaderLimit(t *testing.T) {
	for _, limit := range []int{16, readSize, readSize + 5, 3 * readSize} {
		exact := "data: " + strings.Repeat("x", limit-8) + "\n\n"
		got, err := readAll(strings.NewReader("data: a\n\n"+exact), limit)
		if err != nil || len(got) != 2 || got[1].raw != exact {
			t.Errorf("limit %d: an event of the limit: %d events, %v", limit, len(got), err)
		}
		over := "data: " + strings.Repeat("x", limit-7) + "\n\n"
		rd := NewReader(strings.NewReader("data: a\n\n"+over+"data: b\n\n"), limit)
		if ev, err := rd.Next(); err != nil || string(ev.Data) != "a" {
			t.Errorf("limit %d: first event %q, %v", limit, ev.Data, err)
		}
		for range 2 {
			if ev, err := rd.Next(); !errors.Is(err, ErrEventTooLarge) || ev.Raw != nil {
				t.Errorf("limit %d: an event one byte over: %q, %v; want ErrEventTooLarge", limit, ev.Raw, err)
			}
		}
	}
	if _, err := readAll(strings.NewReader("data: "+strings.Repeat("x", MaxEventBytes)), 0); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("an event over MaxEventBytes: %v, want ErrEventTooLarge", err)
	}
}

// TestReaderError: a read that fails mid-event returns its error, not the
// part of the event read.
func TestReaderError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	got, err := readAll(r, 0)
	if !errors.Is(err, boom) || len(got) != 1 || got[0].data != "a" {
		t.Errorf("events %q, %v; want the first and %v", got, err, boom)
	}
}

// FuzzReader: over any bytes, read whole or byte by byte, the events are
// the reference's, and their raw bytes put together are the input.
func FuzzReader(f *testing.F) {
	for _, s := range []string{"", "data: {}\n\n", "data: a\r\n\r\ndata: [DONE]", ":x\n\nevent: e\ndata: 1\ndata: 2\n\n\n", "data:\r\r\n\n", "\r\n\r\n\n"} {
		f.Add([]byte(s), uint16(0))
	}
	f.Add(bytes.Repeat([]byte("data: x\n"), 5000), uint16(100))
	f.Fuzz(func(t *testing.T, in []byte, limit uint16) {
		want := reference(string(in))
		for _, r := range []io.Reader{bytes.NewReader(in), iotest.OneByteReader(bytes.NewReader(in))} {
			got, err := readAll(r, int(limit))
			if limit > 0 {
				// Under a limit, the events before the first over it are
				// the reference's, and then the error.
				n := 0
				for n < len(want) && len(want[n].raw) <= int(limit) {
					n++
				}
				if n < len(want) && !errors.Is(err, ErrEventTooLarge) {
					t.Fatalf("limit %d: %v, want ErrEventTooLarge at event %d", limit, err, n)
				}
				want = want[:n]
			} else if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
				t.Fatalf("events of %q =\n%q\nwant\n%q", in, got, want)
			}
			var raw strings.Builder
			for _, ev := range got {
				raw.WriteString(ev.raw)
			}
			if limit == 0 && raw.String() != string(in) {
				t.Fatalf("the events' bytes are not the input")
			}
		}
	})
}

// Package sse reads the server-sent events of an upstream model stream
// (OpenAI chat completions, Anthropic Messages, the Responses API) one
// whole event at a time, of any size up to a limit.
//
// Every reader of an upstream stream in chatmem goes through Reader, so
// that none of them gets long lines wrong: a reader built on
// bufio.Reader.ReadSlice has to copy a line's first part before it reads
// the rest, since the rest overwrites the buffer the first part is in, and
// a bufio.Scanner fails on a line over its buffer. Reader copies each line
// into an event buffer of its own as it reads it, so an event's bytes are
// never a view into the bufio buffer, whatever their size.
//
// Lines end with "\n" or "\r\n" (a lone "\r" is kept as part of the line:
// no model API ends lines with it). A blank line ends an event.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxEventBytes is the default limit on one event's bytes, its line
// endings and the blank line that ends it included: 8 MiB. Model servers
// send a few tokens per event, but some send a whole reply in one; 128k
// output tokens are about 512 KiB of text, and JSON's escapes (\u0000 is
// six bytes for one) can make that 3 MiB. The limit bounds what one
// stream holds in memory; a stream with a larger event is broken.
const MaxEventBytes = 8 << 20

// ErrEventTooLarge is returned by Reader.Next for an event over the
// reader's limit.
var ErrEventTooLarge = errors.New("sse: event too large")

// readSize is the size of the buffer the stream is read through. An event
// larger than it is assembled from several reads, which the tests exercise
// at and around this size.
const readSize = 32 << 10

// Event is one server-sent event. Its slices belong to the Reader and are
// valid until the next call to Next: copy what must outlive it.
type Event struct {
	// Raw is the event as it came: its lines with their line endings and
	// the blank line that ends it, which is missing only from an event the
	// stream ended in.
	Raw []byte
	// Data is the event's data: the values of its data fields (the text
	// after "data:" and one optional space), joined with "\n" when there
	// are several. Empty if the event has no data field or only empty
	// ones.
	Data []byte
}

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	rd  *bufio.Reader
	max int
	raw []byte // the current event's bytes, reused from event to event
	// data holds the current event's data when it has several data
	// fields; with one, Event.Data is a slice of raw.
	data []byte
	err  error // sticky: once set, every Next returns it
}

// NewReader returns a Reader of r's events, each limited to max bytes;
// max <= 0 means MaxEventBytes.
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = MaxEventBytes
	}
	return &Reader{rd: bufio.NewReaderSize(r, readSize), max: max}
}

// Next returns the stream's next event. At the end of the stream it
// returns io.EOF; an event the stream ended in without its blank line is
// returned first, with a nil error. An event over the limit is
// ErrEventTooLarge (wrapped, with the limit), and a read that fails
// returns its error, the event it was in dropped. Every error is final:
// the Reader returns it from then on.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	r.raw = r.raw[:0]
	// With one data field the data is raw[from:to]; offsets, since raw
	// may move as the event's later lines are appended.
	from, to, fields := 0, 0, 0
	for {
		start := len(r.raw)
		err := r.readLine()
		if err != nil && (err != io.EOF || len(r.raw) == 0) {
			r.err = err
			return Event{}, err
		}
		line := r.raw[start:]
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 && err == nil {
			break // the blank line
		}
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			v = bytes.TrimPrefix(v, []byte(" "))
			switch fields++; fields {
			case 1:
				to = start + len(line)
				from = to - len(v)
			case 2:
				r.data = append(append(append(r.data[:0], r.raw[from:to]...), '\n'), v...)
			default:
				r.data = append(append(r.data, '\n'), v...)
			}
		}
		if err != nil {
			r.err = err // io.EOF, after this last event
			break
		}
	}
	ev := Event{Raw: r.raw, Data: r.raw[from:to]}
	if fields > 1 {
		ev.Data = r.data
	}
	return ev, nil
}

// readLine appends the next line to r.raw, its line ending included. At
// the end of the stream it returns io.EOF with what there was of a last
// line appended. Over the limit it returns ErrEventTooLarge.
func (r *Reader) readLine() error {
	for {
		frag, err := r.rd.ReadSlice('\n')
		if len(r.raw)+len(frag) > r.max {
			return fmt.Errorf("%w: over %d bytes", ErrEventTooLarge, r.max)
		}
		// frag is a view into the bufio buffer that the next read
		// overwrites: it is copied before anything else is read.
		r.raw = append(r.raw, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
	}
}

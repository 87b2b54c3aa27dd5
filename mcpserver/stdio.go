package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// IOTransport is an mcp.Transport of newline-delimited JSON-RPC messages
// over a reader and a writer, as a client that starts `chatmem mcp` speaks
// over its stdin and stdout. It is the SDK's mcp.IOTransport with each
// line screened before the SDK reads it. The SDK's own ends the session at
// the first line it cannot decode, and with it the answers to the requests
// still in flight; this one answers such a line and goes on:
//   - a line that is not one JSON value: -32700 (parse error), ID null;
//   - a message with invalid UTF-8 or a lone surrogate escape: a tools/call
//     is answered with a tool error, another request with -32602 (invalid
//     params), a notification not at all, as over HTTP (see screenHTTP);
//   - JSON that is not a JSON-RPC message or batch: -32600 (invalid
//     request), with the message's ID when it has one;
//   - a batch once an initialize asked for 2025-06-18 or later, versions
//     without batches: -32600, ID null.
//
// Blank lines are skipped. The answers may come before those of requests
// sent earlier, as any two answers may.
type IOTransport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// Logger receives a line for each message refused. Nil: discarded.
	Logger *slog.Logger
	// MaxLineBytes bounds one line: a longer one is skipped and answered
	// -32600, ID null. Zero means mcp.DefaultMaxLineLength.
	MaxLineBytes int
}

// Connect implements mcp.Transport.
func (t *IOTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	log := t.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limit := t.MaxLineBytes
	if limit <= 0 {
		limit = mcp.DefaultMaxLineLength
	}
	w := &lockedWriter{w: t.Writer}
	r := &screenReader{src: bufio.NewReader(t.Reader), closer: t.Reader, replies: w, log: log, limit: limit}
	// The lines the SDK gets are each one JSON value within limit, so its
	// own cap on a frame is not needed.
	return (&mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: -1}).Connect(ctx)
}

// lockedWriter is the transport's writer, shared by the SDK's answers and
// the screen's, each written whole by one Write.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// screenReader is the reader the SDK's transport decodes: the lines of src
// that screen passes, each with its newline. It answers the others itself,
// from the SDK's reading goroutine, the one that calls Read.
type screenReader struct {
	src     *bufio.Reader
	closer  io.Closer
	replies io.Writer
	log     *slog.Logger
	limit   int
	pending []byte // the rest of the line being read by the SDK
	// noBatches is set once an initialize asks for a protocol version
	// without batches: the SDK ends the session at a batch then.
	noBatches bool
	err       error // src's error, given once the lines before it are
}

func (r *screenReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		line, tooLong, err := r.readLine()
		r.err = err
		if tooLong {
			why := fmt.Errorf("invalid request: a line over %d bytes", r.limit)
			r.answer(encode(&jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: why.Error()}}), why)
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		reply, pass, why := screen(line)
		if pass && line[0] == '[' && r.noBatches {
			why = fmt.Errorf("invalid request: JSON-RPC batches are not supported in MCP 2025-06-18 and later")
			reply = encode(&jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: why.Error()}})
			pass = false
		}
		if pass {
			r.noBatches = r.noBatches || !batchesAllowed(line)
			r.pending = append(line, '\n')
			break
		}
		r.answer(reply, why)
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// answer writes reply, if any, for a line refused for why. A failed write
// ends the reading, as it ends the SDK's.
func (r *screenReader) answer(reply []byte, why error) {
	r.log.Warn("mcp message refused", "transport", "stdio", "err", why, "answered", reply != nil)
	if reply == nil {
		return
	}
	if _, err := r.replies.Write(append(reply, '\n')); err != nil && r.err == nil {
		r.err = err
	}
}

// readLine returns the next line of src without its newline, or tooLong
// for a line over limit bytes, which it skips. err is src's, io.EOF at the
// end, returned with the last line when that has no newline.
func (r *screenReader) readLine() (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.src.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			// Room for the "\r\n" that ends a line of limit bytes.
			if len(line) > r.limit+2 {
				tooLong, line = true, nil
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) > r.limit {
			tooLong, line = true, nil
		}
		return line, tooLong, err
	}
}

func (r *screenReader) Close() error { return r.closer.Close() }

// batchesAllowed reports whether the message or batch b, passed to the SDK,
// leaves batches allowed: false if it holds an initialize that asks for a
// protocol version the SDK would negotiate as 2025-06-18 or later, which
// have none (an unsupported version negotiates the latest).
func batchesAllowed(b []byte) bool {
	var msgs []json.RawMessage // not b's array: Unmarshal writes into its elements
	if b[0] != '[' {
		msgs = []json.RawMessage{b}
	} else if json.Unmarshal(b, &msgs) != nil {
		return true
	}
	for _, m := range msgs {
		var init struct {
			Method string `json:"method"`
			Params *struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(m, &init) != nil || init.Method != "initialize" || init.Params == nil {
			continue
		}
		v := init.Params.ProtocolVersion
		if !slices.Contains(mcp.SupportedProtocolVersions(), v) || v >= "2025-06-18" {
			return false
		}
	}
	return true
}

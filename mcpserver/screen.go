package mcpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/chatmem/chatmem"
)

// A message is screened on its raw bytes before the SDK decodes it: the
// SDK's JSON decoder, like encoding/json, silently turns invalid UTF-8 and
// \u escapes of lone surrogates into U+FFFD, so a tool would store text
// other than what was sent, where the REST API refuses it (400). A refused
// message reaches no handler, so nothing is stored.
//
// A refused request is answered as the SDK answers bad params: tools/call
// with a tool result whose isError is set (as a tool's bad arguments are,
// so the model can correct its call), any other method with -32602
// (invalid params). Both carry the request's ID and name the problem and
// its byte offset. A notification or a response has no answer in JSON-RPC:
// it is dropped (and logged). On stdio, a line that is not JSON is answered
// with -32700 (parse error) and one that is not a JSON-RPC message with
// -32600 (invalid request); over HTTP the SDK answers those with 400.

// screen returns what to answer b, one line of stdio (a JSON-RPC message
// or a batch of them), or pass true when the SDK is to have it. reply is
// nil for a message that has no answer. why says what was wrong, for the
// log.
func screen(b []byte) (reply []byte, pass bool, why error) {
	if !json.Valid(b) {
		var v json.RawMessage
		err := json.Unmarshal(b, &v)
		if err == nil {
			err = fmt.Errorf("not one JSON value") // json.Valid and Unmarshal disagree: cannot happen
		}
		why = fmt.Errorf("parse error: the line is not one JSON value: %w", err)
		return encode(&jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: why.Error()}}), false, why
	}
	if err := chatmem.CheckJSONText(b); err != nil {
		reply, _ = refuseText(b, err)
		return reply, false, err
	}
	if err := decodable(b); err != nil {
		why = fmt.Errorf("invalid request: %w", err)
		id, _ := requestID(b)
		return encode(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: why.Error()}}), false, why
	}
	return nil, true, nil
}

// decodable reports why the SDK could not decode b, a JSON value with no
// space before it, as a JSON-RPC message or a batch of them, if it could
// not: the SDK ends the session on such a message instead of answering
// it. It decodes as the SDK's transports do.
func decodable(b []byte) error {
	var batch []json.RawMessage
	if b[0] == '[' && json.Unmarshal(b, &batch) == nil {
		if len(batch) == 0 {
			return fmt.Errorf("an empty batch")
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return fmt.Errorf("in a batch: %w", err)
			}
		}
		return nil
	}
	_, err := jsonrpc.DecodeMessage(b)
	return err
}

// refuseText returns the answer to b, a JSON-RPC message or a batch of
// them that CheckJSONText refused with err: a call is answered, each call
// of a batch is, in an array (nil when b holds no call). calls reports
// whether b held a call.
func refuseText(b []byte, err error) (reply []byte, calls bool) {
	text := "request refused, nothing was done: " + err.Error()
	var batch []json.RawMessage
	if json.Unmarshal(b, &batch) != nil {
		r := refusal(b, text)
		if r == nil {
			return nil, false
		}
		return encode(r), true
	}
	var out []json.RawMessage
	for _, m := range batch {
		if r := refusal(m, text); r != nil {
			out = append(out, encode(r))
		}
	}
	if len(out) == 0 {
		return nil, false
	}
	reply, merr := json.Marshal(out)
	if merr != nil {
		return nil, false // the parts are JSON the SDK encoded: cannot happen
	}
	return reply, true
}

// refusal is the answer to the call b, refused for text, or nil when b is
// not a call.
func refusal(b []byte, text string) *jsonrpc.Response {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	rawMethod, hasMethod := m["method"]
	id, hasID := requestID(b)
	if !hasMethod || !hasID {
		return nil
	}
	var method string
	_ = json.Unmarshal(rawMethod, &method) // a method that is no string is not tools/call
	if method != "tools/call" {
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params: " + text}}
	}
	res, err := json.Marshal(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true})
	if err != nil {
		return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}}
	}
	return &jsonrpc.Response{ID: id, Result: res}
}

// requestID returns the ID of the message b, if it has one that is not
// null. The ID is the zero ID (null on the wire) when it is there but
// cannot be echoed as it came: not a string or a number, or holding text
// CheckJSONText refuses.
func requestID(b []byte) (id jsonrpc.ID, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return jsonrpc.ID{}, false
	}
	raw, ok := m["id"]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return jsonrpc.ID{}, false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil || chatmem.CheckJSONText(raw) != nil {
		return jsonrpc.ID{}, true
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return jsonrpc.ID{}, true
	}
	return id, true
}

// encode is the wire form of r, which the SDK's types always have.
func encode(r *jsonrpc.Response) []byte {
	b, err := jsonrpc.EncodeMessage(r)
	if err != nil {
		// An error response of ours: a code and a string. Cannot happen.
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return b
}

// screenHTTP returns next with each POST body screened for its text before
// the SDK decodes it. A refused call is answered 200 with its JSON-RPC
// answer, as the SDK answers with JSON; a body with no call in it is
// refused 400 with a JSON-RPC error of ID null, as the transport's spec
// has an input the server does not accept refused. Any other body, and a
// body that is not JSON at all or over limit bytes, goes on to next, which
// answers those itself (400, 413).
func screenHTTP(next http.Handler, limit int64, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body := r.Body
		if limit > 0 {
			body = http.MaxBytesReader(w, body, limit)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			// next reads the same bytes and then the same error, and
			// answers it as it answers its own (413 over the limit).
			r.Body = replay{Reader: io.MultiReader(bytes.NewReader(b), body), Closer: body}
			next.ServeHTTP(w, r)
			return
		}
		r.Body = replay{Reader: bytes.NewReader(b), Closer: body}
		cerr := chatmem.CheckJSONText(b)
		if cerr == nil || !json.Valid(b) {
			next.ServeHTTP(w, r)
			return
		}
		log.Warn("mcp message refused", "transport", "http", "err", cerr)
		w.Header().Set("Content-Type", "application/json")
		reply, calls := refuseText(b, cerr)
		if !calls {
			w.WriteHeader(http.StatusBadRequest)
			reply = encode(&jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: "invalid params: request refused, nothing was done: " + cerr.Error()}})
		}
		w.Write(reply)
	})
}

// replay is a request body read once and handed on: its reader gives the
// bytes read, its closer closes the original body.
type replay struct {
	io.Reader
	io.Closer
}

package transfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/chatmem/chatmem"
)

// OpenAIConversation is one conversation of the OpenAI-style format: an ID
// and messages with only role, content, name, tool_calls and
// tool_call_id. It is lossy: no sequence numbers, times, token counts,
// metadata, summary or facts. Files of it hold one conversation per line,
// or are one JSON array of messages (a single conversation).
type OpenAIConversation struct {
	ID       string            `json:"id"`
	Messages []chatmem.Message `json:"messages"`
}

// openAIMessage strips m to what the OpenAI format carries.
func openAIMessage(m chatmem.Message) chatmem.Message {
	return chatmem.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
}

// OpenAIExportOptions select what ExportOpenAI writes.
type OpenAIExportOptions struct {
	// IDs, if set, are the conversations to export; otherwise all of the
	// tenant's, ordered by ID.
	IDs []string
	// Window, if set, chooses each conversation's messages (a policy's
	// window, say); otherwise every message is written.
	Window func(ctx context.Context, key chatmem.Key) ([]chatmem.Message, error)
}

// ExportOpenAI writes the tenant's conversations as OpenAI-style lines,
// {"id":...,"messages":[...]}. Without a Window it streams each
// conversation's messages a page at a time.
func ExportOpenAI(ctx context.Context, st chatmem.Store, tenant string, w io.Writer, opts OpenAIExportOptions) error {
	if err := chatmem.ValidateID(tenant); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	one := func(id string) error {
		key := chatmem.Key{Tenant: tenant, ID: id}
		idJSON, _ := json.Marshal(id)
		if _, err := fmt.Fprintf(w, `{"id":%s,"messages":[`, idJSON); err != nil {
			return err
		}
		first := true
		put := func(m chatmem.Message) error {
			b, err := marshalLine(newMessageRecord("", openAIMessage(m)))
			if err != nil {
				return err
			}
			if !first {
				b = append([]byte{','}, b...)
			}
			first = false
			_, err = w.Write(b)
			return err
		}
		if opts.Window != nil {
			msgs, err := opts.Window(ctx, key)
			if err != nil {
				return fmt.Errorf("window of %s: %w", key, err)
			}
			for _, m := range msgs {
				if err := put(m); err != nil {
					return err
				}
			}
		} else {
			conv, err := st.Conversation(ctx, key)
			if err != nil {
				return err
			}
			for n := int64(0); n < conv.LastSeq; {
				msgs, err := st.Range(ctx, key, n, min(pageSize, int(conv.LastSeq-n)))
				if err != nil || len(msgs) == 0 {
					return fmt.Errorf("messages of %s after %d: %v", key, n, err)
				}
				for _, m := range msgs {
					if err := put(m); err != nil {
						return err
					}
				}
				n = msgs[len(msgs)-1].Seq
			}
		}
		_, err := io.WriteString(w, "]}\n")
		return err
	}
	if opts.IDs != nil {
		for _, id := range opts.IDs {
			if err := one(id); err != nil {
				return err
			}
		}
		return nil
	}
	return eachConversation(ctx, st, tenant, func(c chatmem.Conversation) error { return one(c.Key.ID) })
}

// Appender appends messages it validates and counts itself:
// *chatmem.Memory.
type Appender interface {
	Append(ctx context.Context, key chatmem.Key, msgs []chatmem.Message, opts chatmem.AppendOptions) (chatmem.AppendResult, error)
}

// OpenAIImportOptions qualify ImportOpenAI.
type OpenAIImportOptions struct {
	// ID names the conversation of a file that is one JSON array of
	// messages (required for such a file, ignored otherwise).
	ID string
	// OnConflict is the policy for a conversation stored with other
	// messages. Zero: ConflictSkip.
	OnConflict Conflict
	// MaxLineBytes bounds one line (or the whole array). Zero: 64 MiB.
	MaxLineBytes int
}

// ImportOpenAI reads OpenAI-style transcripts from r, one
// {"id","messages"} object per line or a single JSON array of messages
// (named by opts.ID), and appends each conversation through app, which
// counts the tokens. A conversation that already holds exactly these
// messages is left alone, one that holds a prefix of them gets the rest,
// and one that holds others is a conflict. Each conversation's messages
// are validated as a history before any is written.
func ImportOpenAI(ctx context.Context, app Appender, st chatmem.Store, tenant string, r io.Reader, opts OpenAIImportOptions, each func(Result) error) (Totals, error) {
	var totals Totals
	if err := chatmem.ValidateID(tenant); err != nil {
		return totals, fmt.Errorf("tenant: %w", err)
	}
	if opts.OnConflict == "" {
		opts.OnConflict = ConflictSkip
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = 64 << 20
	}
	br := bufio.NewReaderSize(r, 1<<16)
	first, err := br.Peek(1)
	for err == nil && (first[0] == ' ' || first[0] == '\n' || first[0] == '\r' || first[0] == '\t') {
		br.ReadByte()
		first, err = br.Peek(1)
	}
	if err != nil {
		if err == io.EOF {
			return totals, &LineError{Line: 1, Err: errors.New("empty input")}
		}
		return totals, err
	}
	report := func(res Result) error {
		totals.add(res)
		if each != nil {
			if err := each(res); err != nil {
				return err
			}
		}
		if res.Status == StatusConflict && opts.OnConflict == ConflictFail {
			return fmt.Errorf("%w: conversation %s (line %d): %s", chatmem.ErrConflict, res.Conversation, res.Line, res.Error)
		}
		return nil
	}
	if first[0] == '[' {
		if opts.ID == "" {
			return totals, fmt.Errorf("%w: a file that is one array of messages needs a conversation id", chatmem.ErrInvalid)
		}
		var msgs []chatmem.Message
		data, err := io.ReadAll(io.LimitReader(br, int64(opts.MaxLineBytes)+1))
		if err != nil {
			return totals, err
		}
		if len(data) > opts.MaxLineBytes {
			return totals, &LineError{Line: 1, Err: fmt.Errorf("the array is over %d bytes", opts.MaxLineBytes)}
		}
		if err := json.Unmarshal(data, &msgs); err != nil {
			return totals, &LineError{Line: 1, Err: err}
		}
		res, err := importOpenAIOne(ctx, app, st, tenant, OpenAIConversation{ID: opts.ID, Messages: msgs}, 1, opts.OnConflict)
		if err != nil {
			return totals, err
		}
		return totals, report(res)
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), opts.MaxLineBytes)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var c OpenAIConversation
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&c); err != nil {
			if err := report(Result{Status: StatusInvalid, Line: line, Error: fmt.Sprintf("line %d: %v", line, err)}); err != nil {
				return totals, err
			}
			continue
		}
		res, err := importOpenAIOne(ctx, app, st, tenant, c, line, opts.OnConflict)
		if err != nil {
			return totals, err
		}
		if err := report(res); err != nil {
			return totals, err
		}
	}
	return totals, sc.Err()
}

// importOpenAIOne imports one OpenAI-style conversation.
func importOpenAIOne(ctx context.Context, app Appender, st chatmem.Store, tenant string, c OpenAIConversation, line int, onConflict Conflict) (Result, error) {
	res := Result{Conversation: c.ID, Line: line}
	invalid := func(err error) (Result, error) {
		res.Status, res.Error = StatusInvalid, fmt.Sprintf("line %d: %v", line, err)
		return res, nil
	}
	if err := chatmem.ValidateID(c.ID); err != nil {
		return invalid(fmt.Errorf("conversation id: %w", err))
	}
	if len(c.Messages) == 0 {
		return invalid(errors.New("no messages"))
	}
	msgs := make([]chatmem.Message, len(c.Messages))
	for i, m := range c.Messages {
		msgs[i] = openAIMessage(m)
	}
	if err := chatmem.ValidateHistory(nil, msgs, chatmem.Limits{MaxBatch: -1}); err != nil {
		return invalid(err)
	}
	key := chatmem.Key{Tenant: tenant, ID: c.ID}
	res.Status = StatusCreated
	var from int64
	if conv, err := st.Conversation(ctx, key); err == nil {
		same, err := storedPrefix(ctx, st, key, conv.LastSeq, msgs)
		if err != nil {
			return res, err
		}
		switch {
		case same && conv.LastSeq == int64(len(msgs)):
			res.Status = StatusUnchanged
			return res, nil
		case same:
			res.Status, from = StatusResumed, conv.LastSeq
		case onConflict == ConflictReplace:
			if err := st.Delete(ctx, key); err != nil && !errors.Is(err, chatmem.ErrNotFound) {
				return res, err
			}
			res.Status = StatusReplaced
		default:
			res.Status, res.Error = StatusConflict, fmt.Sprintf("conversation %s exists with other messages", c.ID)
			return res, nil
		}
	} else if !errors.Is(err, chatmem.ErrNotFound) {
		return res, err
	}
	for i := from; i < int64(len(msgs)); i += batchMessages {
		batch := msgs[i:min(i+batchMessages, int64(len(msgs)))]
		expect := i
		if _, err := app.Append(ctx, key, batch, chatmem.AppendOptions{ExpectedLastSeq: &expect}); err != nil {
			return res, fmt.Errorf("append messages %d..%d to %s: %w", i+1, i+int64(len(batch)), key, err)
		}
		res.Messages += int64(len(batch))
	}
	return res, nil
}

// storedPrefix reports whether the conversation's n stored messages are
// the first n of msgs, as the OpenAI format sees them.
func storedPrefix(ctx context.Context, st chatmem.Store, key chatmem.Key, n int64, msgs []chatmem.Message) (bool, error) {
	if n > int64(len(msgs)) {
		return false, nil
	}
	for after := int64(0); after < n; {
		page, err := st.Range(ctx, key, after, min(pageSize, int(n-after)))
		if err != nil {
			return false, err
		}
		if len(page) == 0 {
			return false, nil
		}
		for _, m := range page {
			a, _ := json.Marshal(openAIMessage(m))
			b, _ := json.Marshal(msgs[m.Seq-1])
			if !bytes.Equal(a, b) {
				return false, nil
			}
		}
		after = page[len(page)-1].Seq
	}
	return true, nil
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/chatmem/chatmem"
)

// The OpenAI-compatible APIs (Conversations, Responses) are mounted under
// openAIPrefix, so that an OpenAI client's base URL is
// http://host/openai/v1 and their routes never meet chatmem's own
// /v1/conversations, whose shapes differ.
const openAIPrefix = "/openai/v1"

// Metadata keys of the messages that hold OpenAI items. A message item, a
// function_call and a function_call_output are plain messages; these keys
// keep what a plain message cannot say.
const (
	// metaItem holds an item chatmem does not model (reasoning, a web
	// search call, ...) as the client sent it: the message that carries it
	// is an assistant message with a placeholder content, never sent to
	// the model.
	metaItem = "openai.item"
	// metaContent holds a message item's content parts as sent, when they
	// are more than one text part.
	metaContent = "openai.content"
	// metaRole is "developer" for a developer message, stored as system.
	metaRole = "openai.role"
	// metaConvMeta marks a system message that holds the conversation's
	// metadata (a JSON object) rather than a prompt; the newest one wins.
	metaConvMeta = "openai.conversation_metadata"
	// metaResponse holds the response record (responseRecord) on the
	// assistant message a response produced.
	metaResponse = "openai.response"
)

// markerContent is the content of the system message that holds the
// conversation's metadata: a message needs content, and this one is never
// sent to the model through these APIs.
const markerContent = " "

// maxItemsPerRequest is OpenAI's limit on the items of a conversation's
// creation and of one items.create.
const maxItemsPerRequest = 20

// hidden reports whether m is not an item: a metadata marker.
func hidden(m chatmem.Message) bool {
	_, ok := m.Metadata[metaConvMeta]
	return ok
}

// upstreamable reports whether m goes to a Chat Completions model: not a
// metadata marker and not an item chatmem does not model.
func upstreamable(m chatmem.Message) bool {
	if hidden(m) {
		return false
	}
	_, raw := m.Metadata[metaItem]
	return !raw
}

// contentPart is a part of a message item's content.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// inputItem is what is read of an input item; raw is the item as sent.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// itemsToMessages turns input items into the messages that store them,
// validated against limits. Consecutive function_call items become one
// assistant message with their tool calls, as Chat Completions wants them.
// With strict, an item type chatmem does not model is refused (it could not
// go to the model); without, it is stored as it came.
func itemsToMessages(raw []json.RawMessage, limits chatmem.Limits, strict bool) ([]chatmem.Message, error) {
	var out []chatmem.Message
	prevCall := false // the last message holds function_call items
	for i, r := range raw {
		var it inputItem
		if err := json.Unmarshal(r, &it); err != nil {
			return nil, fmt.Errorf("%w: input item %d is not an item object", chatmem.ErrInvalid, i)
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		var m chatmem.Message
		isCall := false
		switch it.Type {
		case "message":
			var err error
			if m, err = messageItem(it); err != nil {
				return nil, fmt.Errorf("input item %d: %w", i, err)
			}
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, fmt.Errorf("%w: input item %d: a function_call needs call_id and name", chatmem.ErrInvalid, i)
			}
			tc := chatmem.ToolCall{ID: it.CallID, Type: "function", Function: chatmem.FunctionCall{Name: it.Name, Arguments: it.Arguments}}
			if prevCall {
				last := &out[len(out)-1]
				last.ToolCalls = append(last.ToolCalls, tc)
				if err := last.Validate(limits); err != nil {
					return nil, fmt.Errorf("input item %d: %w", i, err)
				}
				continue
			}
			m = chatmem.Message{Role: chatmem.RoleAssistant, ToolCalls: []chatmem.ToolCall{tc}}
			isCall = true
		case "function_call_output":
			text, err := outputText(it.Output)
			if err != nil {
				return nil, fmt.Errorf("input item %d: %w", i, err)
			}
			if it.CallID == "" {
				return nil, fmt.Errorf("%w: input item %d: a function_call_output needs call_id", chatmem.ErrInvalid, i)
			}
			m = chatmem.Message{Role: chatmem.RoleTool, Content: text, ToolCallID: it.CallID}
		case "":
			return nil, fmt.Errorf("%w: input item %d has no type", chatmem.ErrInvalid, i)
		default:
			if strict {
				return nil, fmt.Errorf("%w: input item %d: item type %q cannot be sent to the model: chatmem's Responses API takes message, function_call and function_call_output items", chatmem.ErrInvalid, i, it.Type)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, r); err != nil {
				return nil, fmt.Errorf("%w: input item %d is not valid JSON", chatmem.ErrInvalid, i)
			}
			m = chatmem.Message{Role: chatmem.RoleAssistant, Content: "[" + it.Type + " item]", Metadata: map[string]string{metaItem: compact.String()}}
		}
		if err := m.Validate(limits); err != nil {
			return nil, fmt.Errorf("input item %d: %w", i, err)
		}
		out = append(out, m)
		prevCall = isCall
	}
	return out, nil
}

// messageItem turns a message item into a message: its role (developer is
// stored as system), its text parts joined, and the parts as sent when
// there is more than one.
func messageItem(it inputItem) (chatmem.Message, error) {
	m := chatmem.Message{}
	switch it.Role {
	case "user":
		m.Role = chatmem.RoleUser
	case "assistant":
		m.Role = chatmem.RoleAssistant
	case "system":
		m.Role = chatmem.RoleSystem
	case "developer":
		m.Role = chatmem.RoleSystem
		m.Metadata = map[string]string{metaRole: "developer"}
	default:
		return m, fmt.Errorf("%w: message role %q (want user, assistant, system or developer)", chatmem.ErrInvalid, it.Role)
	}
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		m.Content = s
		return m, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(it.Content, &parts); err != nil || len(parts) == 0 {
		return m, fmt.Errorf("%w: message content must be a string or a non-empty array of text parts", chatmem.ErrInvalid)
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
		case "refusal":
		default:
			return m, fmt.Errorf("%w: content part type %q: chatmem stores text (input_text, output_text)", chatmem.ErrInvalid, p.Type)
		}
		texts[i] = p.Text
	}
	m.Content = strings.Join(texts, "\n")
	if len(parts) > 1 {
		var compact bytes.Buffer
		_ = json.Compact(&compact, it.Content)
		if m.Metadata == nil {
			m.Metadata = map[string]string{}
		}
		m.Metadata[metaContent] = compact.String()
	}
	return m, nil
}

// outputText reads a function_call_output's output: a string, or text
// parts joined.
func outputText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err == nil {
		texts := make([]string, len(parts))
		for i, p := range parts {
			if p.Type != "input_text" && p.Type != "output_text" {
				return "", fmt.Errorf("%w: function_call_output part type %q: chatmem stores text", chatmem.ErrInvalid, p.Type)
			}
			texts[i] = p.Text
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", fmt.Errorf("%w: a function_call_output's output must be a string or text parts", chatmem.ErrInvalid)
}

// item is an item as the APIs answer it: JSON, with its ID.
type item struct {
	id  string
	raw json.RawMessage
}

// Item IDs name the message that holds the item: msg_<seq> for a message
// item, fc_<seq>_<n> for the nth function_call of an assistant message,
// fco_<seq> for a function_call_output, and <prefix>_<seq> for an item
// stored as it came (the prefix of its own ID, else "item").

// messageItems returns the items message m holds, in order. status is the
// items' status ("completed").
func messageItems(m chatmem.Message) []item {
	if hidden(m) {
		return nil
	}
	seq := strconv.FormatInt(m.Seq, 10)
	if raw, ok := m.Metadata[metaItem]; ok {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &obj) != nil {
			return nil
		}
		prefix := "item"
		var old string
		if json.Unmarshal(obj["id"], &old) == nil {
			if p, _, ok := strings.Cut(old, "_"); ok && idPrefix(p) {
				prefix = p
			}
		}
		id := prefix + "_" + seq
		obj["id"], _ = json.Marshal(id)
		b, _ := json.Marshal(obj)
		return []item{{id: id, raw: b}}
	}
	var out []item
	switch m.Role {
	case chatmem.RoleTool:
		id := "fco_" + seq
		b, _ := json.Marshal(struct {
			Type   string `json:"type"`
			ID     string `json:"id"`
			CallID string `json:"call_id"`
			Output string `json:"output"`
			Status string `json:"status"`
		}{"function_call_output", id, m.ToolCallID, m.Content, "completed"})
		return []item{{id: id, raw: b}}
	case chatmem.RoleAssistant:
		if m.Content != "" {
			out = append(out, messageItemOf(m, "msg_"+seq))
		}
		for i, tc := range m.ToolCalls {
			id := "fc_" + seq + "_" + strconv.Itoa(i)
			out = append(out, item{id: id, raw: functionCallJSON(id, tc, "completed")})
		}
		return out
	}
	return []item{messageItemOf(m, "msg_"+seq)}
}

// functionCallJSON is a function_call item.
func functionCallJSON(id string, tc chatmem.ToolCall, status string) []byte {
	b, _ := json.Marshal(struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	}{"function_call", id, tc.ID, tc.Function.Name, tc.Function.Arguments, status})
	return b
}

// outputTextPart is an assistant message's text part.
type outputTextPart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

func messageItemOf(m chatmem.Message, id string) item {
	role := string(m.Role)
	if r := m.Metadata[metaRole]; r != "" {
		role = r
	}
	var content any
	switch {
	case m.Metadata[metaContent] != "":
		content = json.RawMessage(m.Metadata[metaContent])
	case m.Role == chatmem.RoleAssistant:
		content = []outputTextPart{{Type: "output_text", Text: m.Content, Annotations: []any{}, Logprobs: []any{}}}
	default:
		content = []contentPart{{Type: "input_text", Text: m.Content}}
	}
	b, _ := json.Marshal(struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Status  string `json:"status"`
		Role    string `json:"role"`
		Content any    `json:"content"`
	}{"message", id, "completed", role, content})
	return item{id: id, raw: b}
}

// idPrefix reports whether p can prefix an item ID: 1 to 16 lowercase
// letters and digits, as OpenAI's (rs, ws, fc, ...).
func idPrefix(p string) bool {
	if len(p) == 0 || len(p) > 16 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// itemSeq returns the sequence number an item ID names, or false.
func itemSeq(id string) (int64, bool) {
	parts := strings.Split(id, "_")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, false
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || seq < 1 || strconv.FormatInt(seq, 10) != parts[1] {
		return 0, false
	}
	return seq, true
}

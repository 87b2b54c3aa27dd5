package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/chatmem/chatmem"
)

// Conversions between chatmem messages and the anthropic-sdk-go types, for
// applications that call the Messages API themselves: pass a window to the
// SDK with MessageParams and append the SDK's answer with FromMessage.
//
//	w, _ := mem.Context(ctx, key, policy, chatmem.ContextOptions{})
//	system, messages, err := chatmemanthropic.MessageParams(w.Messages)
//	res, _ := client.Messages.New(ctx, anthropic.MessageNewParams{
//		Model: model, MaxTokens: 1024, System: system, Messages: messages,
//	})
//	reply, _ := chatmemanthropic.FromMessage(res)
//	mem.Append(ctx, key, []chatmem.Message{reply}, chatmem.AppendOptions{})

// MessageParams converts msgs, a window or any chatmem history, into what
// the Messages API takes: the system prompt apart, and messages whose roles
// alternate between user and assistant.
//
//   - Every system message (the pinned ones, and a window's facts and
//     summary messages) becomes one text block of system, in order.
//   - A user message becomes a text block; an assistant message a text block
//     (if it has content) followed by one tool_use block per tool call, with
//     the call's ID, name and input: the arguments, which must be a JSON
//     object ("" counts as {}).
//   - A tool message becomes a tool_result block with the message's
//     tool_call_id as tool_use_id and its content as text, in a user
//     message: the Messages API carries tool results in user turns.
//   - Consecutive messages that end up with the same role are merged into
//     one message with several blocks, in order: parallel tool results go
//     back in one user message, and a user message that follows them joins
//     it after the results.
//
// Names and the fields only chatmem has (Seq, Tokens, CreatedAt, Metadata)
// are not sent. An unknown role, arguments that are not a JSON object and
// a message with nothing to send (no content, no tool calls) are errors
// wrapping chatmem.ErrInvalid; Memory never returns such messages.
func MessageParams(msgs []chatmem.Message) (system []sdk.TextBlockParam, messages []sdk.MessageParam, err error) {
	// add appends blocks to the last message if it has role user (or
	// assistant), else starts a new one.
	add := func(assistant bool, blocks ...sdk.ContentBlockParamUnion) {
		if n := len(messages); n > 0 {
			last := &messages[n-1]
			if assistant && last.OfAssistant != nil {
				last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
				return
			}
			if !assistant && last.OfUser != nil {
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
				return
			}
		}
		if assistant {
			messages = append(messages, sdk.NewAssistantMessage(blocks...))
		} else {
			messages = append(messages, sdk.NewUserMessage(blocks...))
		}
	}
	for i, m := range msgs {
		switch m.Role {
		case chatmem.RoleSystem:
			if m.Content == "" {
				return nil, nil, fmt.Errorf("%w: anthropic: message %d: system message has no content", chatmem.ErrInvalid, i)
			}
			system = append(system, sdk.TextBlockParam{Text: m.Content})
		case chatmem.RoleUser:
			if m.Content == "" {
				return nil, nil, fmt.Errorf("%w: anthropic: message %d: user message has no content", chatmem.ErrInvalid, i)
			}
			add(false, sdk.NewTextBlock(m.Content))
		case chatmem.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for j, c := range m.ToolCalls {
				input, err := toolUseInput(c.Function.Arguments)
				if err != nil {
					return nil, nil, fmt.Errorf("%w: anthropic: message %d: tool call %d (%s, %s): %v", chatmem.ErrInvalid, i, j, c.ID, c.Function.Name, err)
				}
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, input, c.Function.Name))
			}
			if len(blocks) == 0 {
				return nil, nil, fmt.Errorf("%w: anthropic: message %d: assistant message has neither content nor tool calls", chatmem.ErrInvalid, i)
			}
			add(true, blocks...)
		case chatmem.RoleTool:
			result := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			add(false, sdk.ContentBlockParamUnion{OfToolResult: &result})
		default:
			return nil, nil, fmt.Errorf("%w: anthropic: message %d: unknown role %q", chatmem.ErrInvalid, i, m.Role)
		}
	}
	return system, messages, nil
}

// toolUseInput returns arguments as a tool_use input: compact JSON text of an
// object, sent as is (keys keep their order, numbers their digits).
func toolUseInput(arguments string) (json.RawMessage, error) {
	if strings.TrimSpace(arguments) == "" {
		return json.RawMessage("{}"), nil
	}
	var object map[string]json.RawMessage
	if err := json.Unmarshal([]byte(arguments), &object); err != nil || object == nil {
		return nil, fmt.Errorf("arguments are not a JSON object: %.80q", arguments)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(arguments)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// FromMessage returns the assistant message m holds, ready to append: the
// text of its text blocks joined (as the API splits one answer into blocks,
// around citations for instance) and each tool_use block as a tool call of
// type "function" with the block's ID and name and its input, marshalled,
// as the arguments. Thinking blocks, server tool blocks and the other kinds
// are not kept; neither are the stop reason and usage. It returns an error
// wrapping chatmem.ErrInvalid if m is nil.
func FromMessage(m *sdk.Message) (chatmem.Message, error) {
	if m == nil {
		return chatmem.Message{}, fmt.Errorf("%w: anthropic: no message", chatmem.ErrInvalid)
	}
	out := chatmem.Message{Role: chatmem.RoleAssistant}
	var text strings.Builder
	for _, block := range m.Content {
		switch block.Type {
		case "text":
			text.WriteString(block.Text)
		case "tool_use":
			args := "{}"
			if in := bytes.TrimSpace(block.Input); len(in) > 0 && !bytes.Equal(in, []byte("null")) {
				var b bytes.Buffer
				if err := json.Compact(&b, in); err != nil {
					return chatmem.Message{}, fmt.Errorf("%w: anthropic: tool_use %s input: %v", chatmem.ErrInvalid, block.ID, err)
				}
				args = b.String()
			}
			out.ToolCalls = append(out.ToolCalls, chatmem.ToolCall{
				ID: block.ID, Type: "function",
				Function: chatmem.FunctionCall{Name: block.Name, Arguments: args},
			})
		}
	}
	out.Content = text.String()
	return out, nil
}

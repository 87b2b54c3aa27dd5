package openai

import (
	"fmt"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"

	"github.com/chatmem/chatmem"
)

// Conversions between chatmem messages and the openai-go SDK's message
// types, for applications that call the Chat Completions API themselves:
// pass a window to the SDK with MessageParams and append the SDK's answer
// with FromCompletion.
//
//	w, _ := mem.Context(ctx, key, policy, chatmem.ContextOptions{})
//	res, _ := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
//		Model: model, Messages: chatmemopenai.MessageParams(w.Messages),
//	})
//	reply, _ := chatmemopenai.FromCompletion(res)
//	mem.Append(ctx, key, []chatmem.Message{reply}, chatmem.AppendOptions{})

// MessageParams converts msgs, a window or any chatmem history, into the
// SDK's request messages, in order and one for one: system, user, assistant
// (content, name and tool calls) and tool (content and tool_call_id)
// messages. An assistant message that carries only tool calls is sent
// without content. A tool call of type "custom" becomes a custom tool call
// whose input is Function.Arguments; any other type a function call.
//
// The fields only chatmem has (Seq, Tokens, CreatedAt, Metadata) are not
// sent; neither is a message with a role chatmem does not store (Memory
// never returns one). The facts and summary messages of a window are system
// messages and are sent as such.
func MessageParams(msgs []chatmem.Message) []sdk.ChatCompletionMessageParamUnion {
	out := make([]sdk.ChatCompletionMessageParamUnion, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case chatmem.RoleSystem:
			p := sdk.ChatCompletionSystemMessageParam{Name: optString(m.Name)}
			p.Content.OfString = sdk.String(m.Content)
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfSystem: &p})
		case chatmem.RoleUser:
			p := sdk.ChatCompletionUserMessageParam{Name: optString(m.Name)}
			p.Content.OfString = sdk.String(m.Content)
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfUser: &p})
		case chatmem.RoleAssistant:
			p := sdk.ChatCompletionAssistantMessageParam{Name: optString(m.Name)}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				p.Content.OfString = sdk.String(m.Content)
			}
			for _, c := range m.ToolCalls {
				p.ToolCalls = append(p.ToolCalls, toolCallParam(c))
			}
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfAssistant: &p})
		case chatmem.RoleTool:
			p := sdk.ChatCompletionToolMessageParam{ToolCallID: m.ToolCallID}
			p.Content.OfString = sdk.String(m.Content)
			out = append(out, sdk.ChatCompletionMessageParamUnion{OfTool: &p})
		}
	}
	return out
}

func optString(s string) param.Opt[string] {
	if s == "" {
		return param.Opt[string]{}
	}
	return sdk.String(s)
}

func toolCallParam(c chatmem.ToolCall) sdk.ChatCompletionMessageToolCallUnionParam {
	if c.Type == "custom" {
		return sdk.ChatCompletionMessageToolCallUnionParam{OfCustom: &sdk.ChatCompletionMessageCustomToolCallParam{
			ID:     c.ID,
			Custom: sdk.ChatCompletionMessageCustomToolCallCustomParam{Name: c.Function.Name, Input: c.Function.Arguments},
		}}
	}
	return sdk.ChatCompletionMessageToolCallUnionParam{OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
		ID:       c.ID,
		Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Function.Name, Arguments: c.Function.Arguments},
	}}
}

// FromCompletion returns the assistant message of c's first choice, ready
// to append: its content and its tool calls, in order with their IDs (a
// custom tool call keeps type "custom", its input in Function.Arguments).
// A refusal with no content is stored as the content, so the conversation
// records what the model answered. Audio, annotations and the deprecated
// function_call are not kept. It returns an error wrapping
// chatmem.ErrInvalid if c is nil or has no choices.
func FromCompletion(c *sdk.ChatCompletion) (chatmem.Message, error) {
	if c == nil {
		return chatmem.Message{}, fmt.Errorf("%w: openai: no completion", chatmem.ErrInvalid)
	}
	if len(c.Choices) == 0 {
		return chatmem.Message{}, fmt.Errorf("%w: openai: completion %q has no choices", chatmem.ErrInvalid, c.ID)
	}
	msg := c.Choices[0].Message
	out := chatmem.Message{Role: chatmem.RoleAssistant, Content: msg.Content}
	if out.Content == "" {
		out.Content = msg.Refusal
	}
	for _, tc := range msg.ToolCalls {
		call := chatmem.ToolCall{ID: tc.ID, Type: tc.Type}
		switch tc.Type {
		case "custom":
			call.Function = chatmem.FunctionCall{Name: tc.Custom.Name, Arguments: tc.Custom.Input}
		default:
			call.Type = "function"
			call.Function = chatmem.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		}
		out.ToolCalls = append(out.ToolCalls, call)
	}
	return out, nil
}

// FromMessageParam converts one SDK request message into a chatmem
// message, the way MessageParams' counterpart: for an application that
// built its messages with the SDK and stores them with chatmem (the new
// user message of a turn, the tool results it sends back).
//
// Content given as an array of text parts is joined with newlines, as
// chatmem.Message's JSON decoding does; an image, audio or file part is
// refused with chatmem.ErrInvalid, since chatmem stores text. An assistant
// refusal part, or its refusal with no content, counts as text. A developer
// message becomes a system message. The deprecated function message, and a
// union with no variant set, are refused with chatmem.ErrInvalid.
func FromMessageParam(p sdk.ChatCompletionMessageParamUnion) (chatmem.Message, error) {
	switch {
	case p.OfSystem != nil:
		return chatmem.Message{Role: chatmem.RoleSystem, Name: p.OfSystem.Name.Or(""),
			Content: joinText(p.OfSystem.Content.OfString.Or(""), p.OfSystem.Content.OfArrayOfContentParts)}, nil
	case p.OfDeveloper != nil:
		return chatmem.Message{Role: chatmem.RoleSystem, Name: p.OfDeveloper.Name.Or(""),
			Content: joinText(p.OfDeveloper.Content.OfString.Or(""), p.OfDeveloper.Content.OfArrayOfContentParts)}, nil
	case p.OfUser != nil:
		content := p.OfUser.Content.OfString.Or("")
		if parts := p.OfUser.Content.OfArrayOfContentParts; len(parts) > 0 {
			texts := make([]string, len(parts))
			for i, part := range parts {
				if part.OfText == nil {
					return chatmem.Message{}, fmt.Errorf("%w: openai: user content part %d has type %q; only text parts are supported", chatmem.ErrInvalid, i, partType(part))
				}
				texts[i] = part.OfText.Text
			}
			content = strings.Join(texts, "\n")
		}
		return chatmem.Message{Role: chatmem.RoleUser, Name: p.OfUser.Name.Or(""), Content: content}, nil
	case p.OfAssistant != nil:
		a := p.OfAssistant
		content := a.Content.OfString.Or("")
		if parts := a.Content.OfArrayOfContentParts; len(parts) > 0 {
			texts := make([]string, 0, len(parts))
			for _, part := range parts {
				switch {
				case part.OfText != nil:
					texts = append(texts, part.OfText.Text)
				case part.OfRefusal != nil:
					texts = append(texts, part.OfRefusal.Refusal)
				}
			}
			content = strings.Join(texts, "\n")
		}
		if content == "" {
			content = a.Refusal.Or("")
		}
		out := chatmem.Message{Role: chatmem.RoleAssistant, Name: a.Name.Or(""), Content: content}
		for i, tc := range a.ToolCalls {
			switch {
			case tc.OfFunction != nil:
				out.ToolCalls = append(out.ToolCalls, chatmem.ToolCall{ID: tc.OfFunction.ID, Type: "function",
					Function: chatmem.FunctionCall{Name: tc.OfFunction.Function.Name, Arguments: tc.OfFunction.Function.Arguments}})
			case tc.OfCustom != nil:
				out.ToolCalls = append(out.ToolCalls, chatmem.ToolCall{ID: tc.OfCustom.ID, Type: "custom",
					Function: chatmem.FunctionCall{Name: tc.OfCustom.Custom.Name, Arguments: tc.OfCustom.Custom.Input}})
			default:
				return chatmem.Message{}, fmt.Errorf("%w: openai: assistant tool call %d is neither a function nor a custom call", chatmem.ErrInvalid, i)
			}
		}
		return out, nil
	case p.OfTool != nil:
		return chatmem.Message{Role: chatmem.RoleTool, ToolCallID: p.OfTool.ToolCallID,
			Content: joinText(p.OfTool.Content.OfString.Or(""), p.OfTool.Content.OfArrayOfContentParts)}, nil
	case p.OfFunction != nil:
		return chatmem.Message{}, fmt.Errorf("%w: openai: function messages are deprecated and not supported; use tool messages", chatmem.ErrInvalid)
	}
	return chatmem.Message{}, fmt.Errorf("%w: openai: message param has no role set", chatmem.ErrInvalid)
}

// joinText returns s, or the parts' text joined with newlines if there are
// parts.
func joinText(s string, parts []sdk.ChatCompletionContentPartTextParam) string {
	if len(parts) == 0 {
		return s
	}
	texts := make([]string, len(parts))
	for i, part := range parts {
		texts[i] = part.Text
	}
	return strings.Join(texts, "\n")
}

// partType names a content part's type as the wire does.
func partType(p sdk.ChatCompletionContentPartUnionParam) string {
	switch {
	case p.OfImageURL != nil:
		return "image_url"
	case p.OfInputAudio != nil:
		return "input_audio"
	case p.OfFile != nil:
		return "file"
	}
	return "unknown"
}

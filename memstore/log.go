package memstore

import (
	"maps"
	"slices"
	"time"
	"unsafe"

	"github.com/chatmem/chatmem"
)

// messageLog holds one conversation's messages in columns the garbage
// collector does not have to walk: a million messages are a few large
// arrays of numbers and bytes, not a million structs of strings, slices
// and maps, so a collection costs the same with a long conversation as
// with a short one. The contents are copied into chunks of bytes, which
// only grow within their capacity: the bytes of a message never move or
// change once written, so a returned message's Content points into its
// chunk (unsafe.String) instead of being copied again. The fields most
// messages lack (name, tool calls, metadata, a role not of the four) are
// kept aside, by index.
//
// Message i (0-based) has Seq i+1. The caller synchronizes.
type messageLog struct {
	chunks [][]byte // contents; chunks[open] takes new ones
	open   int      // -1 until the first content
	loc    []textLoc
	tokens []int64
	// created is each message's CreatedAt in Unix nanoseconds
	// (chatmem.MinTime..MaxTime fits); it is returned in UTC, as the other
	// stores return it.
	created []int64
	// roles holds each message's role code (roleCodes), with hasExtra set
	// when extras holds more of it.
	roles  []uint8
	extras map[int]*extraFields
}

// textLoc is where a message's content lies: bytes [off, off+n) of a chunk.
type textLoc struct {
	chunk, off, n uint32
}

// extraFields are the parts of a message kept aside.
type extraFields struct {
	role       chatmem.Role // when the role code is otherRole
	name       string
	toolCallID string
	toolCalls  []chatmem.ToolCall
	metadata   map[string]string
}

// roleCodes are the roles a code stands for; otherRole means the role is
// in the message's extraFields.
var roleCodes = [...]chatmem.Role{chatmem.RoleUser, chatmem.RoleAssistant, chatmem.RoleSystem, chatmem.RoleTool}

const (
	otherRole = 0x7f
	hasExtra  = 0x80
	// minChunk and maxChunk bound the chunks' sizes: a conversation's first
	// chunk is small, each next one twice the last (or as large as the
	// content that opens it), up to maxChunk. A content over half of
	// maxChunk gets a chunk of its own.
	minChunk = 1 << 8
	maxChunk = 1 << 20
	// maxContent is the longest content a textLoc can hold.
	maxContent = 1<<32 - 1
)

func newMessageLog() messageLog { return messageLog{open: -1} }

func (l *messageLog) len() int { return len(l.loc) }

// role returns message i's role.
func (l *messageLog) role(i int) chatmem.Role {
	if c := l.roles[i] &^ hasExtra; c != otherRole {
		return roleCodes[c]
	}
	return l.extras[i].role
}

// content returns message i's content, sharing its chunk's bytes.
func (l *messageLog) content(i int) string {
	t := l.loc[i]
	if t.n == 0 {
		return ""
	}
	return unsafe.String(&l.chunks[t.chunk][t.off], int(t.n))
}

// add appends m (its Seq is implied). m.Content must be at most maxContent
// bytes and m.CreatedAt not zero.
func (l *messageLog) add(m chatmem.Message) {
	i := len(l.loc)
	code := uint8(otherRole)
	if j := slices.Index(roleCodes[:], m.Role); j >= 0 {
		code = uint8(j)
	}
	var x *extraFields
	if code == otherRole || m.Name != "" || m.ToolCallID != "" || len(m.ToolCalls) > 0 || len(m.Metadata) > 0 {
		x = &extraFields{name: m.Name, toolCallID: m.ToolCallID, toolCalls: slices.Clone(m.ToolCalls), metadata: maps.Clone(m.Metadata)}
		if code == otherRole {
			x.role = m.Role
		}
		if l.extras == nil {
			l.extras = make(map[int]*extraFields)
		}
		l.extras[i] = x
		code |= hasExtra
	}
	l.loc = append(l.loc, l.addText(m.Content))
	l.tokens = append(l.tokens, int64(m.Tokens))
	l.created = append(l.created, m.CreatedAt.UnixNano())
	l.roles = append(l.roles, code)
}

// addText copies s into a chunk and returns where.
func (l *messageLog) addText(s string) textLoc {
	if len(s) == 0 {
		return textLoc{}
	}
	if l.open >= 0 {
		if c := l.chunks[l.open]; cap(c)-len(c) >= len(s) {
			l.chunks[l.open] = append(c, s...)
			return textLoc{chunk: uint32(l.open), off: uint32(len(c)), n: uint32(len(s))}
		}
	}
	if len(s) > maxChunk/2 {
		// Its own chunk, exactly as large; the open one stays open.
		l.chunks = append(l.chunks, []byte(s))
		return textLoc{chunk: uint32(len(l.chunks) - 1), n: uint32(len(s))}
	}
	size := minChunk
	if l.open >= 0 {
		size = min(2*cap(l.chunks[l.open]), maxChunk)
	}
	l.chunks = append(l.chunks, append(make([]byte, 0, max(size, len(s))), s...))
	l.open = len(l.chunks) - 1
	return textLoc{chunk: uint32(l.open), n: uint32(len(s))}
}

// at returns message i as a chatmem.Message the caller owns: its Content
// shares the log's bytes (which never change), everything else is a copy.
func (l *messageLog) at(i int) chatmem.Message {
	m := l.view(i)
	m.ToolCalls = slices.Clone(m.ToolCalls)
	m.Metadata = maps.Clone(m.Metadata)
	return m
}

// view is at without copying the tool calls and metadata: for reading
// under the lock only.
func (l *messageLog) view(i int) chatmem.Message {
	m := chatmem.Message{
		Seq:       int64(i) + 1,
		Content:   l.content(i),
		Tokens:    int(l.tokens[i]),
		CreatedAt: time.Unix(0, l.created[i]).UTC(),
	}
	code := l.roles[i]
	if c := code &^ hasExtra; c != otherRole {
		m.Role = roleCodes[c]
	}
	if code&hasExtra != 0 {
		x := l.extras[i]
		if code&^hasExtra == otherRole {
			m.Role = x.role
		}
		m.Name, m.ToolCallID, m.ToolCalls, m.Metadata = x.name, x.toolCallID, x.toolCalls, x.metadata
	}
	return m
}

// slice returns copies of messages [from, to).
func (l *messageLog) slice(from, to int) []chatmem.Message {
	out := make([]chatmem.Message, to-from)
	for i := range out {
		out[i] = l.at(from + i)
	}
	return out
}

// truncate keeps messages [0, n). The bytes of the others stay in their
// chunks: a message returned before may share them.
func (l *messageLog) truncate(n int) {
	for i := n; i < len(l.loc); i++ {
		delete(l.extras, i)
	}
	l.loc, l.tokens, l.created, l.roles = l.loc[:n], l.tokens[:n], l.created[:n], l.roles[:n]
}

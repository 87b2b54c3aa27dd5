package memstore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
)

// TestMessageLog: every message comes back as it went in (CreatedAt in
// UTC), whatever its size (empty, filling chunks, larger than a chunk)
// and whatever fields it carries, and contents read earlier stay the same
// while more are appended.
func TestMessageLog(t *testing.T) {
	l := newMessageLog()
	at := time.Date(2026, 12, 1, 18, 0, 0, 123456789, time.FixedZone("X", 3600))
	var want []chatmem.Message
	var read []string
	for i := range 300 {
		m := chatmem.Message{Role: chatmem.RoleUser, Content: strings.Repeat(string(rune('a'+i%26)), i*37%900), Tokens: i, CreatedAt: at.Add(time.Duration(i))}
		switch i % 7 {
		case 1:
			m.Role, m.Content = chatmem.RoleAssistant, ""
			m.ToolCalls = []chatmem.ToolCall{{ID: "c1", Type: "function", Function: chatmem.FunctionCall{Name: "f", Arguments: "{}"}}}
		case 2:
			m.Role, m.ToolCallID = chatmem.RoleTool, "c1"
		case 3:
			m.Role, m.Name, m.Metadata = chatmem.RoleSystem, "ops", map[string]string{"k": "v"}
		case 4:
			m.Role = "narrator" // not one of the four: kept aside
		case 5:
			m.Content = strings.Repeat("x", 3*maxChunk/4) // a chunk of its own
		}
		l.add(m)
		m.Seq, m.CreatedAt = int64(i)+1, m.CreatedAt.UTC()
		want = append(want, m)
		read = append(read, l.content(i))
	}
	for i, w := range want {
		if got := l.at(i); !reflect.DeepEqual(got, w) {
			t.Fatalf("message %d = %+v, want %+v", i, got, w)
		}
		if read[i] != w.Content {
			t.Fatalf("content %d read before later appends changed", i)
		}
	}
	// A copy's tool calls and metadata are its own.
	m := l.at(3)
	m.Metadata["k"] = "changed"
	if l.at(3).Metadata["k"] != "v" {
		t.Error("changing a returned message's metadata changed the log")
	}
}

// TestMessageLogChunks: contents share chunks, so appending a message of
// ordinary size allocates a chunk only now and then.
func TestMessageLogChunks(t *testing.T) {
	l := newMessageLog()
	m := chatmem.Message{Role: chatmem.RoleUser, Content: strings.Repeat("w", 208), CreatedAt: time.Now()}
	for range 10000 {
		l.add(m)
	}
	if n := len(l.chunks); n > 20 {
		t.Errorf("10,000 contents of 208 bytes take %d chunks, want a few (doubling to %d bytes)", n, maxChunk)
	}
}

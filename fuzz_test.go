package chatmem

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// idRule is ValidateID's rule written a second way, as the oracle of
// FuzzValidateID.
var idRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// FuzzValidateID checks ValidateID against its documented rule and the
// properties the stores and the HTTP layer rely on: an accepted ID is one
// URL path segment that needs no escaping and that path cleaning leaves as
// it is (so never "." or ".."), holds nothing that means something in a
// Redis key pattern or hash tag, in SQL quoting or LIKE, or in a shell, and
// no control or non-ASCII character; Key.Validate agrees with ValidateID on
// both parts; and Key.String is one-to-one over valid keys.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{
		"c1", "seed", "acme", "a.b", "a..b", "..", ".", "../x", "a/b", "a%2Fb", "%2e%2e", "x*", "a?", "[a]", "{x}",
		"'; DROP TABLE messages; --", "a b", "a\x00b", "a\nb", "é", "-x", "_x", "x-", "x_", "user@example.com",
		"p:q", strings.Repeat("a", 128), strings.Repeat("a", 129), "", "\xff", "A-Z_0.9:@",
	} {
		f.Add(s, "acme")
		f.Add("acme", s)
	}
	f.Fuzz(func(t *testing.T, tenant, id string) {
		err := ValidateID(id)
		if want := idRule.MatchString(id); (err == nil) != want {
			t.Fatalf("ValidateID(%q) = %v, want accepted=%v", id, err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ValidateID(%q) = %v, not ErrInvalid", id, err)
			}
		} else {
			checkSafeID(t, id)
		}

		// Key.Validate is ValidateID on both parts, wrapping ErrInvalid.
		terr := ValidateID(tenant)
		k := Key{Tenant: tenant, ID: id}
		kerr := k.Validate()
		if (kerr == nil) != (terr == nil && err == nil) {
			t.Fatalf("Key%+v.Validate() = %v, but ValidateID(tenant) = %v and ValidateID(id) = %v", k, kerr, terr, err)
		}
		if kerr != nil && !errors.Is(kerr, ErrInvalid) {
			t.Fatalf("Key%+v.Validate() = %v, not ErrInvalid", k, kerr)
		}
		if kerr != nil {
			return
		}
		// One-to-one: the tenant has no "/", so the string splits back.
		s := k.String()
		gotTenant, gotID, ok := strings.Cut(s, "/")
		if !ok || gotTenant != tenant || gotID != id {
			t.Fatalf("Key%+v.String() = %q splits into %q, %q", k, s, gotTenant, gotID)
		}
		// As a Redis hash tag, the key is the whole tag.
		if tag := "{" + s + "}"; strings.Count(tag, "{") != 1 || strings.Count(tag, "}") != 1 {
			t.Fatalf("hash tag %q of Key%+v is ambiguous", tag, k)
		}
	})
}

// checkSafeID holds the properties of an accepted ID.
func checkSafeID(t *testing.T, id string) {
	t.Helper()
	if len(id) == 0 || len(id) > MaxIDLen {
		t.Fatalf("accepted ID %q has length %d", id, len(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			t.Fatalf("accepted ID %q has byte %#x (control, space or not ASCII)", id, c)
		}
	}
	if strings.ContainsAny(id, "/\\*?[]{}'\"`%;$&|<>()!^~#,= \t\r\n") {
		t.Fatalf("accepted ID %q has a path, pattern, quoting or shell character", id)
	}
	if id == "." || id == ".." || strings.HasPrefix(id, ".") {
		t.Fatalf("accepted ID %q is or starts like a relative path segment", id)
	}
	if url.PathEscape(id) != id {
		t.Fatalf("accepted ID %q needs escaping in a URL path: %q", id, url.PathEscape(id))
	}
	if p := "/v1/conversations/" + id + "/messages"; path.Clean(p) != p {
		t.Fatalf("accepted ID %q changes under path cleaning: %q -> %q", id, p, path.Clean(p))
	}
}

// FuzzMessageJSON checks Message's JSON decoding: it never panics, content
// given as a string, null or text parts decodes to text, and a decoded
// message that is valid encodes to JSON that decodes to the same message.
func FuzzMessageJSON(f *testing.F) {
	for _, s := range []string{
		`{"role":"user","content":"hi"}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
		`{"role":"tool","tool_call_id":"c1","content":"ok"}`,
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`,
		`{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}`,
		`{"role":"user","content":{"text":"x"}}`,
		`{"role":"user","content":"x","metadata":{"k":"v"},"seq":3,"tokens":4,"created_at":"2024-01-02T03:04:05Z"}`,
		`{"role":"user","content":"\u0000"}`, `{"role":"user","content":1}`, `null`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Message
		if err := json.Unmarshal(b, &m); err != nil {
			return
		}
		if m.Validate(Limits{}) != nil {
			return
		}
		enc, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", m, err)
		}
		var again Message
		if err := json.Unmarshal(enc, &again); err != nil {
			t.Fatalf("Unmarshal(%s) of an encoded valid message: %v", enc, err)
		}
		// JSON drops the difference between nil and empty; so does chatmem.
		norm := func(m Message) Message {
			if len(m.ToolCalls) == 0 {
				m.ToolCalls = nil
			}
			if len(m.Metadata) == 0 {
				m.Metadata = nil
			}
			return m
		}
		if !m.CreatedAt.Equal(again.CreatedAt) {
			t.Fatalf("created_at %v came back %v", m.CreatedAt, again.CreatedAt)
		}
		again.CreatedAt = m.CreatedAt
		if !reflect.DeepEqual(norm(m), norm(again)) {
			t.Fatalf("round trip of %s:\n got %+v\nwant %+v", b, again, m)
		}
	})
}

// fuzzHistory builds a history from data, one message (or tool unit) per
// byte: users, assistants and system messages, tool units (whole, missing
// results, results out of order) and stray tool results that answer
// nothing or answer twice. Tokens come from the byte's high bits; Seqs
// are 1..n.
func fuzzHistory(data []byte) []Message {
	var h []Message
	var ids []string
	next := 0
	for i := 0; i < len(data) && len(h) < 300; i++ {
		b := data[i]
		tokens := 1 + int(b>>4)
		switch b & 7 {
		case 0, 1, 2:
			h = append(h, Message{Role: RoleUser, Content: fmt.Sprint("u", i), Tokens: tokens})
		case 3, 4:
			h = append(h, Message{Role: RoleAssistant, Content: fmt.Sprint("a", i), Tokens: tokens})
		case 5:
			h = append(h, Message{Role: RoleSystem, Content: fmt.Sprint("s", i), Tokens: tokens})
		case 6:
			k := 1 + int(b>>3&1) + int(b>>6&1)
			m := Message{Role: RoleAssistant, Tokens: tokens}
			for range k {
				next++
				id := fmt.Sprint("c", next)
				ids = append(ids, id)
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: "f", Arguments: "{}"}})
			}
			h = append(h, m)
			answered := k
			if b>>5&3 == 3 {
				answered-- // a unit missing one result
			}
			for j := range answered {
				c := m.ToolCalls[(j+int(b>>7))%k] // sometimes out of order
				h = append(h, Message{Role: RoleTool, ToolCallID: c.ID, Content: "ok", Tokens: 1 + j})
			}
		case 7:
			// A stray result: of an older call (answered twice, or its call
			// cut off), or of no call at all.
			id := "nope"
			if len(ids) > 0 {
				id = ids[int(b>>3)%len(ids)]
			}
			h = append(h, Message{Role: RoleTool, ToolCallID: id, Content: "late", Tokens: tokens})
		}
	}
	for i := range h {
		h[i].Seq = int64(i + 1)
	}
	return h
}

// FuzzSelect checks the window invariants over histories built from the
// input's bytes, for every policy, with a budget, turns and a request
// overhead: the pinned system messages first and all of them; then a
// window that starts with a user message (but for PolicyAll); tool calls
// and their results whole; Tokens the sum of the messages plus the
// overhead, within the budget for every policy with one, with Parts adding
// up to it; Dropped consistent; the newest sendable messages, contiguous
// (whatever is left out after the window's start cannot be sent); never
// an empty window when a user message could be sent; the same window from
// Select over the whole history as from Apply; a window that never shrinks
// as the budget grows; and the history left as it was.
func FuzzSelect(f *testing.F) {
	f.Add([]byte{0x10, 0x23, 0x41, 0x54, 0x06, 0x20, 0x77, 0x02}, 40, 2, uint8(0), uint8(2))
	f.Add([]byte{0x05, 0x00, 0x03, 0x46, 0x01, 0xe6, 0x03, 0x00}, 25, 1, uint8(3), uint8(1))
	f.Add([]byte{0x07, 0x00, 0x66, 0xc6, 0x00, 0x04}, 1000, 3, uint8(1), uint8(0))
	f.Add([]byte{0x05, 0xf5, 0x00}, 5, 1, uint8(2), uint8(3))
	f.Add([]byte{}, 1, 1, uint8(0), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, budget, turns int, overhead, kind uint8) {
		h := fuzzHistory(data)
		p := Policy{Kind: Policies[int(kind)%len(Policies)], Budget: budget, Turns: turns, Overhead: int(overhead % 16)}
		before := cloneMessages(h)
		w, err := Apply(p, h)
		if !reflect.DeepEqual(h, before) {
			t.Fatalf("Apply changed the history")
		}
		if p.Validate() != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Apply(%+v) with an invalid policy: error = %v, want ErrInvalid", p, err)
			}
			return
		}
		checkSelectWindow(t, h, p, w, err)

		// Select over the whole history (its system messages in recent too,
		// which it skips), as Memory.Context calls it with a Tail, sends
		// the same messages. Only for a history a store can hold: in one
		// ValidateHistory refuses, a system message can sit inside a tool
		// unit, and splitting it off first (Apply) joins what Select sees
		// as two units.
		pinned, _ := splitPinned(h)
		w2, err2 := Select(p, pinned, h)
		valid := ValidateHistory(nil, h, Limits{}) == nil
		if valid && ((err == nil) != (err2 == nil) || !slices.Equal(seqsOf(w.Messages), seqsOf(w2.Messages)) || w.Tokens != w2.Tokens) {
			t.Fatalf("Select(pinned, whole history) = %v, %d tokens, %v; Apply = %v, %d tokens, %v",
				seqsOf(w2.Messages), w2.Tokens, err2, seqsOf(w.Messages), w.Tokens, err)
		}

		// More budget never makes the window smaller, nor an error of a
		// window that fitted.
		if p.Budget > 0 && p.Kind != PolicyAll {
			q := p
			q.Budget += 1 + int(overhead)
			if q.Budget < p.Budget {
				return // overflow
			}
			wq, errq := Apply(q, h)
			if err == nil && errq != nil {
				t.Fatalf("budget %d fits, %d fails: %v", p.Budget, q.Budget, errq)
			}
			if err == nil && len(wq.Messages) < len(w.Messages) {
				t.Fatalf("budget %d sends %v, more budget %d sends less: %v", p.Budget, seqsOf(w.Messages), q.Budget, seqsOf(wq.Messages))
			}
		}
	})
}

// checkSelectWindow holds FuzzSelect's invariants for one window; it runs
// checkWindow (policy_test.go) first.
func checkSelectWindow(t *testing.T, h []Message, p Policy, w Window, err error) {
	t.Helper()
	checkWindow(t, h, p, w, err)
	pinned, recent := splitPinned(h)
	pinnedTokens := 0
	for _, m := range pinned {
		pinnedTokens += m.Tokens
	}
	hasUser := slices.ContainsFunc(recent, func(m Message) bool { return m.Role == RoleUser })
	budgeted := p.Kind != PolicyAll && p.Budget > 0
	if err != nil {
		// Too small only when the budget cannot hold the pinned messages,
		// the overhead and the newest user message with what follows.
		if !budgeted {
			t.Fatalf("policy %+v without a budget failed: %v", p, err)
		}
		if pinnedTokens+p.Overhead <= p.Budget && !hasUser {
			t.Fatalf("policy %+v: %v, but there is no user message to fit", p, err)
		}
		return
	}

	// Pinned first, all of them, in order, and no system message after.
	if len(w.Messages) < len(pinned) || !slices.Equal(seqsOf(w.Messages[:len(pinned)]), seqsOf(pinned)) {
		t.Fatalf("window %v does not start with the pinned messages %v", seqsOf(w.Messages), seqsOf(pinned))
	}
	rest := w.Messages[len(pinned):]
	bySeq := make(map[int64]Message, len(h))
	for _, m := range h {
		bySeq[m.Seq] = m
	}
	in := make(map[int64]bool, len(rest))
	users := 0
	for _, m := range rest {
		if m.Role == RoleSystem {
			t.Fatalf("system message %d after the pinned ones", m.Seq)
		}
		if !reflect.DeepEqual(m, bySeq[m.Seq]) {
			t.Fatalf("window message %d = %+v, stored %+v", m.Seq, m, bySeq[m.Seq])
		}
		in[m.Seq] = true
		if m.Role == RoleUser {
			users++
		}
	}

	// The newest sendable messages, contiguous: from the window's first
	// message on, what is left out is an unsendable tool message or call.
	if len(rest) > 0 {
		for _, m := range recent {
			if m.Seq >= rest[0].Seq && !in[m.Seq] && m.Role != RoleTool && len(m.ToolCalls) == 0 {
				t.Fatalf("window %v skips message %d (%s), which is newer than its start", seqsOf(rest), m.Seq, m.Role)
			}
		}
	}
	if hasUser && users == 0 && p.Kind != PolicyAll {
		t.Fatalf("window %v has no user message, but the history has one and the budget fits", seqsOf(w.Messages))
	}
	if p.Kind == PolicyAll {
		for _, m := range recent {
			if !in[m.Seq] && m.Role != RoleTool && len(m.ToolCalls) == 0 {
				t.Fatalf("policy all left out message %d (%s)", m.Seq, m.Role)
			}
		}
	}

	// Tokens: the messages plus the overhead, split into parts that add up,
	// and within the budget for every policy that has one.
	if w.Parts.System != pinnedTokens || w.Parts.Overhead != p.Overhead {
		t.Fatalf("parts %+v: system want %d, overhead want %d", w.Parts, pinnedTokens, p.Overhead)
	}
	if sum := w.Parts.System + w.Parts.Facts + w.Parts.Summary + w.Parts.Recent + w.Parts.Overhead; sum != w.Tokens {
		t.Fatalf("parts %+v add up to %d, tokens %d", w.Parts, sum, w.Tokens)
	}
	if budgeted && w.Tokens > p.Budget {
		t.Fatalf("policy %+v: tokens %d over the budget", p, w.Tokens)
	}
	if p.Kind == PolicyLastTurns && users > p.Turns {
		t.Fatalf("policy %+v: %d turns sent", p, users)
	}
	if w.Dropped < 0 || w.Dropped != len(h)-len(w.Messages) {
		t.Fatalf("dropped = %d, want %d", w.Dropped, len(h)-len(w.Messages))
	}
}

func seqsOf(ms []Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

func cloneMessages(ms []Message) []Message {
	if ms == nil {
		return nil
	}
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = m.Clone()
	}
	return out
}

// FuzzDecodeReceipt: any bytes, as a store may hand back, either decode
// to a receipt or fail with ErrInvalid, never panic or grow past the
// bound of a receipt's JSON; what decodes encodes again to a receipt that
// decodes the same.
func FuzzDecodeReceipt(f *testing.F) {
	r := &Receipt{
		Policy: ReceiptPolicy{Kind: PolicyTokenBudget, Budget: 4000}, Tokenizer: "o200k_base",
		Sent:     []SentSpan{{Part: PartRecent, From: 1, To: 9, Hash: "00ff"}},
		Upstream: &UpstreamUse{Model: "gpt-4o-mini", InputTokens: 40, RequestID: "req_1"},
	}
	enc, err := EncodeReceipt(r)
	if err != nil {
		f.Fatal(err)
	}
	plain, _ := json.Marshal(r)
	deflated := bytes.NewBuffer([]byte{receiptDeflate1}) // the form receipts were first stored in
	zw, _ := flate.NewWriterDict(deflated, flate.BestCompression, receiptDict)
	zw.Write(plain)
	zw.Close()
	for _, seed := range [][]byte{enc, plain, deflated.Bytes(), {receiptZstd}, {receiptDeflate1}, {receiptZstd, 0x28, 0xb5, 0x2f, 0xfd}, nil, []byte("{}"), enc[:len(enc)/2]} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeReceipt(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("DecodeReceipt(%x): %v, not ErrInvalid", b, err)
			}
			return
		}
		again, err := EncodeReceipt(&got)
		if err != nil {
			t.Fatalf("EncodeReceipt of a decoded receipt: %v", err)
		}
		back, err := DecodeReceipt(again)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("re-encoded receipt reads back as %+v (%v), want %+v", back, err, got)
		}
	})
}

package storekit_test

import (
	"errors"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/storekit"
)

func TestPageLimit(t *testing.T) {
	for _, tc := range []struct {
		limit, want int
		err         string // "": accepted
	}{
		{0, storekit.DefaultPageLimit, ""},
		{1, 1, ""},
		{1000, 1000, ""},
		{1001, 0, "page limit 1001 is not within 1..1000"},
		{-1, 0, "page limit -1 is not within 1..1000"},
	} {
		got, err := storekit.PageLimit(tc.limit)
		check(t, "PageLimit", tc.limit, err, tc.err)
		if got != tc.want {
			t.Errorf("PageLimit(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	// Without a default, 0 is as wrong as 1001.
	for limit, want := range map[int]string{0: "page limit 0 is not within 1..1000", 1: "", 1000: "", 1001: "1001"} {
		check(t, "CheckPageLimit", limit, storekit.CheckPageLimit(limit), want)
	}
	for limit, want := range map[int]string{0: "limit 0 is below 1", -5: "limit -5 is below 1", 1: "", 1 << 30: ""} {
		check(t, "CheckLimit", limit, storekit.CheckLimit(limit), want)
	}
}

func TestCheckPostings(t *testing.T) {
	for _, tc := range []struct {
		terms []string
		limit int
		err   string
	}{
		{nil, 1, ""},
		{[]string{"paris", "capital"}, 20, ""},
		{[]string{"paris"}, 0, "postings limit 0 is below 1"},
		{[]string{"paris", ""}, 5, "search term 1 is empty"},
	} {
		check(t, "CheckPostings", tc.terms, storekit.CheckPostings(tc.terms, tc.limit), tc.err)
	}
}

func TestCheckUser(t *testing.T) {
	for _, tc := range []struct {
		user chatmem.Key
		err  string
	}{
		{chatmem.Key{Tenant: "acme", ID: "kavya"}, ""},
		{chatmem.Key{Tenant: "", ID: "kavya"}, "tenant: "},
		{chatmem.Key{Tenant: "acme", ID: "a/b"}, "user: "},
	} {
		check(t, "CheckUser", tc.user, storekit.CheckUser(tc.user), tc.err)
	}
	check(t, "CheckTenant", "*", storekit.CheckTenant("*"), "tenant: ")
	check(t, "CheckTenant", "acme", storekit.CheckTenant("acme"), "")
}

func TestCheckAppend(t *testing.T) {
	key := chatmem.Key{Tenant: "acme", ID: "c1"}
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi"}, {Role: chatmem.RoleAssistant, Content: "hello"}}
	tooLate := append([]chatmem.Message(nil), msgs...)
	tooLate[1].CreatedAt = chatmem.MaxTime.Add(time.Second)
	for _, tc := range []struct {
		name string
		key  chatmem.Key
		msgs []chatmem.Message
		user string
		err  string
	}{
		{"valid", key, msgs, "kavya", ""},
		{"bad key", chatmem.Key{Tenant: "acme"}, msgs, "", "conversation id: "},
		{"no messages", key, nil, "", "no messages to append"},
		{"bad user", key, msgs, "a b", "user: "},
		{"created_at", key, tooLate, "", "message 1: "},
	} {
		check(t, "CheckAppend", tc.name, storekit.CheckAppend(tc.key, tc.msgs, chatmem.AppendOptions{User: tc.user}), tc.err)
	}
	for _, tc := range []struct {
		m   chatmem.Message
		err string
	}{
		{chatmem.Message{Role: chatmem.RoleTool, Tokens: 0}, ""},
		{chatmem.Message{Role: "robot"}, `unknown role "robot"`},
		{chatmem.Message{Role: chatmem.RoleUser, Tokens: -1}, "negative token count -1"},
	} {
		check(t, "CheckMessage", tc.m.Role, storekit.CheckMessage(tc.m), tc.err)
	}
}

func TestCheckFacts(t *testing.T) {
	good := chatmem.Fact{Key: "name", Value: "Kavya", SetBy: "test", Confidence: 1}
	bad := good
	bad.Value = ""
	user := chatmem.Key{Tenant: "acme", ID: "kavya"}
	check(t, "CheckFacts", "good", storekit.CheckFacts([]chatmem.Fact{good, good}), "")
	check(t, "CheckFacts", "bad second", storekit.CheckFacts([]chatmem.Fact{good, bad}), `fact 1: `)
	check(t, "CheckReplaceFacts", "some", storekit.CheckReplaceFacts(user, []chatmem.Fact{good}), "")
	check(t, "CheckReplaceFacts", "none", storekit.CheckReplaceFacts(user, nil), "replace the facts of user acme/kavya with none")
	check(t, "CheckReplaceFacts", "bad user", storekit.CheckReplaceFacts(chatmem.Key{Tenant: "acme"}, []chatmem.Fact{good}), "user: ")

	for _, tc := range []struct {
		prev, through int64
		err           string
	}{
		{0, 1, ""},
		{4, 9, ""},
		{-1, 3, "fact mark -1..3 is not a forward move"},
		{3, 3, "fact mark 3..3 is not a forward move"},
		{5, 2, "fact mark 5..2 is not a forward move"},
	} {
		check(t, "CheckFactMark", [2]int64{tc.prev, tc.through}, storekit.CheckFactMark(tc.prev, tc.through), tc.err)
	}
	check(t, "CheckFactMarkWithin", 7, storekit.CheckFactMarkWithin(7, 7), "")
	check(t, "CheckFactMarkWithin", 8, storekit.CheckFactMarkWithin(8, 7), "fact mark 8 is beyond the last message 7")
}

func TestCheckSummary(t *testing.T) {
	for _, tc := range []struct {
		sum  chatmem.Summary
		prev int64
		err  string
	}{
		{chatmem.Summary{Text: "so far", CoversSeq: 4}, 0, ""},
		{chatmem.Summary{Text: "so far", CoversSeq: 9}, 4, ""},
		{chatmem.Summary{CoversSeq: 4}, 0, "summary text is empty"},
		{chatmem.Summary{Text: "so far", CoversSeq: 4}, -1, "previous summary seq -1 is negative"},
		{chatmem.Summary{Text: "so far", CoversSeq: 4}, 4, "summary covers seq 4, not after the previous summary's 4"},
	} {
		check(t, "CheckSummary", tc.sum, storekit.CheckSummary(tc.sum, tc.prev), tc.err)
	}
	check(t, "CheckSummaryWithin", 7, storekit.CheckSummaryWithin(7, 7), "")
	check(t, "CheckSummaryWithin", 8, storekit.CheckSummaryWithin(8, 7), "summary covers seq 8, past the last message 7")
}

// check fails t unless err is nil for want "", or wraps chatmem.ErrInvalid
// and says want.
func check(t *testing.T, fn string, arg any, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s(%v) = %v, want nil", fn, arg, err)
	case want != "" && (!errors.Is(err, chatmem.ErrInvalid) || !strings.Contains(err.Error(), want)):
		t.Errorf("%s(%v) = %v, want an ErrInvalid saying %q", fn, arg, err, want)
	}
}

// TestImports keeps storekit a kit any store can take: it imports the root
// package and the standard library, nothing else.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if path != "github.com/chatmem/chatmem" && strings.Contains(first, ".") {
				t.Errorf("%s imports %s; storekit imports only the root package and the standard library", name, path)
			}
		}
	}
}

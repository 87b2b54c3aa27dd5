package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/sqlite"
)

func TestPurge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chatmem.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chatmem.Message{{Role: chatmem.RoleUser, Content: "hi", Tokens: 1}}
	for _, c := range []struct {
		key chatmem.Key
		age time.Duration
	}{
		{chatmem.Key{Tenant: "acme", ID: "old"}, 40 * 24 * time.Hour},
		{chatmem.Key{Tenant: "acme", ID: "older"}, 400 * 24 * time.Hour},
		{chatmem.Key{Tenant: "acme", ID: "recent"}, 24 * time.Hour},
		{chatmem.Key{Tenant: "globex", ID: "old"}, 40 * 24 * time.Hour},
	} {
		if _, err := s.Append(t.Context(), c.key, msgs, chatmem.AppendOptions{Now: timeAgo(c.age)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	store := "sqlite:" + path

	out, errOut, code := runSub(t, runPurge, "--store", store, "--older-than", "30d", "--tenant", "acme")
	if code != 0 || !strings.HasPrefix(out, "deleted 2 conversations not updated since ") {
		t.Errorf("purge --tenant acme: exit %d, stdout %q, stderr %q; want 2 deleted", code, out, errOut)
	}
	out, _, code = runSub(t, runPurge, "--store", store, "--older-than", "720h")
	if code != 0 || !strings.HasPrefix(out, "deleted 1 conversations ") {
		t.Errorf("purge (every tenant): exit %d, stdout %q; want 1 deleted (globex/old)", code, out)
	}
	out, _, code = runSub(t, runPurge, "--store", store, "--older-than", "720h")
	if code != 0 || !strings.HasPrefix(out, "deleted 0 conversations ") {
		t.Errorf("purge again: exit %d, stdout %q; want 0 deleted", code, out)
	}
	if conv, _ := conversation(t, path, chatmem.Key{Tenant: "acme", ID: "recent"}); conv.LastSeq != 1 {
		t.Errorf("acme/recent after the purges: LastSeq %d, want 1 (kept)", conv.LastSeq)
	}
}

func TestPurgeErrors(t *testing.T) {
	store := "sqlite:" + filepath.Join(t.TempDir(), "chatmem.db")
	for _, tt := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no age", []string{"--store", store}, 2, "positive --older-than"},
		{"negative age", []string{"--store", store, "--older-than", "-1h"}, 2, "--older-than: -1h is out of range: want a positive duration such as 90s, 15m, 2h or 30d; run chatmem purge --help"},
		{"bad age", []string{"--store", store, "--older-than", "soon"}, 2, `--older-than: "soon" is not a duration`},
		{"bad age from the environment", []string{"--store", store}, 2, `CHATMEM_PURGE_OLDER_THAN: "a month" is not a duration`},
		{"bad tenant", []string{"--store", store, "--older-than", "1h", "--tenant", "a/b"}, 2, "tenant"},
		{"arguments", []string{"--store", store, "--older-than", "1h", "acme"}, 2, "takes no arguments"},
		{"help", []string{"--help"}, 0, "Example:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.name, "environment") {
				t.Setenv("CHATMEM_PURGE_OLDER_THAN", "a month")
			}
			_, errOut, code := runSub(t, runPurge, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tt.code, tt.msg)
			}
		})
	}
}

// timeAgo returns the time d before now.
func timeAgo(d time.Duration) time.Time { return time.Now().Add(-d) }

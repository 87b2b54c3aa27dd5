package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
)

// TestPoolSize: Open's pool holds DefaultMaxConns connections, so that
// concurrent appends can share WAL flushes, unless the URL says otherwise.
func TestPoolSize(t *testing.T) {
	for _, tc := range []struct {
		suffix string
		want   int32
	}{
		{"", postgres.DefaultMaxConns},
		{"&pool_max_conns=3", 3},
	} {
		url := testenv.PostgresURL()
		if tc.suffix != "" && !strings.Contains(url, "?") {
			url += "?" + tc.suffix[1:]
		} else {
			url += tc.suffix
		}
		s, err := postgres.Open(context.Background(), url, postgres.Options{Schema: newSchema(t)})
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		if got := s.Pool().Config().MaxConns; got != tc.want {
			t.Errorf("Open(%q): pool of %d connections, want %d", url, got, tc.want)
		}
		s.Close()
	}
}

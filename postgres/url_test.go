package postgres_test

import (
	"strings"
	"testing"

	"github.com/chatmem/chatmem/internal/testenv"
	"github.com/chatmem/chatmem/postgres"
)

// TestOpenSchemaOption: a schema=NAME query option picks the schema, and
// is not sent to the server as a run-time parameter.
func TestOpenSchemaOption(t *testing.T) {
	schema := newSchema(t)
	url := testenv.PostgresURL()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s, err := postgres.Open(t.Context(), url+sep+"schema="+schema, postgres.Options{})
	if err != nil {
		t.Fatalf("Open with schema=%s: %v", schema, err)
	}
	defer s.Close()
	if s.Schema() != schema {
		t.Fatalf("Schema() = %q, want %q", s.Schema(), schema)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(t.Context(), url+sep+"schema=Bad-Name", postgres.Options{}); err == nil {
		t.Fatal("Open with schema=Bad-Name succeeded, want an invalid schema error")
	}
}

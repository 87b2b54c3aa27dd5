package postgres_test

import (
	"testing"

	"chatmem"
	"chatmem/postgres"
	"chatmem/storetest"
)

// TestRecount runs the chatmem.Recounter conformance subtests.
func TestRecount(t *testing.T) {
	storetest.RunRecount(t, storetest.Harness{
		New: func(t *testing.T) chatmem.Store { return open(t, newSchema(t)) },
		Reopen: func(t *testing.T, s chatmem.Store) chatmem.Store {
			return open(t, s.(*postgres.Store).Schema())
		},
	})
}

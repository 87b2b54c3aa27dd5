package memory_test

import (
	"testing"

	"chatmem"
	"chatmem/memory"
	"chatmem/storetest"
)

func TestRecount(t *testing.T) {
	storetest.RunRecount(t, storetest.Harness{
		New: func(t *testing.T) chatmem.Store { return memory.New() },
	})
}

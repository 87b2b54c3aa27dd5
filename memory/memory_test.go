package memory_test

import (
	"testing"

	"chatmem"
	"chatmem/memory"
	"chatmem/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) chatmem.Store { return memory.New() },
	})
}

func BenchmarkTail(b *testing.B) {
	storetest.BenchmarkTail(b, memory.New(), []int{1000, 100000, 1000000})
}

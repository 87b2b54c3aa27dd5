package memory_test

import (
	"testing"

	"github.com/chatmem/chatmem"
	"github.com/chatmem/chatmem/memory"
	"github.com/chatmem/chatmem/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New:  func(t *testing.T) chatmem.Store { return memory.New() },
		Dump: func(t *testing.T, s chatmem.Store) []byte { return memory.Dump(s.(*memory.Store)) },
	})
}

func BenchmarkTail(b *testing.B) {
	storetest.BenchmarkTail(b, memory.New(), []int{1000, 100000, 1000000})
}

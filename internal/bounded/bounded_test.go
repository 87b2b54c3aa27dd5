package bounded

import (
	"sync"
	"testing"
)

func TestMapStartsOverAtMaxEntries(t *testing.T) {
	c := Map[int, string]{MaxEntries: 3}
	for i := range 3 {
		c.Put(i, "v", 0)
	}
	if n := c.Len(); n != 3 {
		t.Fatalf("Len = %d after 3 puts, want 3", n)
	}
	c.Put(1, "again", 0) // full: starts over, then holds 1 only
	if _, ok := c.Get(0); ok {
		t.Errorf("Get(0) found a value after the map started over")
	}
	if v, ok := c.Get(1); !ok || v != "again" {
		t.Errorf("Get(1) = %q, %v; want again, true", v, ok)
	}
	if n := c.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
}

func TestMapStartsOverAtMaxBytes(t *testing.T) {
	c := Map[string, int]{MaxBytes: 100}
	c.Put("a", 1, 60)
	c.Put("b", 2, 60) // 60 < 100: kept; now 120
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	c.Put("c", 3, 1) // 120 >= 100: starts over
	if _, ok := c.Get("a"); ok || c.Len() != 1 {
		t.Errorf("after the byte bound: Get(a) ok=%v, Len %d; want false, 1", ok, c.Len())
	}
}

func TestMapUnbounded(t *testing.T) {
	var c Map[int, int]
	for i := range 1000 {
		c.Put(i, i, 1<<20)
	}
	if c.Len() != 1000 {
		t.Errorf("Len = %d, want 1000 with no bounds", c.Len())
	}
}

func TestMapUpdateDeleteClear(t *testing.T) {
	var c Map[string, int]
	inc := func(v int, ok bool) (int, bool) { return v + 1, true }
	if !c.Update("k", 0, inc) || !c.Update("k", 0, inc) {
		t.Fatal("Update that stores reported false")
	}
	if v, _ := c.Get("k"); v != 2 {
		t.Errorf("after two increments Get = %d, want 2", v)
	}
	if c.Update("k", 0, func(v int, ok bool) (int, bool) { return 99, false }) {
		t.Error("Update that does not store reported true")
	}
	if v, _ := c.Get("k"); v != 2 {
		t.Errorf("Update that did not store changed the value to %d", v)
	}
	c.Delete("k")
	if _, ok := c.Get("k"); ok {
		t.Error("Get found a deleted value")
	}
	c.Put("x", 1, 0)
	c.Clear()
	if c.Len() != 0 {
		t.Errorf("Len = %d after Clear", c.Len())
	}
}

func TestMapConcurrentUpdates(t *testing.T) {
	var c Map[int, int]
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Update(0, 0, func(v int, _ bool) (int, bool) { return v + 1, true })
			}
		})
	}
	wg.Wait()
	if v, _ := c.Get(0); v != 8000 {
		t.Errorf("after 8000 concurrent increments Get = %d", v)
	}
}

func TestMapHitAllocatesNothing(t *testing.T) {
	c := Map[string, int]{MaxEntries: 10}
	c.Put("k", 1, 0)
	if n := testing.AllocsPerRun(100, func() { c.Get("k") }); n != 0 {
		t.Errorf("Get allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { c.Put("k", 2, 0) }); n != 0 {
		t.Errorf("Put of an existing key allocates %v times", n)
	}
}

//go:build linux

package httpapi

import "syscall"

// yieldCPU gives the calling thread's CPU to any thread waiting to run on
// it before the caller goes on with work that nobody is waiting for.
//
// The chat proxy calls it after flushing a response and before committing
// the turn. Linux wakes the thread that reads the response (a goroutine's
// thread in a co-located client, or a runtime thread handing it on) on the
// CPU of the thread that woke it, and on a two-CPU virtual machine
// (`perf sched timehist`) it then waited there, up to the whole commit
// (0.4 ms), while the other CPU was idle. sched_yield lets it run first;
// with nothing waiting it returns at once.
func yieldCPU() { _, _, _ = syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }

//go:build unix

package storetest

import (
	"syscall"
	"time"
)

// CPUTime returns the CPU time the process has used, user and system: on a
// machine shared with other work it tells a benchmark's cost better than
// the wall clock. It is 0 where the platform does not say.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

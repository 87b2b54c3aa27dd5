//go:build !unix

package storetest

import "time"

// CPUTime returns 0: the benchmarks report no CPU time here.
func CPUTime() time.Duration { return 0 }

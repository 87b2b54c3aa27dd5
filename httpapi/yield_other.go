//go:build !linux

package httpapi

// yieldCPU does nothing here: the wake-up placement it answers for is
// Linux's (see yield_linux.go).
func yieldCPU() {}

//go:build unix

package sign

import (
	"syscall"
	"time"
)

// processCPU is the CPU time the process has used (user and system):
// on a shared machine a benchmark's CPU per operation moves far less
// with other load than its wall time does.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

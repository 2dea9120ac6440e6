//go:build unix

package server

import "syscall"

// openFileLimit is RLIMIT_NOFILE's soft limit (which Go raises to the hard
// limit at start), or 1024 if it can't be read.
func openFileLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == 0 {
		return 1024
	}
	return int(min(r.Cur, 1<<30))
}

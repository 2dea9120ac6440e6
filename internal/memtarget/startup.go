package memtarget

import "runtime/debug"

// ReleaseStartup gives back what start-up alone needed, once the process
// is ready: the heap's free pages (debug.FreeOSMemory) and, on Linux, the
// pages of the executable that start-up read (package initialisation,
// configuration, opening the spool) and that were left resident (see
// releaseExecutable). What is used again afterwards is faulted back in as
// it is touched; nothing else changes.
func ReleaseStartup() {
	debug.FreeOSMemory()
	releaseExecutable()
}

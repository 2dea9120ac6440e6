// Package pageout reads the process's file mappings and asks the kernel
// to reclaim their resident pages without changing their contents.
package pageout

// Mapping is one file-backed mapping of the process's address space:
// [Start, End), whether it is writable, and the file's path.
type Mapping struct {
	Start, End uint64
	Writable   bool
	Path       string
}

package memtarget

import (
	"os"

	"github.com/hookpace/hookpace/internal/pageout"
)

// releaseExecutable asks the kernel to reclaim the resident pages of the
// executable's read-only mappings (its code and read-only data), which
// never changes a page's contents: a page touched again is read back from
// the file. Package initialisation alone touches some 20 MiB of a binary
// that links the Kubernetes and gRPC libraries, and the kernel maps the
// pages around each one touched too; those pages are clean, but they
// count in the process's resident set until memory is short. Writable
// mappings are left alone.
func releaseExecutable() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	maps, err := pageout.Mappings()
	if err != nil {
		return
	}
	for _, m := range maps {
		if m.Path == exe && !m.Writable {
			pageout.Release(m.Start, m.End)
		}
	}
}

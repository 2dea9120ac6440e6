package memtarget

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// releaseExecutable asks the kernel to reclaim the resident pages of the
// executable's read-only mappings (its code and read-only data) with
// MADV_PAGEOUT, which never changes a page's contents: a page touched
// again is read back from the file. Package initialisation alone touches
// some 20 MiB of a binary that links the Kubernetes and gRPC libraries,
// and the kernel maps the pages around each one touched too; those pages
// are clean, but they count in the process's resident set until memory
// is short. Writable mappings are left alone.
func releaseExecutable() {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := bytes.Fields(sc.Bytes())
		if len(f) < 6 || string(f[5]) != exe || len(f[1]) < 2 || f[1][1] == 'w' {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		// Errors are ignored: an older kernel without MADV_PAGEOUT (before
		// 5.4) answers EINVAL and keeps the pages, which is all that is lost.
		syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout)
	}
}

const madvPageout = 21 // MADV_PAGEOUT, Linux 5.4

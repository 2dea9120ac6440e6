package pageout

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// Mappings lists the process's mappings of files (those /proc/self/maps
// names with a path), in address order.
func Mappings() ([]Mapping, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	var out []Mapping
	for line := range bytes.Lines(b) {
		// start-end perms offset dev inode path
		f := bytes.Fields(line)
		if len(f) < 6 || len(f[1]) < 2 {
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
		out = append(out, Mapping{Start: start, End: end, Writable: f[1][1] == 'w', Path: string(f[5])})
	}
	return out, nil
}

// Release asks the kernel to reclaim the resident pages of [start, end)
// (MADV_PAGEOUT, Linux 5.4+). Contents never change: a page touched again
// is read back from its file. Errors are ignored: a range unmapped
// meanwhile gives ENOMEM and an older kernel EINVAL, and either way all
// that is lost is the reclaim.
func Release(start, end uint64) {
	syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout)
}

const madvPageout = 21 // MADV_PAGEOUT

package spool

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Badger maps its files (value log, memtable WAL, tables) into memory and
// keeps them mapped, so every page it has written or read stays in the
// process's resident set as page cache, long after it is needed. A sidecar
// is judged by its RSS, so trimResident asks the kernel to reclaim those
// pages (MADV_PAGEOUT: contents are preserved; a later read faults them
// back in). It leaves alone the files Badger is writing (the newest value
// log and memtable WAL of each database): reclaiming pages under its writes
// would stall them. It only runs when the spool's mappings hold more than
// limit bytes.
func trimResident(dir string, limit int64) {
	if rssFile() < limit {
		return
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	prefix := abs + string(filepath.Separator)
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	type region struct {
		start, end uint64
		path       string
	}
	var regions []region
	newest := map[string]string{} // directory + extension -> newest file
	for _, line := range strings.Split(string(b), "\n") {
		// start-end perms offset dev inode path
		fields := strings.Fields(line)
		if len(fields) < 6 || !strings.HasPrefix(fields[5], prefix) {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		path := fields[5]
		regions = append(regions, region{start, end, path})
		if ext := filepath.Ext(path); ext == ".vlog" || ext == ".mem" {
			// Badger numbers files in order, zero-padded: the greatest
			// name is the one being written.
			k := filepath.Dir(path) + ext
			if path > newest[k] {
				newest[k] = path
			}
		}
	}
	for _, r := range regions {
		if newest[filepath.Dir(r.path)+filepath.Ext(r.path)] == r.path {
			continue
		}
		// Errors are ignored on purpose: a mapping Badger has just
		// unmapped gives ENOMEM, and MADV_PAGEOUT never changes contents,
		// whatever is mapped at the address by now.
		syscall.Syscall(syscall.SYS_MADVISE, uintptr(r.start), uintptr(r.end-r.start), madvPageout)
	}
}

const madvPageout = 0x15 // MADV_PAGEOUT, Linux 5.4+

// rssFile is the file-backed part of the resident set, in bytes.
func rssFile() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	i := bytes.Index(b, []byte("RssFile:"))
	if i < 0 {
		return 0
	}
	line := b[i+len("RssFile:"):]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(line)), "kB")), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}

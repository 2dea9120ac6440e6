package spool

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Badger maps its files (value log, memtable WAL, tables) into memory and
// keeps them mapped, so every page it has written or read stays in the
// process's resident set as page cache, long after it is needed. A sidecar
// is judged by its RSS, so trimResident asks the kernel to reclaim those
// pages (MADV_PAGEOUT: contents are preserved; a later read faults them
// back in). The files Badger is appending to (the newest value log and
// memtable WAL of each database) are trimmed only up to writeMargin behind
// their write head: reclaiming the pages under its writes would stall
// them, but what lies behind is as finished as any older file, and during
// a burst those two files are most of what is resident (100 MiB
// of 216 at the peak of 200,000 webhooks over 5,000 hosts). It only runs
// when the spool's mappings hold more than limit bytes.
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
		end := r.end
		if newest[filepath.Dir(r.path)+filepath.Ext(r.path)] == r.path {
			end = residentEnd(r.start, r.end)
			if end < r.start+writeMargin {
				continue
			}
			end -= writeMargin
		}
		// Errors are ignored on purpose: a mapping Badger has just
		// unmapped gives ENOMEM, and MADV_PAGEOUT never changes contents,
		// whatever is mapped at the address by now.
		syscall.Syscall(syscall.SYS_MADVISE, uintptr(r.start), uintptr(end-r.start), madvPageout)
	}
}

// writeMargin is how much of a file Badger is appending to stays resident
// behind its write head: more than one group-commit round writes.
const writeMargin = 1 << 20

// residentEnd is the end of the last resident page in the mapping
// [start, end), or start if none is. Badger's files are sparse beyond
// what it has written, so in a file it appends to this is the write head
// (to the page), which is all the trimmer needs to know of it.
func residentEnd(start, end uint64) uint64 {
	pages := (end - start + pageSize - 1) / pageSize
	vec := make([]byte, pages)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(start), uintptr(end-start), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return start // unmapped meanwhile: nothing to trim
	}
	for i := len(vec) - 1; i >= 0; i-- {
		if vec[i]&1 != 0 {
			return start + uint64(i+1)*pageSize
		}
	}
	return start
}

var pageSize = uint64(os.Getpagesize())

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

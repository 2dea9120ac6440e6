package spool

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hookpace/hookpace/internal/pageout"
)

// Badger maps its files (value log, memtable WAL, tables) into memory and
// keeps them mapped, so every page it has written or read stays in the
// process's resident set as page cache, long after it is needed. A sidecar
// is judged by its RSS, so trimResident asks the kernel to reclaim those
// pages (pageout.Release: contents are preserved; a later read faults them
// back in). The files Badger is appending to (the newest value log and
// memtable WAL of each database) are trimmed only up to writeMargin behind
// their write head: reclaiming the pages under its writes would stall
// them, but what lies behind is as finished as any older file, and during
// a burst those two files are most of what is resident (100 MiB
// of 216 at the peak of 200,000 webhooks over 5,000 hosts). It only runs
// when the spool's mappings hold more than limit bytes; after a pass that
// took little (trimFutile), only once they hold trimStep more than it left
// or it is trimAgainAfter old. A limit of 0 trims at once.
func trimResident(dir string, limit int64) {
	rss := rssFile()
	if rss < limit || limit > 0 && trimFutile.Load() && rss < trimmedTo.Load()+trimStep && trimNow().UnixNano() < trimmedAt.Load()+int64(trimAgainAfter) {
		return
	}
	trimPasses.Add(1)
	defer func() {
		after := rssFile()
		trimmedTo.Store(after)
		trimmedAt.Store(trimNow().UnixNano())
		trimFutile.Store(rss-after < trimStep/4)
	}()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return
	}
	prefix := abs + string(filepath.Separator)
	maps, err := pageout.Mappings()
	if err != nil {
		return
	}
	var regions []pageout.Mapping
	newest := map[string]string{} // directory + extension -> newest file
	for _, m := range maps {
		if !strings.HasPrefix(m.Path, prefix) {
			continue
		}
		regions = append(regions, m)
		if ext := filepath.Ext(m.Path); ext == ".vlog" || ext == ".mem" {
			// Badger numbers files in order, zero-padded: the greatest
			// name is the one being written.
			k := filepath.Dir(m.Path) + ext
			if m.Path > newest[k] {
				newest[k] = m.Path
			}
		}
	}
	for _, r := range regions {
		end := r.End
		if newest[filepath.Dir(r.Path)+filepath.Ext(r.Path)] == r.Path {
			end = residentEnd(r.Start, r.End)
			if end < r.Start+writeMargin {
				continue
			}
			end -= writeMargin
		}
		// A mapping Badger has just unmapped is not reclaimed, and a
		// reclaim never changes contents, whatever is mapped there now.
		pageout.Release(r.Start, end)
	}
}

// trimWhileOpening trims the spool's mappings every residentTrimEvery until
// stop is called, for the span of Open before gcLoop's trimming starts.
// In that span Badger compacts what the last run left in level 0, and the
// spool reads every queued record once (counts, the journal's index);
// with small records inline in the tables, both touch every page of a
// backlog's tables, far faster than a trim per scan chunk keeps up with.
func trimWhileOpening(dir string, limit int64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(residentTrimEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				trimResident(dir, limit)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// trimmedTo is the process's file-backed resident set as the last trim
// pass left it (at trimmedAt, Unix nanoseconds), and trimFutile says that
// pass took less than a quarter of trimStep: what is left is what
// trimming cannot give back (the executable's pages, the write margins,
// pages not yet written back, which no pass can take until they are).
// When that alone is above the limit, a pass every tick would find
// nothing to take and cost a core's few percent, idle; so after a futile
// pass the next waits until the set has grown trimStep beyond it, or for
// trimAgainAfter, by when what was being written back is clean. A pass
// that took its share keeps the tick: a burst is trimmed as before.
var (
	trimmedTo, trimmedAt atomic.Int64
	trimFutile           atomic.Bool
)

const (
	trimStep       = 4 << 20
	trimAgainAfter = 2 * time.Second
)

// trimNow is the trimmer's clock (tests stop it).
var trimNow = time.Now

// trimPasses counts the passes that ran, for tests.
var trimPasses atomic.Int64

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

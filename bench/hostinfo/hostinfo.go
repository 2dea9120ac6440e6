// Package hostinfo describes the machine a benchmark runs on, for the
// benchmarks' reports: its load, the file system under a directory, and
// how fast that disk makes a write durable.
package hostinfo

import (
	"bytes"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
)

// LoadAvg is /proc/loadavg's three averages, or "?".
func LoadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// FSType names the file system that holds dir, from /proc/mounts: its
// type and device, and whether it discards online; "?" if unknown.
func FSType(dir string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "?"
	}
	best, typ := "", "?"
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		if (dir == f[1] || strings.HasPrefix(dir, strings.TrimSuffix(f[1], "/")+"/")) && len(f[1]) >= len(best) {
			best, typ = f[1], f[2]+" on "+f[0]
			if len(f) > 3 && slices.Contains(strings.Split(f[3], ","), "discard") {
				typ += ", mounted with online discard"
			}
		}
	}
	return typ
}

// DiskSample is what ProbeDisk measured.
type DiskSample struct {
	Lat    []time.Duration // each write+fdatasync, in order
	SecMax []time.Duration // the worst in each second of the probe
}

// Sorted is the latencies, shortest first.
func (p *DiskSample) Sorted() []time.Duration {
	lat := slices.Clone(p.Lat)
	slices.Sort(lat)
	return lat
}

// Over counts the syncs that took longer than limit.
func (p *DiskSample) Over(limit time.Duration) int {
	n := 0
	for _, l := range p.Lat {
		if l > limit {
			n++
		}
	}
	return n
}

// ProbeDisk appends 22 KB (a group commit's worth of records) to a file in
// dir and fdatasyncs it, for d, one sync every `every` (0: back to back):
// the floor under every durable write, and the source of stalls no server
// that fsyncs can hide.
func ProbeDisk(dir string, d, every time.Duration) (*DiskSample, error) {
	f, err := os.CreateTemp(dir, "disk-probe-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := bytes.Repeat([]byte("x"), 22000)
	p := &DiskSample{}
	var size int64
	start := time.Now()
	for next := start; next.Sub(start) < d && time.Since(start) < d; next = next.Add(every) {
		if w := time.Until(next); w > 0 {
			time.Sleep(w)
		}
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		l := time.Since(t0)
		p.Lat = append(p.Lat, l)
		sec := int(t0.Sub(start) / time.Second)
		for len(p.SecMax) <= sec {
			p.SecMax = append(p.SecMax, 0)
		}
		p.SecMax[sec] = max(p.SecMax[sec], l)
		if size += int64(len(buf)); size > 64<<20 {
			f.Seek(0, io.SeekStart)
			size = 0
		}
	}
	return p, nil
}

package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/spool"
)

// probeEnv names the spool directory a re-run of the test binary opens to
// measure its memory alone (journalProbe), instead of running tests.
const probeEnv = "HOOKPACE_JOURNAL_PROBE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(probeEnv); dir != "" {
		if err := journalProbe(dir, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// probeResult is what journalProbe measured, in bytes.
type probeResult struct {
	HWM, Anon, File, Heap int64
}

// journalProbe opens the spool in dir, as hookpace does, reads its
// journal the ways msg list does, sweeps it, and writes the process's
// memory as JSON: the peak resident set (VmHWM), its anonymous and file
// parts now, and the Go heap in use.
func journalProbe(dir string, out *os.File) error {
	s, err := openSpool(dir, testOpts{MaxBytes: 1 << 40, Journal: Options{MaxBytes: 1 << 40, Retain: 60 * 24 * time.Hour}})
	if err != nil {
		return err
	}
	for _, q := range []Query{{}, {State: spool.OutcomeDead}, {State: spool.StateQueued}, {Host: "p7.example"}, {Host: "p7.example", State: spool.OutcomeDead},
		{Idempotency: "evt-7"}, {Contains: "/order-7/"}, {Since: time.Now().Add(-8 * 24 * time.Hour), Until: time.Now().Add(-7 * 24 * time.Hour)}} {
		if _, _, err := journalOf(s).List(q); err != nil {
			return err
		}
	}
	if _, err := journalOf(s).SweepJournal(time.Now()); err != nil {
		return err
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if path := os.Getenv(probeEnv + "_HEAP"); path != "" { // a heap profile too, to see what holds it
		if f, err := os.Create(path); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	st, _ := os.ReadFile("/proc/self/status")
	r := probeResult{HWM: statusKB(st, "VmHWM:"), Anon: statusKB(st, "RssAnon:"), File: statusKB(st, "RssFile:"), Heap: int64(ms.HeapInuse)}
	if err := s.Close(); err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(r)
}

func statusKB(status []byte, field string) int64 {
	i := bytes.Index(status, []byte(field))
	if i < 0 {
		return 0
	}
	line, _, _ := strings.Cut(string(status[i+len(field):]), "\n")
	kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), "kB")), 10, 64)
	return kb << 10
}

// BenchmarkJournalMemory measures what a journal of -journal-entries
// webhooks (journalMix) costs a process that opens it, lists and sweeps
// it, with nothing queued: the test binary run again on the spool
// (journalProbe), so that filling it does not count.
//
//	go test ./spool -run '^$' -bench JournalMemory -benchtime 1x -journal-entries 1000000
func BenchmarkJournalMemory(b *testing.B) {
	m := journalMix{n: *journalEntries, hosts: 5_000, first: 1 << 20, step: 14 * 24 * time.Hour / time.Duration(*journalEntries)}
	m.start = time.Now().Add(-time.Duration(m.n) * m.step)
	dir := b.TempDir()
	s := openTest(b, dir, testOpts{MaxBytes: 1 << 40, Journal: Options{MaxBytes: 1 << 40, Retain: 60 * 24 * time.Hour}})
	m.fill(b, s)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), probeEnv+"="+dir)
		cmd.Stderr = os.Stderr
		outb, err := cmd.Output()
		if err != nil {
			b.Fatalf("probe: %v", err)
		}
		var r probeResult
		if err := json.Unmarshal(outb, &r); err != nil {
			b.Fatalf("probe said %q: %v", outb, err)
		}
		b.ReportMetric(float64(r.HWM)/(1<<20), "hwm-MiB")
		b.ReportMetric(float64(r.Anon)/(1<<20), "anon-MiB")
		b.ReportMetric(float64(r.File)/(1<<20), "file-MiB")
		b.ReportMetric(float64(r.Heap)/(1<<20), "heap-MiB")
	}
}

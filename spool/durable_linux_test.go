package spool

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// TestAcknowledgedWritesAreSyncedWhenMemtablesRetire checks, from the
// kernel's side, that an append is on disk by the time it is acknowledged
// even when Badger retires a memtable in the middle of a round. Badger's
// DB.Sync syncs only the newest memtable's WAL, so with SyncWrites off the
// tail of a retired one stayed in the page cache alone until Badger had
// flushed it to a table. Here compaction is off and level 0 stalls at two
// table, so retired memtables wait, still mapped, for a flush that never
// comes. Once every Append has returned, no page of any WAL may still be
// dirty (not yet written back), as /proc/self/smaps reports it; nor of the
// newest value-log file. (Where Badger syncs a value-log file it has moved
// on from, it then truncates it to its end, and zeroing the rest of its
// last page dirties that page again; its data was synced before.)
func TestAcknowledgedWritesAreSyncedWhenMemtablesRetire(t *testing.T) {
	if inChild(t) {
		return
	}
	dir := t.TempDir()
	s := openTest(t, dir, Options{
		tuneQueue: func(o badger.Options) badger.Options {
			return o.WithMemTableSize(1 << 20).WithNumMemtables(16).
				WithNumCompactors(0).WithNumLevelZeroTables(1).WithNumLevelZeroTablesStall(2)
		},
		trimLimit: math.MaxInt64, // paging out would write dirty pages back and hide them
	})
	// Not closed: the stalled flush would never let Badger close, so the
	// test runs in a child process (inChild), whose exit ends Badger's
	// background work with it.
	// Rounds of 64 records of 3 KiB, inline, take two transactions each
	// (Badger's limit is 15% of the memtable), so that a memtable may
	// retire between two commits of one round.
	body := bytes.Repeat([]byte("x"), 3<<10)
	appendFrom(t, s, 64, 40, body)
	dirty, newest := dirtyMappings(t, filepath.Join(dir, "queue"))
	retired := 0
	for path := range dirty {
		if filepath.Ext(path) == ".mem" && path != newest[".mem"] {
			retired++
		}
	}
	if retired == 0 {
		t.Fatal("no retired memtable is still mapped: the test did not exercise what it is for")
	}
	for path, kb := range dirty {
		if kb > 0 && (filepath.Ext(path) == ".mem" || path == newest[".vlog"]) {
			t.Errorf("%s: %d kB acknowledged but not yet on disk", filepath.Base(path), kb)
		}
	}
}

// TestAcknowledgedLargeBodiesAreSyncedWhenValueLogsRotate: bodies over
// ValueThreshold go to the value log; when Badger moves on to a new
// value-log file in the middle of a round, the one it left holds
// acknowledged bodies too. Once every Append has returned, no page of any
// log may still be dirty, save the last page of a value-log file Badger
// truncated after it was synced (see above).
func TestAcknowledgedLargeBodiesAreSyncedWhenValueLogsRotate(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{
		tuneQueue: func(o badger.Options) badger.Options {
			return o.WithValueLogFileSize(1 << 20)
		},
		trimLimit: math.MaxInt64,
	})
	defer s.Close()
	body := bytes.Repeat([]byte("y"), 2*ValueThreshold)
	appendFrom(t, s, 16, 40, body)
	dirty, newest := dirtyMappings(t, filepath.Join(dir, "queue"))
	vlogs := 0
	for path := range dirty {
		if filepath.Ext(path) == ".vlog" {
			vlogs++
		}
	}
	if vlogs < 3 {
		t.Fatalf("%d value-log files mapped: the test did not make them rotate", vlogs)
	}
	for path, kb := range dirty {
		limit := 0
		if filepath.Ext(path) == ".vlog" && path != newest[".vlog"] {
			limit = 4 // the page the truncation zeroed
		}
		if kb > limit {
			t.Errorf("%s: %d kB acknowledged but not yet on disk", filepath.Base(path), kb)
		}
	}
}

// TestDeadLettersAreSyncedWhenAcknowledged is the same check for the kept
// database: dead letters (committed before the queue forgets their
// messages) are on disk once the writer has said so, even when Badger
// retires the kept database's memtables between commits. The journal's
// package runs it with the journal's entries of their outcomes too.
func TestDeadLettersAreSyncedWhenAcknowledged(t *testing.T) {
	testKeptSynced(t, func(o Options) (*Spool, func()) {
		s, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return s, func() {}
	})
}

// testKeptSynced runs the check on the spool open opens with o, after
// settle has returned (the history's records durable).
func testKeptSynced(t *testing.T, open func(o Options) (s *Spool, settle func())) {
	if inChild(t) {
		return
	}
	dir := t.TempDir()
	s, settle := open(Options{
		Dir: dir,
		tuneKept: func(o badger.Options) badger.Options {
			return o.WithMemTableSize(256 << 10).WithNumMemtables(16).
				WithNumCompactors(0).WithNumLevelZeroTables(1).WithNumLevelZeroTablesStall(2)
		},
		trimLimit: math.MaxInt64,
	})
	// Not closed, as above.
	body := bytes.Repeat([]byte("z"), 3<<10) // a dead letter's record, inline
	const n = 800
	ms := make([]*Message, n)
	for i := range ms {
		ms[i] = newMsg("a.example", i)
		ms[i].Body = body
		if err := s.Append(t.Context(), ms[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		s.Bury(m, "gave up", time.Unix(1700000100, 0))
	}
	// The writer's rounds run in order: once a later op is answered, every
	// dead letter before it is written, and its journal entry handed on.
	if err := s.Append(t.Context(), newMsg("b.example", n), 0); err != nil {
		t.Fatal(err)
	}
	settle()
	if _, total, err := s.ListDead(DeadFilter{}, 1); err != nil || total != n {
		t.Fatalf("%d dead letters (%v), want %d", total, err, n)
	}
	dirty, newest := dirtyMappings(t, filepath.Join(dir, "dead"))
	retired := 0
	for path := range dirty {
		if filepath.Ext(path) == ".mem" && path != newest[".mem"] {
			retired++
		}
	}
	if retired == 0 {
		t.Fatal("no retired memtable of the kept database is still mapped: the test did not exercise what it is for")
	}
	for path, kb := range dirty {
		if kb > 0 && (filepath.Ext(path) == ".mem" || path == newest[".vlog"]) {
			t.Errorf("%s: %d kB acknowledged but not yet on disk", filepath.Base(path), kb)
		}
	}
}

// dirtyMappings reads /proc/self/smaps for the .vlog and .mem files mapped
// from dir: the dirty kB of each, and the newest file of each kind (Badger
// numbers them in order, zero-padded).
func dirtyMappings(t *testing.T, dir string) (dirty map[string]int, newest map[string]string) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	defer f.Close()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	dirty = map[string]int{}
	newest = map[string]string{}
	current := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header line
			current = ""
			if len(fields) >= 6 && strings.HasPrefix(fields[5], abs+"/") {
				if ext := filepath.Ext(fields[5]); ext == ".vlog" || ext == ".mem" {
					current = fields[5]
					dirty[current] += 0
					newest[ext] = max(newest[ext], current)
				}
			}
			continue
		}
		if current != "" && (fields[0] == "Shared_Dirty:" || fields[0] == "Private_Dirty:") && len(fields) >= 2 {
			kb, _ := strconv.Atoi(fields[1])
			dirty[current] += kb
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return dirty, newest
}

// appendFrom appends writers × each messages of body to s from writers
// goroutines at once, so that their appends share rounds, and fails the
// test on the first error.
func appendFrom(t *testing.T, s *Spool, writers, each int, body []byte) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m := newMsg("a.example", w*each+i)
				m.Body = body
				if err := s.Append(t.Context(), m, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// childTest names, in a child's environment, the one test it runs.
const childTest = "HOOKPACE_SPOOL_CHILD_TEST"

// inChild runs the calling test alone in a child process of the test
// binary and reports true in the parent, whose verdict is then the
// child's; in that child it reports false, and the test runs. It is for a
// test that leaves a spool open on purpose: Badger's background work on a
// database nobody closes must end with its process, not run on into other
// tests after the test's temporary directory has gone.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childTest) == t.Name() {
		return false
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childTest+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")) {
		t.Fatalf("%s in a child process: %v\n%s", t.Name(), err, out)
	}
	return true
}

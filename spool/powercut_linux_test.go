package spool

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/hookpace/hookpace/internal/powercut"
)

// powerCutEnv names the spool directory a re-run of the test binary
// writes to until it is killed (powerCutChild), instead of running tests:
// the spool maps its logs, and a process must not fault in pages of a
// FUSE mount it serves itself.
const powerCutEnv = "HOOKPACE_POWERCUT_SPOOL"

// TestMain runs a power-cut child when asked (powerCutEnv), after every
// package's init: the journal's opener (OpenJournaled) is set by the
// external test package's.
func TestMain(m *testing.M) {
	if dir := os.Getenv(powerCutEnv); dir != "" {
		os.Exit(powerCutChild(dir, os.Getenv(powerCutEnv+"_JOURNAL") == "on", pcLoads[os.Getenv(powerCutEnv+"_LOAD")]))
	}
	os.Exit(m.Run())
}

// pcLoad is what a power-cut child writes: writers append in parallel
// (so that rounds hold several appends), bodies of sizes in turn; every
// other acknowledged webhook is delivered and deleted (DeleteThen).
type pcLoad struct {
	writers int
	sizes   []int
	tune    func(badger.Options) badger.Options // the queue's
	idle    bool                                // open the spool, write nothing
}

// pcSmall: 1 MiB memtables and value-log files, so that both rotate often.
func pcSmall(o badger.Options) badger.Options {
	return o.WithMemTableSize(1 << 20).WithValueLogFileSize(1 << 20)
}

var pcLoads = map[string]pcLoad{
	// Bodies inline (under valueThreshold) and in the value log.
	"mixed": {writers: 4, sizes: []int{120, 5000, 300, 9000}, tune: pcSmall},
	"idle":  {idle: true, tune: pcSmall},
	// Bodies inline only.
	"inline": {writers: 4, sizes: []int{120, 2000, 300, 3500}, tune: pcSmall},
	// Rounds of 64 inline records of 3,000 bytes take two transactions
	// (Badger's limit is 15% of the memtable), so that a memtable may
	// retire between two commits of one round; and flushes stall at two
	// level-0 tables, so that the retired memtables wait, in their logs
	// alone, for a flush that does not come.
	"retiring": {writers: 64, sizes: []int{3000}, tune: func(o badger.Options) badger.Options {
		return pcSmall(o).WithNumMemtables(16).WithNumCompactors(0).WithNumLevelZeroTables(1).WithNumLevelZeroTablesStall(2)
	}},
}

func pcHost(w int) string { return "h" + strconv.Itoa(w%2) + ".example" }

// pcBody is writer w's i-th body: its size from l.sizes, its bytes naming
// it, so that a body read back is checked byte for byte.
func (l pcLoad) body(w, i int) []byte {
	tag := fmt.Sprintf("w%d.i%d;", w, i)
	n := l.sizes[i%len(l.sizes)]
	return bytes.Repeat([]byte(tag), n/len(tag)+1)[:n]
}

func pcOptions(dir string, tune func(badger.Options) badger.Options) Options {
	return Options{
		Dir:       dir,
		tuneQueue: tune,
		tuneKept:  pcSmall,
	}
}

// pcOpen opens the spool of o, with its journal when journal is on
// (OpenJournaled); without, the journal's calls do nothing.
func pcOpen(o Options, journal bool) (*Spool, PCJournal, error) {
	if journal {
		if OpenJournaled == nil {
			return nil, PCJournal{}, fmt.Errorf("no journal to open: OpenJournaled is not set")
		}
		return OpenJournaled(o)
	}
	s, err := Open(o)
	return s, PCJournal{Record: func(*Message, Attempt) {}}, err
}

// powerCutChild opens the spool in dir and writes to it until killed,
// printing a line on stdout for each acknowledgement: "A id w i" once an
// append has returned, "S id" before a delete is submitted, "D id" once
// DeleteThen has said it is durable; an idle one says "O" once the spool
// is open. It gives up after a minute.
func powerCutChild(dir string, journal bool, load pcLoad) int {
	s, jr, err := pcOpen(pcOptions(dir, load.tune), journal)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", a...)
	}
	if load.idle {
		say("O")
		time.Sleep(time.Minute)
		return 1
	}
	delivered := make(chan *Message, 1024)
	go func() {
		for m := range delivered {
			jr.Record(m, Attempt{At: time.Now(), Status: 200, Batch: 1})
			say("S %d", m.ID)
			s.DeleteThen([]*Message{m}, func(err error) {
				if err == nil {
					say("D %d", m.ID)
				}
			})
		}
	}()
	for w := range load.writers {
		go func() {
			for i := 0; ; i++ {
				m := newMsg(pcHost(w), i)
				m.Body = load.body(w, i)
				if err := s.Append(context.Background(), m, 0); err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(1)
				}
				say("A %d %d %d", m.ID, w, i)
				if i%2 == 1 {
					delivered <- m
				}
			}
		}()
	}
	time.Sleep(time.Minute)
	fmt.Fprintln(os.Stderr, "power-cut child: not killed within a minute")
	return 1
}

// TestAcknowledgedSurvivesPowerCut runs a spool on a file system that
// loses every write not yet synced when the power goes (powercut), under
// load, then kills it and cuts the power in the middle of its rounds. The
// spool reopened on what the disk holds must have every webhook whose
// append was acknowledged, byte for byte, unless its delete was submitted;
// none whose delete was acknowledged; and, with the journal on, every
// webhook that left the queue in the journal as delivered.
func TestAcknowledgedSurvivesPowerCut(t *testing.T) {
	for _, journal := range []bool{false, true} {
		t.Run(fmt.Sprintf("journal %v", journal), func(t *testing.T) {
			backing := t.TempDir()
			r := runPowerCut(t, backing, journal, "mixed", func(r *pcRun) bool {
				return len(r.acked) >= 2500 && len(r.acked)%100 == 0 && logs(t, filepath.Join(backing, "spool", "queue"), ".sst") > 0 &&
					logs(t, filepath.Join(backing, "spool", "queue"), ".vlog") >= 3
			})
			if len(r.deleted) == 0 {
				t.Fatal("no delete was acknowledged: the test did not exercise deletes")
			}
			checkAfterCut(t, backing, journal, pcLoads["mixed"], r)
		})
	}
}

// TestTornPowerCut: the same with a disk that had written some of what
// it was not told to keep (powercut.FS.CutTorn): every other block of the
// unsynced changes to each log, and a grown log's size. Bodies are
// inline: the memtable's log alone holds them.
func TestTornPowerCut(t *testing.T) {
	backing := t.TempDir()
	r := runCut(t, backing, true, "inline", (*powercut.FS).CutTorn, func(r *pcRun) bool {
		return len(r.acked) >= 2500 && len(r.acked)%100 == 0 && logs(t, filepath.Join(backing, "spool", "queue"), ".sst") > 0
	})
	checkAfterCut(t, backing, true, pcLoads["inline"], r)
}

// TestPowerCutJustAfterOpen: the power goes after a spool reopened (on
// which Badger starts new logs) and before it wrote anything. It must
// open again, with what it had acknowledged before.
func TestPowerCutJustAfterOpen(t *testing.T) {
	for _, journal := range []bool{false, true} {
		t.Run(fmt.Sprintf("journal %v", journal), func(t *testing.T) {
			backing := t.TempDir()
			r := runPowerCut(t, backing, journal, "mixed", func(r *pcRun) bool { return len(r.acked) >= 200 })
			runPowerCut(t, backing, journal, "idle", func(r *pcRun) bool { return r.open })
			checkAfterCut(t, backing, journal, pcLoads["mixed"], r)
		})
	}
}

// TestPowerCutWhileMemtablesRetire: the power goes while memtables
// retired in the middle of rounds wait to be flushed, their logs the only
// copy of what they hold.
func TestPowerCutWhileMemtablesRetire(t *testing.T) {
	backing := t.TempDir()
	r := runPowerCut(t, backing, false, "retiring", func(r *pcRun) bool {
		return len(r.acked)%64 == 0 && logs(t, filepath.Join(backing, "spool", "queue"), ".mem") >= 10
	})
	checkAfterCut(t, backing, false, pcLoads["retiring"], r)
}

// pcRun is what a power-cut child acknowledged.
type pcRun struct {
	acked              map[uint64]pcAck
	submitted, deleted map[uint64]bool
	open               bool // an idle child has opened the spool
}

type pcAck struct{ w, i int }

// runPowerCut mounts a power-cut file system over backing, runs a child
// on the spool in it until stop says so, kills it and cuts the power.
func runPowerCut(t *testing.T, backing string, journal bool, load string, stop func(*pcRun) bool) *pcRun {
	return runCut(t, backing, journal, load, (*powercut.FS).Cut, stop)
}

// runCut is runPowerCut, the power cut by cut.
func runCut(t *testing.T, backing string, journal bool, load string, cut func(*powercut.FS) (powercut.Stats, error), stop func(*pcRun) bool) *pcRun {
	t.Helper()
	f := powercut.Mount(t, backing)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), powerCutEnv+"="+filepath.Join(f.Dir, "spool"))
	if journal {
		cmd.Env = append(cmd.Env, powerCutEnv+"_JOURNAL=on")
	}
	cmd.Env = append(cmd.Env, powerCutEnv+"_LOAD="+load)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	r := &pcRun{acked: map[uint64]pcAck{}, submitted: map[uint64]bool{}, deleted: map[uint64]bool{}}
	stopped := false
	// Every line the child wrote before it died counts; a last line cut
	// short (no newline) does not.
	for lines := bufio.NewReader(out); ; {
		l, err := lines.ReadString('\n')
		if err != nil {
			break
		}
		var id uint64
		var a pcAck
		switch l[0] {
		case 'A':
			if _, err := fmt.Sscanf(l, "A %d %d %d", &id, &a.w, &a.i); err == nil {
				r.acked[id] = a
			}
		case 'S':
			if _, err := fmt.Sscanf(l, "S %d", &id); err == nil {
				r.submitted[id] = true
			}
		case 'D':
			if _, err := fmt.Sscanf(l, "D %d", &id); err == nil {
				r.deleted[id] = true
			}
		case 'O':
			r.open = true
		}
		if !stopped && stop(r) {
			// The power goes: the process first, with whatever it had in
			// flight, then what the disk had not been told to keep.
			stopped = true
			cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	cmd.Wait()
	if !stopped {
		t.Fatalf("the spool stopped before the test cut the power: %s", stderr.Bytes())
	}
	st, err := cut(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d appends and %d deletes acknowledged; %d WRITE and %d FSYNC requests; the cut discarded %d blocks of %d files",
		len(r.acked), len(r.deleted), st.Writes, st.Syncs, st.DiscardedBlocks, st.DiscardedFiles)
	return r
}

// checkAfterCut opens the spool in backing, as the disk holds it after a
// power cut, and checks it holds what r says was acknowledged.
func checkAfterCut(t *testing.T, backing string, journal bool, load pcLoad, r *pcRun) {
	t.Helper()
	dir := filepath.Join(backing, "spool")
	s, jr, err := pcOpen(pcOptions(dir, pcSmall), journal)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	queued := map[uint64]*Message{}
	for w := range 2 {
		ms, err := s.Read(pcHost(w), 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			queued[m.ID] = m
		}
	}
	lost, corrupt, undeleted, unjournaled := 0, 0, 0, 0
	for id, a := range r.acked {
		m := queued[id]
		switch {
		case m == nil && !r.submitted[id]:
			if lost++; lost <= 5 {
				t.Errorf("webhook %d (writer %d, #%d, %d bytes) was acknowledged and is gone", id, a.w, a.i, len(load.body(a.w, a.i)))
			}
		case m != nil && (!bytes.Equal(m.Body, load.body(a.w, a.i)) || m.Host != pcHost(a.w) || m.Header.Get("X-Seq") != strconv.Itoa(a.i)):
			if corrupt++; corrupt <= 5 {
				t.Errorf("webhook %d (writer %d, #%d) came back altered: %d bytes, host %s", id, a.w, a.i, len(m.Body), m.Host)
			}
		case m != nil && r.deleted[id]:
			if undeleted++; undeleted <= 5 {
				t.Errorf("webhook %d: its delete was acknowledged, and it is queued again", id)
			}
		case m == nil && journal:
			state, err := jr.Lookup(Ref{Seq: id})
			if err != nil || state != OutcomeDelivered {
				if unjournaled++; unjournaled <= 5 {
					t.Errorf("webhook %d left the queue and the journal has no outcome for it: %s %v", id, state, err)
				}
			}
		}
	}
	if lost+corrupt+undeleted+unjournaled > 0 {
		t.Fatalf("after the power cut: %d acknowledged webhooks lost, %d altered, %d deleted ones back, %d gone without a journal entry (of %d acknowledged, %d deletes)",
			lost, corrupt, undeleted, unjournaled, len(r.acked), len(r.deleted))
	}
}

// logs counts the files in dir whose names end in ext.
func logs(t *testing.T, dir, ext string) int {
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range names {
		if strings.HasSuffix(e.Name(), ext) {
			n++
		}
	}
	return n
}

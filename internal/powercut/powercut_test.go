package powercut

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// childEnv names the file a re-run of the test binary maps and writes
// (mapChild), instead of running tests: a process must not fault in pages
// of a FUSE mount it serves itself.
const childEnv = "POWERCUT_MAP_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		if err := mapChild(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const page = 4096

// mapChild creates path three pages long, writes "synced" into the first
// page of a shared mapping of it and msyncs, then writes "lost" into the
// second and unmaps and closes it without msync.
func mapChild(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(3 * page); err != nil {
		return err
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	copy(mem, "synced")
	if err := unix.Msync(mem, unix.MS_SYNC); err != nil {
		return err
	}
	copy(mem[page:], "lost")
	return unix.Munmap(mem)
}

// TestMappedWritesSurviveOnlyWithMsync: msync(MS_SYNC) of a shared
// mapping reaches the file system as a sync, and a dirty page written back
// without one (here when the file is closed) as a write that a cut
// discards.
func TestMappedWritesSurviveOnlyWithMsync(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+filepath.Join(f.Dir, "mapped"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mapping child: %v\n%s", err, out)
	}
	before := readFile(t, filepath.Join(backing, "mapped"))
	if len(before) != 3*page || !bytes.HasPrefix(before, []byte("synced")) || !bytes.HasPrefix(before[page:], []byte("lost")) {
		t.Fatalf("before the cut, the backing file is %d bytes starting %q, %q: the mapping's pages did not reach the file system",
			len(before), before[:min(6, len(before))], before[min(page, len(before)):min(page+4, len(before))])
	}
	if st := f.Stats(); st.Syncs == 0 {
		t.Fatalf("msync did not reach the file system as a sync: %+v", st)
	}
	if _, err := f.Cut(); err != nil {
		t.Fatal(err)
	}
	after := readFile(t, filepath.Join(backing, "mapped"))
	want := make([]byte, 3*page)
	copy(want, "synced")
	if !bytes.Equal(after, want) {
		t.Fatalf("after the cut, the file is %d bytes starting %q, page 2 %q; want 3 pages, %q then zeros",
			len(after), after[:min(6, len(after))], after[min(page, len(after)):min(page+4, len(after))], "synced")
	}
}

// TestCutDiscardsWhatWasNotSynced covers write(2), ftruncate and O_TRUNC:
// each is undone back to the file's last sync; a file never synced is
// left empty; a synced file is left alone.
func TestCutDiscardsWhatWasNotSynced(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	synced := bytes.Repeat([]byte("S"), 3*page+100)
	write := func(name string, flag int, data []byte, off int64, sync bool) {
		t.Helper()
		fh, err := os.OpenFile(filepath.Join(f.Dir, name), os.O_RDWR|flag, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		if data != nil {
			if _, err := fh.WriteAt(data, off); err != nil {
				t.Fatal(err)
			}
		}
		if sync {
			if err := fh.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	truncate := func(name string, size int64) {
		t.Helper()
		if err := os.Truncate(filepath.Join(f.Dir, name), size); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"overwritten", "shrunk", "emptied", "kept"} {
		write(name, os.O_CREATE, synced, 0, true)
	}
	write("overwritten", 0, bytes.Repeat([]byte("x"), 2*page), page+10, false) // over the middle and past the end
	truncate("shrunk", 10)
	write("shrunk", 0, []byte("y"), 2*page, false) // into what the truncation zeroed
	write("emptied", os.O_TRUNC, nil, 0, false)
	write("kept", 0, []byte("z"), 5, true)
	write("never synced", os.O_CREATE, []byte("n"), 0, false)
	truncate("never synced", 1<<20)
	st, err := f.Cut()
	if err != nil {
		t.Fatal(err)
	}
	if st.DiscardedFiles != 4 {
		t.Errorf("discarded %d files' changes, want 4", st.DiscardedFiles)
	}
	kept := bytes.Clone(synced)
	kept[5] = 'z'
	for name, want := range map[string][]byte{"overwritten": synced, "shrunk": synced, "emptied": synced, "kept": kept, "never synced": {}} {
		if got := readFile(t, filepath.Join(backing, name)); !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes after the cut, want %d (the content at its last sync)", name, len(got), len(want))
		}
	}
	if _, err := os.Stat(filepath.Join(backing, "never synced")); err != nil {
		t.Errorf("a created file's directory entry is durable at once: %v", err)
	}
}

// TestCutTornKeepsSomeUnsyncedBlocks: a torn cut keeps the new content
// of the even blocks changed since the last sync, puts the odd ones back,
// and keeps a grown file's size.
func TestCutTornKeepsSomeUnsyncedBlocks(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	fh, err := os.Create(filepath.Join(f.Dir, "torn"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Write(bytes.Repeat([]byte("S"), 4*page)); err != nil {
		t.Fatal(err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(bytes.Repeat([]byte("x"), 6*page), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CutTorn(); err != nil {
		t.Fatal(err)
	}
	got := readFile(t, filepath.Join(backing, "torn"))
	want := bytes.Repeat([]byte("x"), 6*page)
	copy(want[page:], bytes.Repeat([]byte("S"), page))
	copy(want[3*page:], bytes.Repeat([]byte("S"), page))
	if !bytes.Equal(got, want) {
		t.Fatalf("after a torn cut: %d bytes, blocks starting %q %q %q %q; want 6 blocks x S x S x x", len(got), got[0], got[page], got[2*page], got[3*page])
	}
}

// TestCutRefusesLaterChanges: once the power is off, nothing reaches the
// backing directory.
func TestCutRefusesLaterChanges(t *testing.T) {
	backing := t.TempDir()
	f := Mount(t, backing)
	fh, err := os.Create(filepath.Join(f.Dir, "open"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := f.Cut(); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.Write([]byte("late")); err == nil {
		t.Error("a write after the cut succeeded")
	}
	if got := readFile(t, filepath.Join(backing, "open")); len(got) != 0 {
		t.Errorf("a write after the cut reached the backing directory: %q", got)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

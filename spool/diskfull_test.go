package spool

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory. It needs
// root, as CI has, and fails the test without.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("this test mounts a tmpfs, which needs root: mount -t tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestDiskFullRefusesThenRecovers fills a 20 MiB tmpfs with the smallest
// min_free accepted, from 8 writers at once with bodies up to 1 MiB:
// appends must fail with ErrDiskFull, never crash the process (Badger
// writes through mappings: a page the file system cannot give is a
// SIGBUS), never lose an accepted message, and succeed again once
// delivered messages free the space.
func TestDiskFullRefusesThenRecovers(t *testing.T) {
	dir := mountTmpfs(t, "20m")
	s, err := Open(Options{Dir: dir, MinFree: MinFreeFloor(), MaxBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var mu sync.Mutex
	var accepted []*Message
	var refused atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; refused.Load() < 40; i++ {
				m := newMsg("a.example", w*100000+i)
				m.Body = make([]byte, 1<<(10+(w+i)%11)) // 1 KiB .. 1 MiB
				err := s.Append(ctx, m, 0)
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, m)
					mu.Unlock()
				case errors.Is(err, ErrDiskFull):
					if werr := (*WriteError)(nil); !errors.As(err, &werr) {
						t.Errorf("disk full is not a WriteError: %v", err)
						return
					}
					refused.Add(1)
				default:
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	free, _ := diskFree(dir)
	t.Logf("%d appends accepted (%d bytes queued), %d refused; %d bytes free, min_free %d", len(accepted), s.Usage().Bytes, refused.Load(), free, MinFreeFloor())
	if len(accepted) < 10 {
		t.Fatalf("only %d appends before refusing", len(accepted))
	}
	if u := s.Usage(); u.Messages != int64(len(accepted)) || u.Refusing != ErrDiskFull.Error() || u.Accepting {
		t.Fatalf("usage %d, refusing %q, accepting %v; want the %d accepted, why appends fail, and not accepting",
			u.Messages, u.Refusing, u.Accepting, len(accepted))
	}
	// Everything accepted is readable; deliver it all: the emptied queue
	// is dropped and space returns.
	got, err := s.Read("a.example", 0, len(accepted)+10)
	if err != nil || len(got) != len(accepted) {
		t.Fatalf("read %d of %d accepted: %v", len(got), len(accepted), err)
	}
	for _, m := range got {
		if err := s.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	waitUsage(t, s, 0)
	if u := s.Usage(); u.Refusing != "" || !u.Accepting {
		t.Fatalf("after the queue emptied: refusing %q, accepting %v", u.Refusing, u.Accepting)
	}
	for i := range 20 {
		m := newMsg("a.example", 1_000_000+i)
		m.Body = make([]byte, 64<<10)
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatalf("append %d after space returned: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesADiskTooSmall: min_free below the floor is refused, and
// so is a file system smaller than min_free plus an empty spool.
func TestOpenRefusesADiskTooSmall(t *testing.T) {
	if _, err := Open(Options{Dir: t.TempDir(), MinFree: MinFreeFloor() - 1}); err == nil || !strings.Contains(err.Error(), "spool.min_free") {
		t.Fatalf("min_free below the floor: %v, want refused", err)
	}
	dir := mountTmpfs(t, "20m")
	if _, err := Open(Options{Dir: filepath.Join(dir, "spool"), MinFree: 20 << 20}); err == nil || !strings.Contains(err.Error(), "no webhook could ever be accepted") {
		t.Fatalf("min_free of the whole file system: %v, want refused", err)
	}
	s, err := Open(Options{Dir: filepath.Join(dir, "spool"), MinFree: MinFreeFloor()})
	if err != nil {
		t.Fatalf("the floor on 20 MiB: %v", err)
	}
	s.Close()
}

// TestDiskFullRefusalIsSettledBeforeItsAnswer checks, without root, that a
// refused append's reservation is given back before the caller hears of
// the refusal: right after each ErrDiskFull, usage counts exactly the
// accepted messages. Space returning lets appends through again.
func TestDiskFullRefusalIsSettledBeforeItsAnswer(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 30)
	// Each append comes a reading's lifetime (freeEvery) after the last.
	var now atomic.Int64
	clock := func() time.Time { return time.Unix(1700000000, now.Load()) }
	s := openTest(t, t.TempDir(), Options{MinFree: MinFreeFloor(), Now: clock, DiskFree: func(string) (int64, error) { return free.Load(), nil }})
	defer s.Close()
	ctx := context.Background()
	accepted := int64(0)
	for i := range 2000 {
		now.Add(int64(freeEvery))
		if i%10 == 0 {
			free.Store(1 << 30)
		} else {
			free.Store(1 << 10)
		}
		err := s.Append(ctx, newMsg("a.example", i), 0)
		switch {
		case err == nil:
			if i%10 != 0 {
				t.Fatalf("append %d accepted with the disk full", i)
			}
			accepted++
		case errors.Is(err, ErrDiskFull):
			if i%10 == 0 {
				t.Fatalf("append %d refused with space free", i)
			}
		default:
			t.Fatalf("append %d: %v", i, err)
		}
		if got := s.Usage().Messages; got != accepted {
			t.Fatalf("after append %d (%v): usage %d, want the %d accepted", i, err, got, accepted)
		}
	}
	got, err := s.Read("a.example", 0, 1000)
	if err != nil || int64(len(got)) != accepted {
		t.Fatalf("read %d of %d accepted: %v", len(got), accepted, err)
	}
}

// TestDirGoneRefusesThenRecovers moves the queue directory away under an
// open spool, as an operator's rm -rf or a lost volume would: Badger would
// go on writing into files that vanish at exit, so appends must fail with
// ErrDirGone instead of being acknowledged, and succeed again once the
// directory is back.
func TestDirGoneRefusesThenRecovers(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	queue, moved := filepath.Join(dir, "queue"), filepath.Join(dir, "queue.moved")
	// Badger's close would retry its flush forever without the directory:
	// put it back first, whatever the test did.
	t.Cleanup(func() {
		if _, err := os.Stat(moved); err == nil {
			os.RemoveAll(queue)
			os.Rename(moved, queue)
		}
		s.Close()
	})
	ctx := context.Background()
	if err := s.Append(ctx, newMsg("a.example", 0), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(queue, moved); err != nil {
		t.Fatal(err)
	}
	err := s.Append(ctx, newMsg("a.example", 1), 0)
	var werr *WriteError
	if !errors.Is(err, ErrDirGone) || !errors.As(err, &werr) {
		t.Fatalf("append with the directory gone: %v, want a WriteError with ErrDirGone", err)
	}
	// A directory of the same name is not the same directory.
	if err := os.Mkdir(queue, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, newMsg("a.example", 2), 0); !errors.Is(err, ErrDirGone) {
		t.Fatalf("append with the directory replaced: %v, want ErrDirGone", err)
	}
	if u := s.Usage(); u.Messages != 1 || u.Refusing != ErrDirGone.Error() {
		t.Fatalf("usage %d messages, refusing %q; want only the one acknowledged, and why appends fail", u.Messages, u.Refusing)
	}
	if err := os.Remove(queue); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, queue); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, newMsg("a.example", 3), 0); err != nil {
		t.Fatalf("append with the directory back: %v", err)
	}
	if u := s.Usage(); u.Refusing != "" {
		t.Fatalf("still refusing %q with the directory back", u.Refusing)
	}
	got, err := s.Read("a.example", 0, 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("read %d messages (%v), want the 2 acknowledged", len(got), err)
	}
}

// TestPauseRecordWaitsForSpace: with the disk filled by something else, a
// pause record is not written (a write into the kept database's mapped log
// could fault); it is written again once there is room.
func TestPauseRecordWaitsForSpace(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	s := openTest(t, t.TempDir(), Options{MinFree: MinFreeFloor(), DiskFree: func(string) (int64, error) { return free.Load(), nil }})
	defer s.Close()
	if err := s.SetPaused("a.example", true); err != nil {
		t.Fatal(err)
	}
	free.Store(0)
	if err := s.SetPaused("a.example", false); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("resume recorded on a full disk: %v, want ErrDiskFull", err)
	}
	if hosts, _ := s.Paused(); len(hosts) != 1 {
		t.Fatalf("paused %v, want the record as it was", hosts)
	}
	free.Store(1 << 40)
	if err := s.SetPaused("a.example", false); err != nil {
		t.Fatal(err)
	}
	if hosts, _ := s.Paused(); len(hosts) != 0 {
		t.Fatalf("paused %v after the resume, want none", hosts)
	}
}

// TestCloseOnAFilledDiskLeavesBadgerOpen: with less free than closing
// writes (Badger's memtable flushes, through mappings: a SIGBUS without
// the space), Close says so with ErrDiskFull instead of flushing; what
// was committed is there at the next open.
func TestCloseOnAFilledDiskLeavesBadgerOpen(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 30)
	dir := t.TempDir()
	s := openTest(t, dir, Options{MinFree: MinFreeFloor(), DiskFree: func(string) (int64, error) { return free.Load(), nil }})
	for i := range 50 {
		if err := s.Append(context.Background(), newMsg("a.example", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	free.Store(1 << 10) // another process took the rest
	if err := s.Close(); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("Close on a filled disk = %v, want ErrDiskFull", err)
	}
	// The process would exit here; the test closes Badger itself to open
	// the directory again.
	s.queue.Close()
	s.kept.Close()
	again := openTest(t, dir, Options{})
	defer again.Close()
	if got, err := again.Read("a.example", 0, 100); err != nil || len(got) != 50 {
		t.Fatalf("after the reopen: %d of 50 messages (%v)", len(got), err)
	}
}

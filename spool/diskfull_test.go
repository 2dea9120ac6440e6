package spool

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestDiskFullRefusesThenRecovers fills a small tmpfs: appends must fail
// with ErrDiskFull (never crash, never lose an accepted message), and
// succeed again once delivered messages free the space. It needs root to
// mount the tmpfs and is skipped otherwise.
func TestDiskFullRefusesThenRecovers(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })

	s, err := Open(Options{Dir: dir, MinFree: 20 << 20, MaxBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := make([]byte, 256<<10)
	var accepted []*Message
	for i := 0; ; i++ {
		if i > 400 {
			t.Fatal("48 MiB took 100 MiB of appends without refusing")
		}
		m := newMsg("a.example", i)
		m.Body = body
		err := s.Append(ctx, m, 0)
		if errors.Is(err, ErrDiskFull) {
			var werr *WriteError
			if !errors.As(err, &werr) {
				t.Fatalf("disk full is not a WriteError: %v", err)
			}
			break
		}
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		accepted = append(accepted, m)
	}
	if len(accepted) < 10 {
		t.Fatalf("only %d appends before refusing", len(accepted))
	}
	if u := s.Usage(); u.Messages != int64(len(accepted)) || u.Refusing != ErrDiskFull.Error() {
		t.Fatalf("usage %d, refusing %q; want the %d accepted, and why appends fail", u.Messages, u.Refusing, len(accepted))
	}
	// Everything accepted is readable.
	got, err := s.Read("a.example", 0, len(accepted)+10)
	if err != nil || len(got) != len(accepted) {
		t.Fatalf("read %d of %d accepted: %v", len(got), len(accepted), err)
	}
	// Deliver them all: the emptied queue is dropped and space returns.
	for _, m := range got {
		if err := s.Delete(m); err != nil {
			t.Fatal(err)
		}
	}
	waitUsage(t, s, 0)
	if err := s.Append(ctx, newMsg("a.example", 9999), 0); err != nil {
		t.Fatalf("after space returned: %v", err)
	}
	if u := s.Usage(); u.Refusing != "" {
		t.Fatalf("still refusing %q after space returned", u.Refusing)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// TestDiskFullRefusalIsSettledBeforeItsAnswer checks, without root, that a
// refused append's reservation is given back before the caller hears of
// the refusal: right after each ErrDiskFull, usage counts exactly the
// accepted messages. Space returning lets appends through again.
func TestDiskFullRefusalIsSettledBeforeItsAnswer(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 30)
	s := openTest(t, t.TempDir(), Options{MinFree: 1 << 20, diskFree: func(string) (int64, error) { return free.Load(), nil }})
	defer s.Close()
	ctx := context.Background()
	accepted := int64(0)
	for i := range 2000 {
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

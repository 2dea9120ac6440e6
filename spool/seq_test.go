package spool

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// crashChildEnv tells the test binary, run again by
// TestIDsNotReusedAfterKill, to be the process that is killed.
const crashChildEnv = "HOOKPACE_SPOOL_CRASH_CHILD"

// TestIDsNotReusedAfterKill kills (SIGKILL) a process that has handed out
// ids 1..10 and deleted some of them, reopens its spool and checks that
// the next id is above every id handed out: receivers de-duplicate on ids,
// and a reused one would have its webhook dropped as a repeat. "held":
// 6..10 delivered while 1..5 wait; "empty": all ten delivered, the queue
// empty but not dropped.
func TestIDsNotReusedAfterKill(t *testing.T) {
	if mode := os.Getenv(crashChildEnv); mode != "" {
		crashChild(t, mode)
		return
	}
	for _, mode := range []string{"held", "empty"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestIDsNotReusedAfterKill$")
			cmd.Env = append(os.Environ(), crashChildEnv+"="+mode+":"+dir)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var highest uint64
			sc := bufio.NewScanner(out)
			for sc.Scan() && sc.Text() != "ready" {
				if id, ok := strings.CutPrefix(sc.Text(), "id "); ok {
					n, _ := strconv.ParseUint(id, 10, 64)
					highest = max(highest, n)
				}
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			cmd.Wait()
			if highest != 10 {
				t.Fatalf("the killed process handed out ids up to %d, want 10", highest)
			}
			s := openTest(t, dir, Options{})
			defer s.Close()
			m := newMsg("a.example", 11)
			if err := s.Append(context.Background(), m, 0); err != nil {
				t.Fatal(err)
			}
			if m.ID <= highest {
				t.Fatalf("id %d after kill -9, want above %d: an id handed out before is reused", m.ID, highest)
			}
		})
	}
}

// crashChild appends ten messages, deletes some as mode says, prints the
// ids and "ready", and waits to be killed.
func crashChild(t *testing.T, mode string) {
	mode, dir, _ := strings.Cut(mode, ":")
	s := openTest(t, dir, Options{})
	ctx := context.Background()
	for i := 1; i <= 10; i++ {
		m := newMsg("a.example", i)
		if err := s.Append(ctx, m, 0); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("id %d\n", m.ID)
		if m.ID > 5 || mode == "empty" {
			if err := s.Delete(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	flush(t, s)
	fmt.Println("ready")
	select {}
}

// TestCleanRestartResumesIDs checks that a clean close saves the exact
// sequence: the next run goes on from it without a gap.
func TestCleanRestartResumesIDs(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, Options{})
	ctx := context.Background()
	m := newMsg("a.example", 1)
	if err := s.Append(ctx, m, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, Options{})
	defer s.Close()
	next := newMsg("a.example", 2)
	if err := s.Append(ctx, next, 0); err != nil {
		t.Fatal(err)
	}
	if next.ID != m.ID+1 {
		t.Fatalf("id %d after a clean restart, want %d", next.ID, m.ID+1)
	}
}

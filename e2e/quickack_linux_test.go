package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Python's requests sends a POST's headers and body in two writes with
// Nagle on, on a connection to a proxy: the body waits for the ACK of the
// headers, which the kernel delays by 40 ms unless the proxy re-arms
// TCP_QUICKACK after its read (server/quickack_linux.go; the timing is in
// the bench's sender section and docs/performance.md).
//
// This test checks the mechanism on hookpace's own socket, without timing:
// it takes a copy of the socket (pidfd_getfd), sets it to delay ACKs
// while hookpace is stopped and nothing is left to acknowledge, lets
// hookpace read the next request's headers, and finds the socket set to
// ACK at once again. Without the re-arm it stays delaying: no ACK is
// pending, so no delayed-ACK timer can change it either.
func TestProxyReadRearmsQuickAck(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	conn, err := net.Dial("tcp", hp.Proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := conn.(*net.TCPConn)
	client.SetNoDelay(false) // as urllib3 on a proxy connection
	br := bufio.NewReader(conn)
	body := `{"type":"invoice.paid","id":"evt_1"}`
	head := fmt.Sprintf("POST %s/hooks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		rc.URL, rc.Host(), len(body))
	roundTrip := func(before func()) {
		t.Helper()
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		if before != nil {
			before()
		}
		if _, err := io.WriteString(conn, body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST through hookpace: %s", resp.Status)
		}
	}
	roundTrip(nil) // the connection is open and idle, hookpace waits to read

	sock := peerSocket(t, hp.cmd.Process.Pid, hp.Proxy, conn.LocalAddr().String())
	defer unix.Close(sock)
	quickAck := func() int {
		v, err := unix.GetsockoptInt(sock, unix.IPPROTO_TCP, unix.TCP_QUICKACK)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	unread := func() int {
		n, err := unix.IoctlGetInt(sock, unix.SIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	hp.Signal(syscall.SIGSTOP)
	defer hp.Signal(syscall.SIGCONT)
	pid := hp.cmd.Process.Pid
	Poll(t, 10*time.Second, "every thread of hookpace stopped", func() bool { return allStopped(t, pid) })
	roundTrip(func() {
		// The headers are in hookpace's socket, unread, and acknowledged
		// (by its kernel's delayed-ACK timer at the latest).
		Poll(t, 10*time.Second, "the headers acknowledged", func() bool {
			return unread() == len(head) && clientUnacked(t, client) == 0
		})
		if err := unix.SetsockoptInt(sock, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 0); err != nil {
			t.Fatal(err)
		}
		if q := quickAck(); q != 0 {
			t.Fatalf("TCP_QUICKACK is %d after setting it to 0", q)
		}
		hp.Signal(syscall.SIGCONT)
		Poll(t, 10*time.Second, "hookpace reading the headers and re-arming TCP_QUICKACK", func() bool {
			return unread() == 0 && quickAck() == 1
		})
	})
	rc.WaitFor(t, 10*time.Second, "both webhooks", func(as []Arrival) bool { return len(as) == 2 })
}

// allStopped says whether every thread of process pid is stopped (state
// T in /proc/PID/task/TID/stat).
func allStopped(t *testing.T, pid int) bool {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// clientUnacked is how many segments the client sent that its peer has
// not acknowledged yet.
func clientUnacked(t *testing.T, c *net.TCPConn) uint32 {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var serr error
	if err := raw.Control(func(fd uintptr) { info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return info.Unacked
}

// peerSocket returns a copy, in this process, of the socket that process
// pid holds for the TCP connection from local (its listener) to remote.
func peerSocket(t *testing.T, pid int, local, remote string) int {
	t.Helper()
	inode := tcpInode(t, pid, local, remote)
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if link, _ := os.Readlink(filepath.Join(dir, e.Name())); link != "socket:["+inode+"]" {
			continue
		}
		fd, _ := strconv.Atoi(e.Name())
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open: %v", err)
		}
		defer unix.Close(pidfd)
		sock, err := unix.PidfdGetfd(pidfd, fd, 0)
		if err != nil {
			t.Fatalf("pidfd_getfd: %v", err)
		}
		return sock
	}
	t.Fatalf("no fd of process %d is socket inode %s", pid, inode)
	return -1
}

// tcpInode finds the inode of process pid's IPv4 TCP socket from local
// to remote in /proc/PID/net/tcp.
func tcpInode(t *testing.T, pid int, local, remote string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := [2]string{procAddr(t, local), procAddr(t, remote)}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == want[0] && f[2] == want[1] {
			return f[9]
		}
	}
	t.Fatalf("no socket %s -> %s in /proc/%d/net/tcp", local, remote, pid)
	return ""
}

// procAddr writes an IPv4 address the way /proc/net/tcp does (the
// address as a little-endian word, then the port, both in hex).
func procAddr(t *testing.T, addr string) string {
	t.Helper()
	ap, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ip := ap.IP.To4()
	if ip == nil {
		t.Fatalf("%s is not IPv4", addr)
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ap.Port)
}

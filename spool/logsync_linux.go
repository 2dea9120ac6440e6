//go:build linux

package spool

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// logSync makes the commits of a Badger database opened without
// SyncWrites durable with one fdatasync a commit: that of the memtable's
// log (WAL) the commit went into, and of the value log only when a value
// went there. Badger's own syncing (SyncWrites) msyncs the value log on
// every commit, written to or not, and then the WAL.
//
// Badger writes both logs through shared mappings of files named
// <fid>.mem and <fid>.vlog, and starts a new file of either kind when the
// current one is full. logSync holds a descriptor of the newest file of
// each kind and learns of new ones from inotify, which queues a file's
// creation before the system call that created it returns; so, after a
// commit has returned, draining the queue names every file that commit
// may have written. A file that was newest when the previous sync ran
// and is no longer is synced too, once, then closed. Descriptors of older
// files are never held, so a log Badger deletes gives its space back.
//
// The same watch reports the database directory moved or removed, or
// something in the directory holding it moved or removed, which is when
// Spool.checkQueueDir must look at the queue's.
//
// Not safe for concurrent use: the spool calls it under queueMu (the
// queue's) or keptMu (the kept database's).
type logSync struct {
	ino     int // inotify descriptor (non-blocking)
	dirfd   int // the database directory, to open its new files by name
	wdDir   int // the watch on the directory
	wdUp    int // the watch on the directory holding it
	mem     logFD
	vlog    logFD
	retired []logFD // newest at the previous sync, no longer
	// vlogDirty: a value may have gone into the newest value-log file
	// since the last sync that covered it.
	vlogDirty bool
	moved     bool // the directory or its parent was moved or removed
	rescan    bool // the event queue overflowed: look at the directory
	buf       []byte
}

type logFD struct {
	fid  int
	fd   int // -1: none
	vlog bool
}

// openLogSync watches dir, which must exist, for the logs Badger creates.
func openLogSync(dir string) (*logSync, error) {
	ino, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	l := &logSync{ino: ino, dirfd: -1, mem: logFD{fd: -1}, vlog: logFD{fd: -1, vlog: true}, buf: make([]byte, 16<<10)}
	const self = syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF
	if l.wdDir, err = syscall.InotifyAddWatch(ino, dir, syscall.IN_CREATE|syscall.IN_MOVED_TO|self|syscall.IN_ONLYDIR); err != nil {
		l.close()
		return nil, os.NewSyscallError("inotify_add_watch", err)
	}
	// A directory removed while a file in it is open is reported removed
	// itself only once the file is closed, but its parent is told at once.
	if l.wdUp, err = syscall.InotifyAddWatch(ino, filepath.Dir(dir), self|syscall.IN_DELETE|syscall.IN_MOVED_FROM|syscall.IN_ONLYDIR); err != nil {
		l.close()
		return nil, os.NewSyscallError("inotify_add_watch", err)
	}
	if l.dirfd, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err != nil {
		l.close()
		return nil, os.NewSyscallError("open", err)
	}
	return l, nil
}

// scan takes the newest log of each kind in the directory as the current
// one, as after Badger has opened the database. all: every other log in
// it is synced at the next sync too (the event queue overflowed, so some
// may have been newest since the last sync unseen).
func (l *logSync) scan(all bool) error {
	fd, err := syscall.Openat(l.dirfd, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("open", err)
	}
	d := os.NewFile(uintptr(fd), ".")
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	var logs []logFD
	newest := map[bool]int{false: -1, true: -1}
	for _, name := range names {
		if fid, vlog, ok := logName(name); ok {
			logs = append(logs, logFD{fid: fid, fd: -1, vlog: vlog})
			newest[vlog] = max(newest[vlog], fid)
		}
	}
	for _, f := range logs {
		if f.fid != newest[f.vlog] && all {
			l.retired = append(l.retired, l.opened(f))
		}
	}
	for _, vlog := range []bool{false, true} {
		if newest[vlog] >= 0 {
			l.become(logFD{fid: newest[vlog], fd: -1, vlog: vlog})
		}
	}
	l.vlogDirty = true
	return nil
}

// logName parses a Badger log file's name.
func logName(name string) (fid int, vlog bool, ok bool) {
	base, ext, _ := strings.Cut(name, ".")
	if ext != "mem" && ext != "vlog" {
		return 0, false, false
	}
	fid, err := strconv.Atoi(base)
	return fid, ext == "vlog", err == nil && fid >= 0
}

// become makes f the current file of its kind, the one before it retired.
func (l *logSync) become(f logFD) {
	cur := &l.mem
	if f.vlog {
		cur = &l.vlog
		l.vlogDirty = true // what rotated it may have gone into the new one
	}
	if cur.fd >= 0 {
		l.retired = append(l.retired, *cur)
	}
	*cur = l.opened(f)
}

// opened returns f with a descriptor of its file, or none if it is gone:
// Badger deletes a memtable's log once its content is in a synced table,
// and a value-log file once value-log GC has moved what it held.
func (l *logSync) opened(f logFD) logFD {
	fd, err := syscall.Openat(l.dirfd, logFileName(f), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	f.fd = fd
	return f
}

func logFileName(f logFD) string {
	if f.vlog {
		return padFid(f.fid, 6) + ".vlog"
	}
	return padFid(f.fid, 5) + ".mem"
}

func padFid(fid, width int) string {
	s := strconv.Itoa(fid)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}

// drain reads the queued events without blocking.
func (l *logSync) drain() error {
	for {
		n, err := syscall.Read(l.ino, l.buf)
		if errors.Is(err, syscall.EAGAIN) {
			break
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return os.NewSyscallError("read inotify", err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&l.buf[off]))
			name := l.buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			switch {
			case ev.Mask&syscall.IN_Q_OVERFLOW != 0:
				l.rescan, l.moved = true, true
			case ev.Mask&(syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF|syscall.IN_IGNORED) != 0 || int(ev.Wd) == l.wdUp:
				l.moved = true // something in the parent went: look
			case int(ev.Wd) == l.wdDir:
				if fid, vlog, ok := logName(strings.TrimRight(string(name), "\x00")); ok {
					l.become(logFD{fid: fid, fd: -1, vlog: vlog})
				}
			}
		}
	}
	if l.rescan {
		l.rescan = false
		return l.scan(true)
	}
	return nil
}

// sync makes everything written to the database so far durable. vlog
// says whether a value may have gone into the value log since the last
// sync. Value logs are synced before memtable logs, so that no durable
// pointer points past what is durable in the value log.
func (l *logSync) sync(vlog bool) error {
	err := l.drain()
	l.vlogDirty = l.vlogDirty || vlog
	for _, f := range l.retired {
		if f.vlog {
			err = errors.Join(err, fdatasync(f.fd))
		}
	}
	if l.vlogDirty {
		err = errors.Join(err, fdatasync(l.vlog.fd))
	}
	for _, f := range l.retired {
		if !f.vlog {
			err = errors.Join(err, fdatasync(f.fd))
		}
	}
	err = errors.Join(err, fdatasync(l.mem.fd))
	if err != nil {
		return err
	}
	for _, f := range l.retired {
		syscall.Close(f.fd)
	}
	l.retired = l.retired[:0]
	l.vlogDirty = false
	return nil
}

// movedSince reports whether the directory, or the one holding it, was
// moved or removed since the last call.
func (l *logSync) movedSince() bool {
	if err := l.drain(); err != nil {
		l.moved = true
	}
	moved := l.moved
	l.moved = false
	return moved
}

func fdatasync(fd int) error {
	if fd < 0 {
		return nil
	}
	for {
		err := syscall.Fdatasync(fd)
		if !errors.Is(err, syscall.EINTR) {
			return os.NewSyscallError("fdatasync", err)
		}
	}
}

// close releases every descriptor. It syncs nothing.
func (l *logSync) close() {
	if l == nil {
		return
	}
	for _, f := range append(l.retired, l.mem, l.vlog) {
		if f.fd >= 0 {
			syscall.Close(f.fd)
		}
	}
	l.retired, l.mem.fd, l.vlog.fd = nil, -1, -1
	if l.dirfd >= 0 {
		syscall.Close(l.dirfd)
		l.dirfd = -1
	}
	syscall.Close(l.ino)
}

// removeEmptyLogs removes the empty logs in a database's directory, which
// Badger cannot open ("Create a new file"). Badger starts a memtable log
// and a value-log file at every open and whenever one fills: it creates
// the file, sizes it, and writes a header into it; the spool syncs it with
// the first round that writes to the database after that. A power cut in
// between leaves the file empty, as it was created: it never held a
// record, and no record points into it. It is done holding Badger's lock
// on the directory, so that no running Badger is starting a log there.
func removeEmptyLogs(dir string) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("open", err)
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil // in use: Badger's open says so
	}
	entries, err := d.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, _, ok := logName(e.Name()); !ok || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Size() == 0 {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// Package powercut is a file system for tests that loses what a power cut
// loses. Mount serves, over FUSE, a directory that passes every operation
// through to a backing directory, and remembers, for each file, what its
// writes since its last fsync or fdatasync replaced. Cut puts that back:
// the backing directory is then what a disk would hold after the power
// went off at that moment, and a program reopened on it shows whether
// everything it acknowledged had been synced.
//
// What it models, per file: its data and its size. A write (write(2), or
// a dirty page of a shared mapping the kernel writes back) and a size
// change (ftruncate, open with O_TRUNC) are volatile until the file is
// synced: fsync, fdatasync or msync(MS_SYNC), which reach it as FUSE's
// FSYNC (sync_file_range only writes pages back, and is no sync). A sync
// makes the whole file durable, data and size, whichever of them it is;
// a sync of part of a file counts as a sync of all of it.
//
// What it does not model: directory entries (create, unlink, rename,
// mkdir, links) and attributes (mode, owner, times, xattrs) reach the
// backing directory at once and survive a cut, as on a file system that
// journals metadata synchronously; a program that forgets to sync a
// directory is not caught. Cut loses all of a file's writes since its
// last sync; CutTorn keeps some of them, whole blocks (see there). A disk
// that damages data that was synced is not modelled. fallocate is refused (ENOTSUP), so that nothing changes
// a file unseen.
//
// The mount is without direct_io, so shared writable mappings work: the
// kernel sends a mapping's dirty pages as writes, and msync(MS_SYNC) as
// fsync. A process must not fault pages of the mount into memory while it
// serves it (the page fault holds a thread the server may need): run what
// maps files on the mount in a process of its own.
package powercut

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// block is the granularity at which what a write replaced is kept.
const block = 4096

// FS is a mounted power-cut file system.
type FS struct {
	Dir     string // the mount point
	Backing string // the directory it passes through to

	server *fuse.Server

	mu     sync.Mutex
	off    bool                 // the power is cut
	files  map[uint64]*volatile // by the backing file's inode number
	stats  Stats
	closed bool
}

// Stats counts what the file system was asked, and what a cut discarded.
type Stats struct {
	Writes int64 // WRITE requests (write(2), written-back mapped pages)
	Syncs  int64 // FSYNC requests on files (fsync, fdatasync, msync)
	// Discarded: files, and blocks of them, that Cut put back.
	DiscardedFiles  int
	DiscardedBlocks int
}

// volatile is what one file's writes since its last sync replaced.
type volatile struct {
	fd     int   // read-write descriptor of the backing file
	synced int64 // its size at the last sync
	// saved holds, by block index, a block's content at the last sync, up
	// to the synced size; nil: it was all zeros.
	saved map[int64][]byte
}

// Mount mounts a power-cut file system over backing (which must exist) on
// a new directory, and unmounts it at the end of the test. It fails the
// test if FUSE is not available: a power-cut test cannot be run without
// it.
func Mount(t testing.TB, backing string) *FS {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "powercut")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := mount(mnt, backing)
	if err != nil {
		t.Fatalf("powercut: mounting FUSE on %s (needs /dev/fuse and root): %v", mnt, err)
	}
	t.Cleanup(func() {
		if err := f.unmount(); err != nil {
			t.Errorf("powercut: unmounting %s: %v", mnt, err)
		}
	})
	return f
}

func mount(mnt, backing string) (*FS, error) {
	f := &FS{Dir: mnt, Backing: backing, files: map[uint64]*volatile{}}
	loop, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		return nil, err
	}
	root := &node{LoopbackNode: loop.(*fs.LoopbackNode), fs: f}
	server, err := fs.Mount(mnt, root, &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:            backing,
			Name:              "powercut",
			DirectMountStrict: true, // no fusermount: mount(2), as root
			MaxBackground:     64,
		},
		NullPermissions: true,
	})
	if err != nil {
		return nil, err
	}
	f.server = server
	return f, nil
}

// Cut discards every write and size change not yet synced, as a power
// loss at this moment would, and unmounts the file system: every later
// request that would change it fails with EIO. What reads the backing
// directory afterwards sees what a disk would hold.
//
// The processes writing to the mount should be gone first (killed: a
// process's exit writes its mappings' dirty pages back, unsynced, and
// Cut discards them).
func (f *FS) Cut() (Stats, error) { return f.cut(false) }

// CutTorn is Cut on a disk that had written some of what it was not told
// to keep yet: of the blocks of a file changed since its last sync, those
// at an even position (offset / 4096) keep their new content and the
// others go back; a file that grew keeps its new size. A program that
// trusts its unsynced writes to reach the disk in order, or whole, shows
// it here.
func (f *FS) CutTorn() (Stats, error) { return f.cut(true) }

func (f *FS) cut(torn bool) (Stats, error) {
	f.mu.Lock()
	f.off = true
	var errs []error
	for ino, v := range f.files {
		f.stats.DiscardedFiles++
		f.stats.DiscardedBlocks += len(v.saved)
		if err := v.restore(torn); err != nil {
			errs = append(errs, fmt.Errorf("inode %d: %w", ino, err))
		}
		syscall.Close(v.fd)
		delete(f.files, ino)
	}
	stats := f.stats
	f.mu.Unlock()
	return stats, errors.Join(append(errs, f.unmount())...)
}

// Stats reports what the file system has been asked so far.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *FS) unmount() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.mu.Unlock()
	if err := f.server.Unmount(); err != nil {
		// Something still holds the mount: detach it, so that the test's
		// directory can go; its requests fail from now on.
		if derr := syscall.Unmount(f.Dir, syscall.MNT_DETACH); derr != nil {
			return errors.Join(err, derr)
		}
	}
	return nil
}

// restore puts back the file's size and content at its last sync; torn,
// only the odd blocks' content, and the size only if the file shrank.
func (v *volatile) restore(torn bool) error {
	size := v.synced
	if torn {
		var st syscall.Stat_t
		if err := syscall.Fstat(v.fd, &st); err != nil {
			return os.NewSyscallError("fstat", err)
		}
		size = max(size, st.Size)
	}
	if err := syscall.Ftruncate(v.fd, size); err != nil {
		return os.NewSyscallError("ftruncate", err)
	}
	for b, data := range v.saved {
		if torn && b%2 == 0 {
			continue
		}
		off := b * block
		if data == nil {
			n := min(block, v.synced-off)
			if n <= 0 {
				continue
			}
			if err := unix.Fallocate(v.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
				data = make([]byte, n) // no holes here: write the zeros
			} else {
				continue
			}
		}
		if _, err := syscall.Pwrite(v.fd, data, off); err != nil {
			return os.NewSyscallError("pwrite", err)
		}
	}
	return nil
}

// save keeps the content at the last sync of the blocks in [off, end) not
// kept yet: the first change to a block since then is about to replace
// it. Blocks at or past the synced size need nothing: Cut truncates them.
func (v *volatile) save(off, end int64) error {
	end = min(end, v.synced)
	var buf [block]byte
	for b := off / block; b*block < end; b++ {
		if _, ok := v.saved[b]; ok {
			continue
		}
		n := min(block, v.synced-b*block)
		got, err := syscall.Pread(v.fd, buf[:n], b*block)
		if err != nil {
			return os.NewSyscallError("pread", err)
		}
		// Past the current end of file (it shrank since, unsynced, and
		// the block was zero then), the content at the sync was zeros.
		if isZero(buf[:got]) {
			v.saved[b] = nil
		} else {
			v.saved[b] = append([]byte(nil), buf[:n]...)
			clear(v.saved[b][got:])
		}
	}
	return nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// volatileLocked returns the file's state since its last sync, starting
// it (at the file's current size and content) if this is the first change
// since. open opens the backing file read-write.
func (f *FS) volatileLocked(ino uint64, open func() (int, error)) (*volatile, error) {
	if v := f.files[ino]; v != nil {
		return v, nil
	}
	fd, err := open()
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("fstat", err)
	}
	v := &volatile{fd: fd, synced: st.Size, saved: map[int64][]byte{}}
	f.files[ino] = v
	return v, nil
}

// node is a loopback node whose changes to file data pass through the
// volatile layer, and that refuses every change once the power is cut.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

// WrapChild makes every node of the mount one.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

var (
	_ fs.NodeWritever       = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeCopyFileRanger = (*node)(nil)
	_ fs.NodeWrapChilder    = (*node)(nil)
)

// backingPath is the node's path in the backing directory.
func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.Root()))
}

// openBacking opens the backing file read-write: through the handle's
// descriptor if there is one (the path may have been renamed or
// removed since), else by path.
func (n *node) openBacking(fh fs.FileHandle) func() (int, error) {
	return func() (int, error) {
		if pf, ok := fh.(*file); ok && pf != nil {
			if fd, ok := pf.LoopbackFile.PassthroughFd(); ok {
				return syscall.Open("/proc/self/fd/"+strconv.Itoa(fd), syscall.O_RDWR|syscall.O_CLOEXEC, 0)
			}
		}
		return syscall.Open(n.backingPath(), syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	}
}

// changing keeps what a change of [off, end) of the file is about to
// replace, or says why it may not happen. Called with f.mu held.
func (n *node) changingLocked(fh fs.FileHandle, off, end int64) syscall.Errno {
	if n.fs.off {
		return syscall.EIO
	}
	v, err := n.fs.volatileLocked(n.StableAttr().Ino, n.openBacking(fh))
	if err == nil {
		err = v.save(off, end)
	}
	return fs.ToErrno(err)
}

func (n *node) Writev(ctx context.Context, fh fs.FileHandle, data [][]byte, off int64) (uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	n.fs.stats.Writes++
	size := int64(0)
	for _, d := range data {
		size += int64(len(d))
	}
	if errno := n.changingLocked(fh, off, off+size); errno != 0 {
		return 0, errno
	}
	w, ok := fh.(fs.FileWritever)
	if !ok {
		return 0, syscall.EBADF
	}
	return w.Writev(ctx, data, off)
}

// Setattr keeps what a truncation cuts off before it happens.
func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.off {
		return syscall.EIO
	}
	if size, ok := in.GetSize(); ok {
		if errno := n.changingLocked(fh, int64(size), 1<<62); errno != 0 {
			return errno
		}
	}
	return n.LoopbackNode.Setattr(ctx, fh, in, out)
}

// Open keeps the file's content before O_TRUNC empties it.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		n.fs.mu.Lock()
		defer n.fs.mu.Unlock()
		if n.fs.off {
			return nil, 0, syscall.EIO
		}
		if flags&syscall.O_TRUNC != 0 {
			if errno := n.changingLocked(nil, 0, 1<<62); errno != 0 {
				return nil, 0, errno
			}
		}
	}
	return wrap(n.LoopbackNode.Open(ctx, flags))
}

// file is a loopback file that the kernel may not bypass: FUSE
// passthrough would send its reads, writes and mappings to the backing
// file directly, unseen.
type file struct {
	*fs.LoopbackFile
}

// PassthroughFd declines passthrough.
func (f *file) PassthroughFd() (int, bool) { return -1, false }

func wrap(fh fs.FileHandle, flags uint32, errno syscall.Errno) (fs.FileHandle, uint32, syscall.Errno) {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		fh = &file{lf}
	}
	return fh, flags, errno
}

// Fsync makes everything written to the file durable: the backing
// directory is the disk, and already holds it.
func (n *node) Fsync(_ context.Context, _ fs.FileHandle, _ uint32) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.off {
		return syscall.EIO
	}
	if n.IsDir() {
		return 0
	}
	n.fs.stats.Syncs++
	ino := n.StableAttr().Ino
	if v := n.fs.files[ino]; v != nil {
		syscall.Close(v.fd)
		delete(n.fs.files, ino)
	}
	return 0
}

func (n *node) Allocate(context.Context, fs.FileHandle, uint64, uint64, uint32) syscall.Errno {
	return syscall.ENOTSUP
}

// CopyFileRange is refused, so that the kernel copies through reads and
// writes, which the volatile layer sees.
func (n *node) CopyFileRange(context.Context, fs.FileHandle, uint64, *fs.Inode, fs.FileHandle, uint64, uint64, uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// Directory changes pass through at once, until the cut.

func (n *node) refused() bool {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	return n.fs.off
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.refused() {
		return nil, nil, 0, syscall.EIO
	}
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	fh, fl, errno = wrap(fh, fl, errno)
	return ch, fh, fl, errno
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.refused() {
		return nil, syscall.EIO
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.refused() {
		return nil, syscall.EIO
	}
	return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.refused() {
		return nil, syscall.EIO
	}
	return n.LoopbackNode.Link(ctx, target, name, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.refused() {
		return nil, syscall.EIO
	}
	return n.LoopbackNode.Symlink(ctx, target, name, out)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.refused() {
		return syscall.EIO
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	if n.refused() {
		return syscall.EIO
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if n.refused() {
		return syscall.EIO
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if n.refused() {
		return syscall.EIO
	}
	return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if n.refused() {
		return syscall.EIO
	}
	return n.LoopbackNode.Removexattr(ctx, attr)
}

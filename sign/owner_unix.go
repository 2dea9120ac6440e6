//go:build unix

package sign

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// owner is who the files LoadOrCreateKey creates belong to, and the
// directories it is about to create; zero when they stay the process's.
type owner struct {
	uid, gid int
	dirs     []string // to be created, deepest first
}

// ownerOf is the owner of dir's nearest existing ancestor (dir itself
// when it exists), when this process runs as root and that owner is
// another user: files created as root in another user's directory are
// given to that user.
func ownerOf(dir string) *owner {
	if os.Geteuid() != 0 {
		return nil
	}
	var dirs []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok || st.Uid == 0 {
				return nil
			}
			return &owner{uid: int(st.Uid), gid: int(st.Gid), dirs: dirs}
		}
		if filepath.Dir(d) == d {
			return nil
		}
		dirs = append(dirs, d)
	}
}

// chown gives file, and the directories ownerOf found missing (created
// since), to o.
func (o *owner) chown(file string) error {
	if o == nil {
		return nil
	}
	for _, p := range append([]string{file}, o.dirs...) {
		if err := os.Chown(p, o.uid, o.gid); err != nil {
			return fmt.Errorf("give %s to uid %d: %w", p, o.uid, err)
		}
	}
	return nil
}

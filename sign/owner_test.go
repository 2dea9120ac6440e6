//go:build unix

package sign

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// hookpace's own key, created by a command run as root (check-config,
// sign public-key) before hookpace's first start, belongs to the owner of
// the spool directory, or of the nearest directory above it that exists,
// with the directory it creates: the user that runs hookpace can read
// it. In root's own directory it stays root's.
func TestKeyCreatedForTheDirectorysOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test gives files to another uid: run it as root (sudo scripts/test ./sign/)")
	}
	const nobody = 65534
	base := t.TempDir()
	owned := filepath.Join(base, "owned")
	if err := os.Mkdir(owned, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(owned, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, spool string
		uid         uint32
		made        []string // directories the key's creation makes, besides sign/
	}{
		{"spool directory exists", owned, nobody, nil},
		{"spool directory to be made", filepath.Join(owned, "spool", "deeper"), nobody, []string{"spool", "spool/deeper"}},
		{"root's directory", filepath.Join(base, "rootspool"), 0, nil},
	} {
		path := filepath.Join(tc.spool, "sign", "ed25519.pem")
		k, err := LoadOrCreateKey(path)
		if err != nil || len(k) == 0 {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, p := range append([]string{path, filepath.Dir(path)}, tc.made...) {
			if !filepath.IsAbs(p) {
				p = filepath.Join(owned, p)
			}
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != tc.uid || st.Gid != tc.uid {
				t.Errorf("%s: %s belongs to %d:%d, want %d:%d", tc.name, p, st.Uid, st.Gid, tc.uid, tc.uid)
			}
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: key mode %v, want 0600", tc.name, fi.Mode().Perm())
		}
		again, err := LoadOrCreateKey(path)
		if err != nil || !again.Equal(k) {
			t.Errorf("%s: the second load made another key (%v)", tc.name, err)
		}
	}
}

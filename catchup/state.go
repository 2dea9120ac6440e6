package catchup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hookpace/hookpace/config"
)

// state is a route's catch-up cursor on disk: one small JSON file,
// replaced whole (written beside, synced, renamed, the directory synced),
// so that a crash leaves the old cursor or the new, never a torn one. It
// holds no credential.
type state struct {
	path   string // "": nowhere (nothing survives a restart)
	mem    saved
	synced bool // mem is what the file holds
}

type saved struct {
	Provider string `json:"provider"`
	APIURL   string `json:"api_url"`
	Types    string `json:"types,omitempty"`
	Cursor   string `json:"cursor"`
}

// stateFile is route's state file under dir: its name readable, and a
// hash of it so that two names that clean alike never share one.
func stateFile(dir, route string) *state {
	if dir == "" {
		return &state{}
	}
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, route)
	sum := sha256.Sum256([]byte(route))
	return &state{path: filepath.Join(dir, clean+"-"+hex.EncodeToString(sum[:4])+".json")}
}

// load is the cursor kept for c; "" when there is none, or it was kept
// for another provider, API or set of types (a cursor of one list means
// nothing in another).
func (s *state) load(c config.CatchUp) (string, error) {
	want := saved{Provider: c.Provider, APIURL: c.APIURL, Types: strings.Join(c.Types, ",")}
	got := s.mem
	if s.path != "" {
		b, err := os.ReadFile(s.path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return "", nil
		case err != nil:
			return "", fmt.Errorf("catch-up state: %w", err)
		}
		if err := json.Unmarshal(b, &got); err != nil {
			return "", fmt.Errorf("catch-up state %s: %w", s.path, err)
		}
		s.mem, s.synced = got, true
	}
	if got.Provider != want.Provider || got.APIURL != want.APIURL || got.Types != want.Types {
		return "", nil
	}
	return got.Cursor, nil
}

// save keeps cursor for c, durably before it returns.
func (s *state) save(c config.CatchUp, cursor string) error {
	next := saved{Provider: c.Provider, APIURL: c.APIURL, Types: strings.Join(c.Types, ","), Cursor: cursor}
	if s.path == "" || (s.synced && s.mem == next) {
		s.mem = next
		return nil
	}
	s.mem, s.synced = next, false
	b, err := json.Marshal(s.mem)
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("catch-up state: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".state-*")
	if err != nil {
		return fmt.Errorf("catch-up state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("catch-up state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("catch-up state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("catch-up state: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("catch-up state: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("catch-up state: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("catch-up state: %w", err)
	}
	s.synced = true
	return nil
}

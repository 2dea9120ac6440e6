package mitm

import (
	"crypto/rand"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Outcome says what Ensure did to hookpace's own CA.
type Outcome int

const (
	Loaded   Outcome = iota // the CA on disk covers the names: used as it is
	Created                 // there was none: a new key and certificate
	Reissued                // its names did not cover: a new certificate, same key and subject
)

func (o Outcome) String() string {
	return [...]string{"loaded", "created", "re-issued"}[o]
}

// OwnPaths are the certificate and key of hookpace's own CA in dir, the
// spool's mitm directory.
func OwnPaths(dir string) (cert, key string) {
	return filepath.Join(dir, caCertName), filepath.Join(dir, caKeyName)
}

// Ensure loads hookpace's own CA from dir, creating it when there is none
// and re-issuing its certificate when its name constraints do not cover
// want (for an open-world want: when they are not exactly want, so its
// bytes stay the same whatever hosts come and go). A re-issued certificate keeps the key and the subject and names
// exactly want, so a client that still trusts the old certificate keeps
// verifying the names both have; the new names need the new one. The key
// is written once (mode 0600, dir 0700); the certificate is replaced
// atomically. want must not be empty.
func Ensure(dir string, want Names, cacheSize int) (*CA, Outcome, error) {
	if want.Empty() {
		return nil, Loaded, errors.New("mitm: no names for the CA to vouch for")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, Loaded, fmt.Errorf("mitm: create CA directory %q: %w", dir, err)
	}
	certPath, keyPath := OwnPaths(dir)
	_, err := os.Stat(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return create(dir, want, cacheSize)
	}
	ca, err := LoadCA(certPath, keyPath, cacheSize)
	if err != nil {
		return nil, Loaded, err
	}
	if ca.Is(want) {
		return ca, Loaded, nil
	}
	der, err := newCACert(ca.cert.Subject, ca.key, &want, time.Now())
	if err != nil {
		return nil, Loaded, err
	}
	if err := replaceFile(certPath, pemCert(der), 0o644); err != nil {
		return nil, Loaded, err
	}
	ca, err = LoadCA(certPath, keyPath, cacheSize)
	return ca, Reissued, err
}

func create(dir string, want Names, cacheSize int) (*CA, Outcome, error) {
	certPath, keyPath := OwnPaths(dir)
	// A random tag in the name tells apart the CAs of many spools, which
	// would share one subject otherwise.
	tag := make([]byte, 4)
	if _, err := rand.Read(tag); err != nil {
		return nil, Created, fmt.Errorf("mitm: CA name: %w", err)
	}
	keyPEM, der, err := newCAPair(pkix.Name{CommonName: fmt.Sprintf("hookpace CA %x", tag), Organization: []string{"hookpace"}}, &want)
	if err != nil {
		return nil, Created, err
	}
	// A certificate left by a crash before its key was written is of no
	// use: the key goes first, then the certificate over whatever is there.
	if err := writeNew(keyPath, keyPEM, 0o600); err != nil {
		return nil, Created, err
	}
	if err := replaceFile(certPath, pemCert(der), 0o644); err != nil {
		return nil, Created, err
	}
	ca, err := LoadCA(certPath, keyPath, cacheSize)
	return ca, Created, err
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// replaceFile writes data to path atomically: a temporary file in the same
// directory, synced, then renamed over path, and the directory synced.
func replaceFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("mitm: write %q: %w", path, err)
	}
	tmp := f.Name()
	err = writeSynced(f, data, perm)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mitm: write %q: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

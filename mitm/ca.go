// Package mitm holds hookpace's operator-created MITM certificate authority
// and issues short-lived leaf certificates from it. goproxy's built-in CA is
// never used: its private key is public.
package mitm

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

const (
	caCertName       = "ca.crt"
	caKeyName        = "ca.key"
	caValidity       = 10 // years
	defaultCacheSize = 1000
)

// CA issues leaf certificates signed by the operator's CA. It is safe for
// concurrent use.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
	now     func() time.Time

	// names are the CA's name constraints; a type with none (an
	// operator's CA, say) is open: dnsOpen or ipOpen.
	names           Names
	dnsOpen, ipOpen bool

	mu       sync.Mutex
	cache    *lru
	inflight map[string]*call

	// genHook, if set, runs at the start of every leaf generation (tests).
	genHook func(host string)
}

// InitCA creates dir (mode 0700) and writes a new CA to dir/ca.crt (PEM,
// 0644) and dir/ca.key (PEM PKCS#8 ECDSA P-256, 0600). It refuses to
// overwrite either file.
func InitCA(dir string) (certPath, keyPath string, err error) {
	return initCA(dir, nil)
}

// InitConstrainedCA is InitCA for a CA that may vouch only for names,
// under critical name constraints, as hookpace's own CA: one that many
// replicas share (an operator's CA) and that apps trust.
func InitConstrainedCA(dir string, names Names) (certPath, keyPath string, err error) {
	if names.Empty() {
		return "", "", errors.New("mitm: no names for the CA to vouch for")
	}
	return initCA(dir, &names)
}

func initCA(dir string, names *Names) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, caCertName), filepath.Join(dir, caKeyName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("mitm: create CA directory %q: %w", dir, err)
	}
	for _, p := range []string{certPath, keyPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", fmt.Errorf("mitm: refusing to overwrite existing %q", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("mitm: stat %q: %w", p, err)
		}
	}

	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown host"
	}
	keyPEM, der, err := newCAPair(pkix.Name{CommonName: fmt.Sprintf("hookpace MITM CA (%s)", host), Organization: []string{"hookpace"}}, names)
	if err != nil {
		return "", "", err
	}

	// The key goes first, so a failure never leaves a certificate whose key
	// is lost; whatever this call created is removed on failure.
	if err := writeNew(keyPath, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(certPath, pemCert(der), 0o644); err != nil {
		os.Remove(keyPath)
		return "", "", err
	}
	return certPath, keyPath, nil
}

// newCAPair makes a P-256 key and a CA certificate for it (see
// newCACert): the key as PEM PKCS#8, the certificate as DER.
func newCAPair(subject pkix.Name, names *Names) (keyPEM, certDER []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("mitm: generate CA key: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("mitm: encode CA key: %w", err)
	}
	if certDER, err = newCACert(subject, key, names, time.Now()); err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), certDER, nil
}

// newCACert signs a ten-year CA certificate for key. With names, it
// carries them as critical name constraints and may vouch for TLS servers
// only; without, it is unconstrained (ca init's operator CA).
func newCACert(subject pkix.Name, key crypto.Signer, names *Names, now time.Time) ([]byte, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(caValidity, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	if names != nil {
		names.apply(tmpl)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("mitm: create CA certificate: %w", err)
	}
	return der, nil
}

// writeSynced gives f exactly mode perm (whatever the umask), writes data,
// syncs and closes it.
func writeSynced(f *os.File, data []byte, perm os.FileMode) error {
	err := f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeNew creates path exclusively with exactly mode perm (whatever the
// umask) and writes data to it.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("mitm: refusing to overwrite existing %q", path)
	}
	if err != nil {
		return fmt.Errorf("mitm: create %q: %w", path, err)
	}
	if err := writeSynced(f, data, perm); err != nil {
		os.Remove(path)
		return fmt.Errorf("mitm: write %q: %w", path, err)
	}
	return nil
}

// FileError is LoadCA's error: it says which file could not be used.
type FileError struct {
	Path string
	Key  bool // the key file; else the certificate file
	Err  error
}

func (e *FileError) Error() string { return e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// LoadCA loads a CA certificate and its private key, checking that the key
// matches, that the certificate is a CA and that it is currently valid.
// cacheSize bounds the leaf cache (<= 0 means 1000). The error is a
// *FileError.
func LoadCA(certFile, keyFile string, cacheSize int) (*CA, error) {
	cert, err := loadCACert(certFile)
	if err != nil {
		return nil, &FileError{Path: certFile, Err: err}
	}
	key, err := loadCAKey(keyFile, certFile, cert)
	if err != nil {
		return nil, &FileError{Path: keyFile, Key: true, Err: err}
	}
	return newCA(cert, key, cacheSize), nil
}

func newCA(cert *x509.Certificate, key crypto.Signer, cacheSize int) *CA {
	if cacheSize <= 0 {
		cacheSize = defaultCacheSize
	}
	ca := &CA{
		cert:     cert,
		certPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		key:      key,
		now:      time.Now,
		cache:    newLRU(cacheSize),
		inflight: make(map[string]*call),
	}
	ca.names, ca.dnsOpen, ca.ipOpen = namesOf(cert)
	return ca
}

// Covers reports whether the CA may vouch for host (a DNS name or IP
// literal, any port ignored) under its name constraints. The open-world
// CA vouches only for a PartnerName: a connection to any other name is
// not intercepted. An operator's CA is held to its own constraints only.
func (ca *CA) Covers(host string) bool {
	key, ip, err := normalizeHost(host)
	switch {
	case err != nil:
		return false
	case !ip.IsValid() && ca.names.excluded(key):
		return false
	case !ip.IsValid() && ca.names.Open && !PartnerName(key):
		return false
	case ip.IsValid() && ca.ipOpen, !ip.IsValid() && ca.dnsOpen:
		return true
	}
	return ca.names.Covers(host)
}

// Uncovered lists the entries (host keys or mitm.hosts entries, as
// ParseNames reads them) that the CA cannot vouch for: for a "*." entry,
// every name below it; for the open-world CA, a name that is not a
// PartnerName.
func (ca *CA) Uncovered(entries []string) []string {
	var out []string
	for _, e := range entries {
		n, err := ParseNames([]string{e})
		if err != nil || !ca.dnsOpen && !ca.names.Missing(Names{DNS: n.DNS}).Empty() ||
			slices.ContainsFunc(n.DNS, func(d string) bool { return ca.names.excluded(strings.TrimPrefix(d, ".")) }) ||
			ca.names.Open && slices.ContainsFunc(n.DNS, func(d string) bool { return !strings.HasPrefix(d, ".") && !PartnerName(d) }) ||
			!ca.ipOpen && !ca.names.Missing(Names{IP: n.IP}).Empty() {
			out = append(out, e)
		}
	}
	return out
}

// Names are the CA's name constraints, and whether it has any: an
// unconstrained CA (an operator's made without --hosts) vouches for every
// name and every IP address.
func (ca *CA) Names() (n Names, constrained bool) {
	return ca.names, !ca.dnsOpen || !ca.ipOpen || len(ca.names.Exclude) > 0
}

// Is reports whether the CA's constraints are exactly want: nothing to
// re-issue.
func (ca *CA) Is(want Names) bool {
	if want.Open {
		return ca.names.Open && ca.names.Same(want)
	}
	return !ca.names.Open && ca.names.Missing(want).Empty() && !ca.dnsOpen && !ca.ipOpen
}

// Cert is the CA certificate.
func (ca *CA) Cert() *x509.Certificate { return ca.cert }

func loadCACert(certFile string) (*x509.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("mitm: read CA certificate: %w", err)
	}
	block := findPEM(certPEM, "CERTIFICATE")
	if block == nil {
		return nil, fmt.Errorf("mitm: CA certificate %q: no PEM CERTIFICATE block", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("mitm: CA certificate %q: %w", certFile, err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("mitm: CA certificate %q is not a CA certificate (basic constraints CA:FALSE)", certFile)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("mitm: CA certificate %q lacks the certificate-signing key usage", certFile)
	}
	now := time.Now()
	if now.After(cert.NotAfter) {
		return nil, fmt.Errorf("mitm: CA certificate %q expired at %s", certFile, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(cert.NotBefore) {
		return nil, fmt.Errorf("mitm: CA certificate %q is not valid until %s", certFile, cert.NotBefore.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

func loadCAKey(keyFile, certFile string, cert *x509.Certificate) (crypto.Signer, error) {
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("mitm: read CA key: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("mitm: CA key %q: %w", keyFile, err)
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("mitm: CA key %q does not match CA certificate %q", keyFile, certFile)
	}
	return key, nil
}

// CertPEM returns the CA certificate in PEM form, for clients to trust.
func (ca *CA) CertPEM() []byte {
	return append([]byte(nil), ca.certPEM...)
}

func findPEM(data []byte, typ string) *pem.Block {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil || b.Type == typ {
			return b
		}
	}
}

// parseKey accepts PKCS#8 ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") and
// PKCS#1 ("RSA PRIVATE KEY"), so operators can bring an existing CA.
func parseKey(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("no PEM private key block")
		}
		var k any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported key type %T", k)
		}
		return s, nil
	}
}

func randomSerial() (*big.Int, error) {
	one := big.NewInt(1)
	limit := new(big.Int).Lsh(one, 128)
	n, err := rand.Int(rand.Reader, limit.Sub(limit, one))
	if err != nil {
		return nil, fmt.Errorf("mitm: generate serial number: %w", err)
	}
	return n.Add(n, one), nil // in [1, 2^128-1]: 128 bits, never zero
}

package server

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/mitm"
)

// Files are what hookpace loads from the files its config names.
type Files struct {
	Roots *x509.CertPool // the system roots plus tls.ca_file
	CA    *mitm.CA       // nil unless mitm.ca_cert is set
}

// LoadFiles loads and checks every file cfg names, exactly as Run uses
// them: tls.ca_file, mitm.ca_cert and mitm.ca_key. check-config and a
// reload call it too, so that a file a start would refuse fails them with
// the same error. Each problem is a *config.FieldError naming the config
// file, the field and its line; all of them are joined.
func LoadFiles(cfg *config.Config) (Files, error) {
	var f Files
	var errs []error
	roots, err := rootCAs(cfg.TLS.CAFile)
	if err != nil {
		errs = append(errs, cfg.FieldError("tls.ca_file", err))
	}
	f.Roots = roots
	if cfg.MITM.Enabled() {
		ca, err := mitm.LoadCA(cfg.MITM.CACert, cfg.MITM.CAKey, cfg.MITM.CacheSize)
		var fe *mitm.FileError
		switch {
		case errors.As(err, &fe) && fe.Key:
			errs = append(errs, cfg.FieldError("mitm.ca_key", errors.New(strings.TrimPrefix(err.Error(), "mitm: "))))
		case err != nil:
			errs = append(errs, cfg.FieldError("mitm.ca_cert", errors.New(strings.TrimPrefix(err.Error(), "mitm: "))))
		}
		f.CA = ca
	}
	return f, errors.Join(errs...)
}

// rootCAs is the system pool (which honours SSL_CERT_FILE and
// SSL_CERT_DIR) plus the operator's extra CA file, which must hold at
// least one PEM certificate.
func rootCAs(extra string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if extra == "" {
		return pool, nil
	}
	pem, err := os.ReadFile(extra)
	if err != nil {
		return nil, err
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates found", extra)
	}
	return pool, nil
}

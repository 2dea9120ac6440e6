package server

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/credential"
	"github.com/hookpace/hookpace/handoff"
	"github.com/hookpace/hookpace/inbound"
	"github.com/hookpace/hookpace/mitm"
	"github.com/hookpace/hookpace/sign"
)

// Files are what hookpace loads from the files (and the environment
// variables) its config names. The config keeps their paths and names;
// nothing else reads them.
type Files struct {
	Roots         *x509.CertPool // the system roots plus tls.ca_file
	CA            *mitm.CA       // nil unless mitm.ca_cert is set
	AdminToken    string         // admin.token_file's bearer token; "" without one
	HandoffAuth   string         // shutdown.handoff_auth_file's "username:password"; "" without one
	HandoffSecret []byte         // shutdown.handoff_secret_file's secret; nil without one
	RedisPassword string         // fleet.redis's, redis_password_env's or redis_password_file's
	signers       map[*config.Signing]*sign.Signer
	creds         map[*config.Auth]*credential.Credentials
	verifiers     map[*config.InboundVerify]*inbound.Verifier // inbound.go
}

// Signer is the signer built for a sign block of the config (nil for nil:
// not signed).
func (f *Files) Signer(s *config.Signing) *sign.Signer { return f.signers[s] }

// LoadFiles loads and checks every file cfg names, exactly as Run uses
// them: tls.ca_file, mitm.ca_cert and mitm.ca_key, admin.token_file,
// shutdown.handoff_auth_file, the signing and inbound verify secrets and
// the Redis password.
// hookpace's own CA (in the spool directory) is not among them: a start
// creates it (see intercept). check-config, a start and a reload call it,
// so that a file a start would refuse fails them all with the same error.
// Each problem is a *config.FieldError naming the config file, the field
// and its line; all of them are joined.
func LoadFiles(cfg *config.Config) (*Files, error) {
	f := &Files{}
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
	if p := cfg.AdminAccess.TokenFile; p != "" {
		if f.AdminToken, err = config.ReadToken(p); err != nil {
			errs = append(errs, cfg.FieldError("admin.token_file", err))
		}
	}
	if p := cfg.Shutdown.HandoffAuth; p != "" {
		if f.HandoffAuth, err = handoff.ReadAuth(p); err != nil {
			errs = append(errs, cfg.FieldError("shutdown.handoff_auth_file", err))
		}
	}
	if p := cfg.Shutdown.HandoffSecret; p != "" {
		if f.HandoffSecret, err = handoff.ReadSecret(p); err != nil {
			errs = append(errs, cfg.FieldError("shutdown.handoff_secret_file", err))
		}
	}
	if f.RedisPassword, err = redisPassword(cfg); err != nil {
		errs = append(errs, err)
	}
	if f.signers, err = signers(cfg); err != nil {
		errs = append(errs, err)
	}
	if f.creds, err = credentials(cfg); err != nil {
		errs = append(errs, err)
	}
	if f.verifiers, err = inboundVerifiers(cfg); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f, nil
}

// redisPassword is the fleet's Redis password: in fleet.redis's URL, or
// the environment variable or file the fleet section names.
func redisPassword(cfg *config.Config) (string, error) {
	fc := cfg.Fleet
	switch {
	case !fc.Enabled():
		return "", nil
	case fc.PasswordEnv != "":
		v, ok := os.LookupEnv(fc.PasswordEnv)
		if !ok || v == "" {
			return "", cfg.FieldError("fleet.redis_password_env", fmt.Errorf("environment variable %s is not set", fc.PasswordEnv))
		}
		return v, nil
	case fc.PasswordFile != "":
		b, err := os.ReadFile(fc.PasswordFile)
		if err != nil {
			return "", cfg.FieldError("fleet.redis_password_file", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	u, err := url.Parse(fc.Redis)
	if err != nil {
		return "", nil // config refused it already
	}
	pw, _ := u.User.Password()
	return pw, nil
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

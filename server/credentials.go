package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"net/http"
	"slices"

	"github.com/hookpace/hookpace/config"
	"github.com/hookpace/hookpace/credential"
	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/telemetry"
)

// credentials builds each auth block's credentials (package credential),
// reading the files and variables they name, once per block.
func credentials(cfg *config.Config) (map[*config.Auth]*credential.Credentials, error) {
	out := map[*config.Auth]*credential.Credentials{}
	var errs []error
	blocks := []*config.Auth{cfg.Defaults.Auth}
	for _, k := range slices.Sorted(maps.Keys(cfg.Hosts)) {
		blocks = append(blocks, cfg.Hosts[k].Auth)
	}
	for _, a := range blocks {
		if _, done := out[a]; done || a == nil {
			continue
		}
		c, err := credential.New(credentialOptions(a))
		for _, e := range flatten(err) {
			var ce *credential.Error
			if errors.As(e, &ce) {
				e = &config.FieldError{File: cfg.Path, Line: ce.Line, Field: ce.Field, Msg: ce.Err.Error()}
			}
			errs = append(errs, e)
		}
		out[a] = c
	}
	return out, errors.Join(errs...)
}

func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Credentials are the credentials built for an auth block (nil for nil).
func (f *Files) Credentials(a *config.Auth) *credential.Credentials { return f.creds[a] }

// bindCredentials gives every host's credentials their clients: the
// delivery client's egress checks, TLS roots and telemetry, with the
// host's client certificate; and for the token endpoint, the same checks
// and roots, without proxies from the environment.
func (f *Files) bindCredentials(tel *telemetry.Telemetry, guard *egress.Swap, roots *x509.CertPool) {
	if len(f.creds) == 0 {
		return
	}
	cl := credential.Clients{
		Delivery: func(getCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) *http.Client {
			t := transport(guard, roots, false, oneHostIdle)
			t.TLSClientConfig.GetClientCertificate = getCert
			return &http.Client{Transport: tel.WrapTransport(egress.Checked{Policy: guard, Next: t}),
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		},
		Token: &http.Client{Transport: egress.Checked{Policy: guard, Next: transport(guard, roots, false, oneHostIdle)},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
	for _, c := range f.creds {
		c.Bind(cl)
	}
}

// credentialOptions is what a names, for credential.New.
func credentialOptions(a *config.Auth) credential.Options {
	secret := func(s config.Secret) credential.Secret {
		return credential.Secret{Env: s.Kind == "env", Name: s.Name, Field: s.Field, Line: s.Line}
	}
	o := credential.Options{KeepAppHeaders: a.KeepAppHeaders}
	if m := a.MTLS; m != nil {
		o.MTLS = &credential.MTLS{CertFile: m.CertFile, KeyFile: m.KeyFile, Field: m.Field, Line: m.Line}
	}
	if t := a.OAuth2; t != nil {
		o.OAuth2 = &credential.OAuth2{TokenURL: t.TokenURL, ClientID: t.ClientID, ClientSecret: secret(t.ClientSecret),
			Scopes: t.Scopes, Audience: t.Audience, Params: t.Params}
	}
	for _, h := range a.Headers {
		o.Headers = append(o.Headers, credential.Header{Name: h.Name, Value: secret(h.Value)})
	}
	return o
}

package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// check-config run as root, before hookpace's first start, creates
// hookpace's own signing key for the owner of the spool directory, so
// that hookpace, run as that user, can read it.
func TestCheckConfigKeyBelongsToSpoolOwner(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs check-config as root for a spool another uid owns: run it as root (sudo scripts/test)")
	}
	const nobody = 65534
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "spool")
	if err := os.Mkdir(spoolDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(spoolDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "hookpace.yaml")
	writeConfig(t, cfg, "127.0.0.1:0", "127.0.0.1:0", spoolDir, "hosts:\n  partner.example:\n    sign: {scheme: standard-webhooks-v1a}\n")
	if out, err := exec.Command(binary, "check-config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("check-config: %v\n%s", err, out)
	}
	for _, p := range []string{filepath.Join(spoolDir, "sign"), filepath.Join(spoolDir, "sign", "ed25519.pem")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody {
			t.Errorf("%s belongs to %d:%d, want the spool directory's owner %d:%d", p, st.Uid, st.Gid, nobody, nobody)
		}
	}
	if out, err := exec.Command(binary, "sign", "public-key", "--config", cfg, "--host", "partner.example").CombinedOutput(); err != nil ||
		!strings.HasPrefix(string(out), "whpk_") {
		t.Fatalf("sign public-key: %v\n%s", err, out)
	}
}

// A reload rejected because a key file can't be read is retried when the
// config file is touched, its content unchanged: the fixed key signs the
// next delivery, with no signal sent.
func TestReloadRetriedWhenTouched(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, `egress: {allow: ["127.0.0.0/8"]}`)
	key := filepath.Join(hp.Dir, "partner-key.pem")
	if err := os.WriteFile(key, []byte("not a key yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rewrite(t, hp, fmt.Sprintf(`
egress: {allow: ["127.0.0.0/8"]}
hosts:
  %q:
    sign: {scheme: standard-webhooks-v1a, key_file: %q}
`, rc.Host(), key))
	Poll(t, 30*time.Second, "the reload rejected for the key", func() bool {
		return strings.Contains(hp.Log(), "config reload rejected") && strings.Contains(hp.Log(), "partner-key.pem")
	})
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(hp.Config, later, later); err != nil { // touch
		t.Fatal(err)
	}
	Poll(t, 30*time.Second, "the reload retried after the touch", func() bool {
		return strings.Contains(hp.Log(), "file touched after a failed reload") && strings.Contains(hp.Log(), "config reloaded")
	})
	if status, _ := hp.Post(hp.Client(), rc.URL+"/hook", []byte(`{"n":1}`), http.Header{"Content-Type": {"application/json"}}); status != http.StatusAccepted {
		t.Fatalf("POST: %d", status)
	}
	rc.WaitFor(t, 30*time.Second, "the signed delivery", func(as []Arrival) bool { return Delivered2xx(as) == 1 })
	if sig := rc.Arrivals()[0].Header.Get("Webhook-Signature"); !strings.HasPrefix(sig, "v1a,") {
		t.Fatalf("webhook-signature %q, want v1a by the fixed key", sig)
	}
}

package handoff

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// With a secret, every hand-off carries a signature over its
// claim, method, host and body, which Verify accepts with the same secret
// and refuses with another secret, another body or another claim.
func TestSignsHandoffs(t *testing.T) {
	secret := []byte(strings.Repeat("k", MinSecret))
	tg := newTarget(t, accept)
	sp := queued(t, 9)
	res, err := Run(context.Background(), Options{Target: tg.URL, From: "pod-a", Secret: secret, Queue: sp, Logger: quiet()})
	if err != nil || res.HandedOff != 9 {
		t.Fatalf("result %+v, %v", res, err)
	}
	for _, g := range tg.got {
		var i int
		fmt.Sscanf(g.body, `{"event":%d}`, &i)
		host := fmt.Sprintf("h%d.example", i%3)
		sig := g.header.Get(SignatureHeader)
		if err := Verify(secret, sig, g.lineage, "POST", host, []byte(g.body)); err != nil {
			t.Fatalf("hand-off %q: signature %q: %v", g.lineage, sig, err)
		}
		for what, err := range map[string]error{
			"another secret": Verify([]byte(strings.Repeat("x", MinSecret)), sig, g.lineage, "POST", host, []byte(g.body)),
			"another body":   Verify(secret, sig, g.lineage, "POST", host, []byte(g.body+" ")),
			"another claim":  Verify(secret, sig, g.lineage+"1", "POST", host, []byte(g.body)),
			"another host":   Verify(secret, sig, g.lineage, "POST", "evil.example", []byte(g.body)),
			"no signature":   Verify(secret, "", g.lineage, "POST", host, []byte(g.body)),
		} {
			if err == nil {
				t.Errorf("%s: the signature checks", what)
			}
		}
	}
	// Without a secret, none is sent.
	tg2 := newTarget(t, accept)
	if _, err := Run(context.Background(), Options{Target: tg2.URL, Queue: queued(t, 1), Logger: quiet()}); err != nil {
		t.Fatal(err)
	}
	if sig := tg2.got[0].header.Get(SignatureHeader); sig != "" {
		t.Errorf("a signature %q without a secret", sig)
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	good, short := filepath.Join(dir, "good"), filepath.Join(dir, "short")
	os.WriteFile(good, []byte(strings.Repeat("a", MinSecret)+"\n"), 0o600)
	os.WriteFile(short, []byte("tiny\n"), 0o600)
	if s, err := ReadSecret(good); err != nil || len(s) != MinSecret {
		t.Errorf("good secret: %q, %v", s, err)
	}
	if _, err := ReadSecret(short); err == nil || !strings.Contains(err.Error(), "want at least 32") {
		t.Errorf("short secret: %v", err)
	}
	if _, err := ReadSecret(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing secret file is not an error")
	}
}

package server

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/config"
)

// An admin address off loopback starts only with a token or with
// admin.insecure_no_auth, which is warned about at every start.
func TestAdminGuardOffLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	cfg := config.Default()
	cfg.Admin = "0.0.0.0:9090"
	if _, err := adminGuard(log, cfg, "", ln); err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Errorf("no token, no insecure_no_auth: err = %v", err)
	}
	cfg.AdminAccess.InsecureNoAuth = true
	if _, err := adminGuard(log, cfg, "", ln); err != nil || !strings.Contains(buf.String(), "INSECURE") {
		t.Errorf("insecure_no_auth: err = %v, log %q", err, buf.String())
	}
	buf.Reset()
	cfg.Admin = "127.0.0.1:9090"
	if _, err := adminGuard(log, cfg, "", ln); err != nil || buf.Len() != 0 {
		t.Errorf("loopback: err = %v, log %q", err, buf.String())
	}
}

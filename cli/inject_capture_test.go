package cli

import (
	"io"
	"strings"
	"testing"
)

// hookpace inject --capture: the init container and what it needs on
// stderr; no service range is an error, a bad port list a usage error.
func TestInjectCaptureCommand(t *testing.T) {
	defer func(r io.Reader) { stdin = r }(stdin)
	stdin = strings.NewReader(plainPod)
	code, out, errOut := runMain("inject", "--capture", "--service-cidr", "10.96.0.0/12", "--capture-ports", "443")
	if code != 0 || !strings.Contains(out, "name: hookpace-capture") || !strings.Contains(out, "- NET_ADMIN") || strings.Contains(out, "HTTPS_PROXY") ||
		!strings.Contains(errOut, "NET_ADMIN and NET_RAW") || !strings.Contains(errOut, "redirects TCP to ports 443 to hookpace's port 15001") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	stdin = strings.NewReader(plainPod)
	if code, out, errOut = runMain("inject", "--capture"); code != 1 || out != "" || !strings.Contains(errOut, "--service-cidr") {
		t.Errorf("no service range: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if code, _, errOut = runMain("inject", "--capture", "--capture-ports", "80,https"); code != 2 {
		t.Errorf("bad port list: exit %d, stderr %s", code, errOut)
	}
}

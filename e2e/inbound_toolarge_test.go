package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestInboundTooLargeReadByWriteFirstClient: a body over max_body sent to
// an inbound route by a client that writes all of it before reading
// (Python's urllib), declared or chunked, reads the 413 and its reason,
// not a connection reset; nothing reaches the app.
func TestInboundTooLargeReadByWriteFirstClient(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for this test (apt-get install -y python3)")
	}
	app := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
spool: {max_body: 1MiB}
inbound:
  - name: big
    listen: 127.0.0.1:0
    to: %s
`, app.URL))
	addr := inboundAddrs(t, hp)["big"]
	if addr == "" {
		t.Fatalf("no inbound listening line\n%s", hp.Log())
	}
	script := `
import sys, urllib.request, urllib.error
chunked = sys.argv[2] == "chunked"
body = b"x" * (5 * 1000 * 1000)
data = (body[i:i + 65536] for i in range(0, len(body), 65536)) if chunked else body
req = urllib.request.Request("http://" + sys.argv[1] + "/hook", data=data, method="POST")
if chunked:
    req.add_header("Transfer-Encoding", "chunked")
try:
    r = urllib.request.urlopen(req, timeout=30)
    print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
`
	for _, mode := range []string{"declared", "chunked"} {
		for i := range 3 {
			out, err := exec.Command(py, "-c", script, addr, mode).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "413 ") || !strings.Contains(string(out), "spool.max_body") {
				t.Errorf("%s, try %d: urllib posting 5 MB: %v\n%s", mode, i, err, out)
			}
		}
	}
	if app.Count(nil) != 0 {
		t.Errorf("%d requests of a refused body reached the app", app.Count(nil))
	}
}

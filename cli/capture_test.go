package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCaptureRulesRender(t *testing.T) {
	code, out, errOut := runMain("capture", "rules", "--to", "15001", "--exclude-uid", "1337", "--ports", "80,443,8443",
		"--exclude-cidr", "10.96.0.0/12", "--exclude-cidr", "10.244.1.7/16", "--exclude-cidr", "fd00:10:96::/112")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `# IPv4: iptables-restore --noflush
*nat
:HOOKPACE_OUTPUT - [0:0]
-A HOOKPACE_OUTPUT -m owner --uid-owner 1337 -j RETURN
-A HOOKPACE_OUTPUT -d 127.0.0.0/8 -j RETURN
-A HOOKPACE_OUTPUT -d 10.96.0.0/12 -j RETURN
-A HOOKPACE_OUTPUT -d 10.244.0.0/16 -j RETURN
-A HOOKPACE_OUTPUT -p tcp -m multiport --dports 80,443,8443 -j REDIRECT --to-ports 15001
-A OUTPUT -p tcp -j HOOKPACE_OUTPUT
COMMIT
# IPv6: ip6tables-restore --noflush
*nat
:HOOKPACE_OUTPUT - [0:0]
-A HOOKPACE_OUTPUT -m owner --uid-owner 1337 -j RETURN
-A HOOKPACE_OUTPUT -d ::1/128 -j RETURN
-A HOOKPACE_OUTPUT -d fd00:10:96::/112 -j RETURN
-A HOOKPACE_OUTPUT -p tcp -m multiport --dports 80,443,8443 -j REDIRECT --to-ports 15001
-A OUTPUT -p tcp -j HOOKPACE_OUTPUT
COMMIT
`
	if out != want {
		t.Errorf("rules:\n%s\nwant:\n%s", out, want)
	}
	// Applying again (the jump already in OUTPUT) replaces the chain only.
	r := captureRules{To: 15001, ExcludeUID: 0, Ports: []uint16{80}}
	if again := r.render(4, false); strings.Contains(again, "-A OUTPUT") || !strings.Contains(again, ":HOOKPACE_OUTPUT - [0:0]") {
		t.Errorf("re-applied rules:\n%s", again)
	}
}

func TestCaptureRulesRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"capture", "rules", "--exclude-uid", "0"}, "--to PORT is required"},
		{[]string{"capture", "rules", "--to", "15001"}, "--exclude-uid UID is required"},
		{[]string{"capture", "rules", "--to", "15001", "--exclude-uid", "0", "--ports", "80,15001"}, "capture itself"},
		{[]string{"capture", "rules", "--to", "15001", "--exclude-uid", "0", "--ports", "80,x"}, `"x" is not a port`},
		{[]string{"capture", "rules", "--to", "15001", "--exclude-uid", "0", "--exclude-cidr", "10.0.0.0/33"}, "exclude-cidr"},
		{[]string{"capture"}, "hookpace capture rules"},
	} {
		code, _, errOut := runMain(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, out, _ := runMain("capture", "rules", "--help"); code != 0 || !strings.Contains(out, "HOOKPACE_OUTPUT") || !strings.Contains(out, "-exclude-uid") {
		t.Errorf("capture rules --help: exit %d\n%s", code, out)
	}
}

// --config captures every port hosts names; --reject-quic adds the filter
// chain that refuses UDP 443 to all but hookpace's uid; check-config warns
// of a partner on a port the default rules leave alone.
func TestCaptureRulesFromConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	cfg := "spool: {dir: " + filepath.Join(dir, "spool") + "}\ncapture: {listen: \"127.0.0.1:15001\"}\n" +
		"hosts:\n  \"hooks.other.example:8443\": {rate: 5/s}\n  \"a.example\": {rate: 5/s}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain("capture", "rules", "--to", "15001", "--exclude-uid", "1337", "--config", path, "--reject-quic")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"--dports 80,443,8443 -j REDIRECT",
		"*filter\n:HOOKPACE_QUIC - [0:0]\n-A HOOKPACE_QUIC -m owner --uid-owner 1337 -j RETURN\n-A HOOKPACE_QUIC -p udp --dport 443 -j REJECT\n-A OUTPUT -p udp -j HOOKPACE_QUIC\nCOMMIT\n",
	} {
		if strings.Count(out, want) != 2 {
			t.Errorf("rules lack %q for both families:\n%s", want, out)
		}
	}
	code, out, errOut = runMain("check-config", path)
	if code != 0 || !strings.Contains(out, "WARNING: capture: hosts names partners on port(s) 8443") {
		t.Errorf("check-config: exit %d, %s%s", code, out, errOut)
	}
}

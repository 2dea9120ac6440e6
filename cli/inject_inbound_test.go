package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/inject"
)

// hookpace inject --inbound: repeatable and comma-separated, PORT or
// PORT:LISTEN; the sidecar's named ports and the Service note on stderr;
// a value that is not a port is a usage error. The injector's annotation
// hookpace.dev/inbound takes the same value.
func TestInjectInboundCommand(t *testing.T) {
	defer func(r io.Reader) { stdin = r }(stdin)
	stdin = strings.NewReader(plainPod)
	code, out, errOut := runMain("inject", "--inbound", "3000,8443:9443", "--inbound", "5000", "--inbound-secret", "provider-secrets")
	if code != 0 {
		t.Fatalf("exit %d\nstderr %s", code, errOut)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"name: hp-in-3000 containerPort: 13000", "name: hp-in-8443 containerPort: 9443",
		"name: hp-in-5000 containerPort: 15000", "secretName: provider-secrets", "mountPath: /etc/hookpace-inbound"} {
		if !strings.Contains(flat, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "set targetPort: hp-in-5000") {
		t.Errorf("stderr does not say what targetPort to set:\n%s", errOut)
	}
	if code, _, errOut = runMain("inject", "--inbound", "http"); code != 2 || !strings.Contains(errOut, "want the app's container PORT") {
		t.Errorf("--inbound http: exit %d, stderr %s", code, errOut)
	}
	o := inject.Defaults()
	if err := InjectOption(&o, "inbound", "3000:3001"); err != nil || len(o.Inbound) != 1 || o.Inbound[0].ListenPort() != 3001 {
		t.Errorf("the annotation: %v, %+v", err, o.Inbound)
	}
}

package e2e

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/internal/kubetest"
)

// TestKubeInboundApplies: against a real kube-apiserver with strict field
// validation, what hookpace inject --inbound writes (the ConfigMap with
// its route, the Service moved to the sidecar's hp-in-PORT or, with
// --inbound-target-number, to its number, the Deployment with the named
// port and the inbound Secret) is accepted, and the Service is stored
// with the targetPort inject gave it; uninject's output applies too and
// gives the Service its own targetPort back.
func TestKubeInboundApplies(t *testing.T) {
	t.Parallel()
	c := kubetest.Start(t)
	namespace(t, c, "inbound", nil)
	input := []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: hookpace}
data:
  config.yaml: |
    listen: 127.0.0.1:8080
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: web-direct}
spec:
  selector: {app: web}
  ports: [{port: 5000}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: app
          image: registry.example.com/web:1
          ports: [{name: http, containerPort: 3000}, {containerPort: 5000}]
`)
	for _, tc := range []struct {
		flags []string
		want  []string // in the stored Services, web then web-direct
	}{
		{[]string{"--inbound", "3000,5000:15500", "--inbound-secret", "providers"}, []string{`"targetPort":"hp-in-3000"`, `"targetPort":"hp-in-5000"`}},
		{[]string{"--inbound", "3000,5000:15500", "--inbound-target-number"}, []string{`"targetPort":13000`, `"targetPort":15500`}},
		{nil, []string{`"targetPort":"http"`, `"targetPort":5000`}}, // uninject's output
	} {
		out := hookpaceCmd(t, input, append([]string{"inject"}, tc.flags...)...)
		if tc.flags == nil {
			out = hookpaceCmd(t, hookpaceCmd(t, input, "inject", "--inbound", "3000,5000"), "uninject")
		}
		for _, obj := range objects(t, out) {
			if code, b := apply(c, "inbound", obj, false); code != 200 && code != 201 {
				t.Errorf("%v: %s/%v refused: %d %.600s", tc.flags, obj["kind"], obj["metadata"].(map[string]any)["name"], code, b)
			}
		}
		for i, name := range []string{"web", "web-direct"} {
			b := c.Must(200, "GET", "/api/v1/namespaces/inbound/services/"+name, "", nil)
			if !bytes.Contains(b, []byte(tc.want[i])) {
				t.Errorf("%v: Service %s as stored lacks %s:\n%s", tc.flags, name, tc.want[i], b)
			}
		}
		d := c.Must(200, "GET", "/apis/apps/v1/namespaces/inbound/deployments/web", "", nil)
		if has := bytes.Contains(d, []byte(`"name":"hp-in-3000","containerPort":13000`)); has != (tc.flags != nil) || strings.Contains(string(d), "hookpace-inbound-secret") != (len(tc.flags) > 2 && tc.flags[2] == "--inbound-secret") {
			t.Errorf("%v: the Deployment as stored:\n%s", tc.flags, d)
		}
	}
}

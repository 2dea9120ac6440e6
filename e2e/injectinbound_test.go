package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// TestInjectInboundRuns runs what `hookpace inject --inbound PORT` writes:
// the ConfigMap's config (its route bound on loopback here, where the pod
// binds the sidecar's named port) in front of an app stand-in on PORT.
// The output decodes strictly; the Service's targetPort (the app port's
// name) is the sidecar's named port, whose number is the route's; a
// provider stand-in's POST gets 202 at hookpace's door and reaches the
// app with its body, a GET gets the app's own answer at once, and
// uninject gives the Service its targetPort back.
func TestInjectInboundRuns(t *testing.T) {
	t.Parallel()
	app := NewReceiver(t)
	app.Handle = func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method == http.MethodGet {
			io.WriteString(w, "app's own page")
		}
	}
	_, portText, err := net.SplitHostPort(app.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)
	flag, listen := portText, port+10000
	if listen > 65535 { // an ephemeral port high up: name hookpace's port
		listen = port - 10000
		flag = fmt.Sprintf("%d:%d", port, listen)
	}
	manifests := fmt.Sprintf(`apiVersion: v1
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
          ports: [{name: http, containerPort: %d}]
`, port)
	in := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(in, []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	inj := exec.Command(binary, "inject", "--inbound", flag, "-f", in)
	inj.Stdout, inj.Stderr = &stdout, &stderr
	if err := inj.Run(); err != nil {
		t.Fatalf("hookpace inject: %v\n%s", err, stderr.String())
	}
	var cm corev1.ConfigMap
	var svc corev1.Service
	var d appsv1.Deployment
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		var dst any = &d
		switch {
		case strings.Contains(doc, "kind: ConfigMap"):
			dst = &cm
		case strings.Contains(doc, "kind: Service"):
			dst = &svc
		}
		if err := sigsyaml.UnmarshalStrict([]byte(doc), dst); err != nil {
			t.Fatalf("inject's output does not decode strictly: %v\n%s", err, doc)
		}
	}
	name := "hp-in-" + portText
	if tp := svc.Spec.Ports[0].TargetPort; tp.StrVal != name {
		t.Errorf("the Service's targetPort %v, want %s", tp.String(), name)
	}
	sidecar := d.Spec.Template.Spec.InitContainers[0]
	named := false
	for _, p := range sidecar.Ports {
		named = named || p.Name == name && int(p.ContainerPort) == listen && p.Protocol == corev1.ProtocolTCP
	}
	if !named {
		t.Errorf("sidecar %s ports %+v, want %s on %d", sidecar.Name, sidecar.Ports, name, listen)
	}

	// The sidecar's config, its route on loopback: what the pod's port
	// serves, without binding a fixed port on this machine.
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	routes, _ := cfg["inbound"].([]any)
	if len(routes) != 1 {
		t.Fatalf("the ConfigMap's routes: %v\n%s", cfg["inbound"], cm.Data["config.yaml"])
	}
	route := routes[0].(map[string]any)
	if route["listen"] != fmt.Sprintf(":%d", listen) || route["to"] != "http://127.0.0.1:"+portText || route["name"] != name {
		t.Errorf("route %v, want %s on :%d to the app", route, name, listen)
	}
	route["listen"] = "127.0.0.1:0"
	text, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hp := Start(t, string(text))
	door := inboundAddrs(t, hp)[name]
	if door == "" {
		t.Fatalf("no inbound listening line for %s:\n%s", name, hp.Log())
	}

	body := []byte(`{"id":"evt_1","type":"invoice.paid"}`)
	resp, err := http.Post("http://"+door+"/webhooks/billing", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Hookpace-Id") == "" {
		t.Fatalf("the provider's POST: %d, X-Hookpace-Id %q", resp.StatusCode, resp.Header.Get("X-Hookpace-Id"))
	}
	app.WaitFor(t, 30*time.Second, "the webhook at the app", func(as []Arrival) bool {
		for _, a := range as {
			if a.Method == http.MethodPost {
				return true
			}
		}
		return false
	})
	for _, a := range app.Arrivals() {
		if a.Method == http.MethodPost && (a.Path != "/webhooks/billing" || !bytes.Equal(a.Body, body) || a.Header.Get("Hookpace-Received-At") == "") {
			t.Errorf("the app got %s %s %q (Hookpace-Received-At %q)", a.Method, a.Path, a.Body, a.Header.Get("Hookpace-Received-At"))
		}
	}
	resp, err = http.Get("http://" + door + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(page) != "app's own page" {
		t.Errorf("a GET at the door: %d %q, want the app's answer", resp.StatusCode, page)
	}

	un := exec.Command(binary, "uninject")
	un.Stdin = bytes.NewReader(stdout.Bytes())
	back, err := un.Output()
	if err != nil || !strings.Contains(string(back), "ports: [{name: http, port: 80, targetPort: http}]") || strings.Contains(string(back), "targetPort: hp-in-") || strings.Contains(string(back), "name: hookpace\n") {
		t.Errorf("uninject: %v\n%s", err, back)
	}
}

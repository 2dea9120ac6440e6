package inject

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/config"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// sidecarOf is the hookpace container of an injected pod spec.
func sidecarOf(t *testing.T, spec *corev1.PodSpec) corev1.Container {
	t.Helper()
	for _, c := range spec.InitContainers {
		if c.Name == ContainerName {
			return c
		}
	}
	t.Fatalf("no %s init container", ContainerName)
	return corev1.Container{}
}

// TestInjectInboundKinds: with --inbound 25 every kind's output decodes
// strictly, its sidecar has the named port hp-in-25 on 10025 (and the
// Secret for verify mounted), injecting the output again gives the same
// bytes, and uninject gives back the input's objects. The stream's
// Service, whose port 25 has no targetPort (so the port itself), now
// targets hp-in-25.
func TestInjectInboundKinds(t *testing.T) {
	for _, file := range []string{"deployment.yaml", "statefulset.yaml", "daemonset.yaml", "job.yaml", "cronjob.yaml",
		"pod.yaml", "list.yaml", "stream.yaml", "deployment.json"} {
		t.Run(file, func(t *testing.T) {
			o := Defaults()
			o.AcceptLoss, o.Inbound, o.InboundSecret = true, []InboundPort{{Port: 25}}, "provider-secrets"
			input := readTestdata(t, file)
			out, log, err := injectBytes(t, o, input)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			pods := 0
			for _, obj := range decodeStrict(t, out) {
				if svc, ok := obj.obj.(*corev1.Service); ok && obj.name == "mailer" {
					if got := svc.Spec.Ports[0].TargetPort; got != intstr.FromString("hp-in-25") {
						t.Errorf("Service/%s: targetPort %v, want hp-in-25", obj.name, got)
					}
				}
				if obj.spec == nil {
					continue
				}
				pods++
				c := sidecarOf(t, obj.spec)
				want := corev1.ContainerPort{Name: "hp-in-25", ContainerPort: 10025, Protocol: corev1.ProtocolTCP}
				if n := len(c.Ports); n < 2 || c.Ports[n-1] != want {
					t.Errorf("%s/%s: sidecar ports %+v, want %+v last", obj.kind, obj.name, c.Ports, want)
				}
				mounted := false
				for _, m := range c.VolumeMounts {
					mounted = mounted || m.Name == InboundSecretVolume && m.MountPath == InboundSecretDir && m.ReadOnly
				}
				secret := false
				for _, v := range obj.spec.Volumes {
					secret = secret || v.Name == InboundSecretVolume && v.Secret != nil && v.Secret.SecretName == "provider-secrets"
				}
				if !mounted || !secret {
					t.Errorf("%s/%s: the inbound Secret mounted %v, a volume %v", obj.kind, obj.name, mounted, secret)
				}
			}
			if pods == 0 {
				t.Fatal("no pod template injected")
			}
			again, log, err := injectBytes(t, o, out)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("injecting the output again: %v\n%s\nfirst:\n%s\nsecond:\n%s", err, log, out, again)
			}
			back, log, err := uninjectBytes(t, out)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			if got, want := generic(t, back), generic(t, input); !reflect.DeepEqual(got, want) {
				t.Errorf("uninject gives:\n%s\nwant the objects of:\n%s", back, input)
			}
		})
	}
}

// inboundStream: the app's Service by port name, another by number, one
// in another namespace and one for other pods (both left alone), and the
// Deployment after them.
const inboundStream = `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector: {app: web}
  ports:
    - {name: http, port: 80, targetPort: http}
    - {name: metrics, port: 9100, targetPort: 9100}
---
apiVersion: v1
kind: Service
metadata:
  name: web-direct
  namespace: shop
  annotations: {owner: payments}
spec:
  selector: {app: web, tier: front}
  ports:
    - port: 3000
      targetPort: 3000
      protocol: TCP
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: staging
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 3000}]
---
apiVersion: v1
kind: Service
metadata:
  name: db
  namespace: shop
spec:
  selector: {app: db}
  ports: [{port: 3000}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web, tier: front}
    spec:
      containers:
        - name: app
          image: registry.example.com/web:1
          ports:
            - {name: http, containerPort: 3000}
`

// TestInboundServices: the Services that send the injected pods' port
// 3000 to the app (by the container port's name, by number) now target
// hookpace's named port, each with a record; the others are left as they
// were; uninject restores the input byte for byte, and a re-inject
// without --inbound gives what injecting the original without it gives.
func TestInboundServices(t *testing.T) {
	o := Defaults()
	o.Inbound = []InboundPort{{Port: 3000}}
	out, log, err := injectBytes(t, o, []byte(inboundStream))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	want := map[string][]intstr.IntOrString{
		"shop/web":        {intstr.FromString("hp-in-3000"), intstr.FromInt32(9100)},
		"shop/web-direct": {intstr.FromString("hp-in-3000")},
		"staging/web":     {intstr.FromInt32(3000)},
		"shop/db":         {{}},
	}
	for _, obj := range decodeStrict(t, out) {
		svc, ok := obj.obj.(*corev1.Service)
		if !ok {
			continue
		}
		key := svc.Namespace + "/" + svc.Name
		var got []intstr.IntOrString
		for _, p := range svc.Spec.Ports {
			got = append(got, p.TargetPort)
		}
		if !reflect.DeepEqual(got, want[key]) {
			t.Errorf("Service %s: targetPorts %v, want %v", key, got, want[key])
		}
		_, marked := svc.Annotations[PartsAnnotation]
		if moved := want[key][0].StrVal != ""; marked != moved {
			t.Errorf("Service %s: record %v, changed %v", key, marked, moved)
		}
	}
	for _, line := range []string{"Service/web (namespace shop): port 80: targetPort http → hp-in-3000 (hookpace's inbound port)",
		"Service/web-direct (namespace shop): port 3000: targetPort 3000 → hp-in-3000", "Service/db (namespace shop): not a workload, unchanged"} {
		if !strings.Contains(log, line) {
			t.Errorf("the log lacks %q:\n%s", line, log)
		}
	}
	if strings.Contains(log, "no Service among the manifests") {
		t.Errorf("the log asks for a Service change inject made:\n%s", log)
	}

	back, log, err := uninjectBytes(t, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if string(back) != inboundStream {
		t.Errorf("uninject:\n%s\nwant the input:\n%s", back, inboundStream)
	}
	plain, _, err := injectBytes(t, Defaults(), []byte(inboundStream))
	if err != nil {
		t.Fatal(err)
	}
	again, log, err := injectBytes(t, Defaults(), out)
	if err != nil || !bytes.Equal(again, plain) {
		t.Errorf("re-injected without --inbound: %v\n%s\n%s\nwant:\n%s", err, log, again, plain)
	}
	if !strings.Contains(log, "targetPorts put back") {
		t.Errorf("the re-inject does not say it put the Services back:\n%s", log)
	}

	// For clusters before 1.32: the number, the same record.
	o.InboundTargetNumber = true
	num, log, err := injectBytes(t, o, out)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	for _, obj := range decodeStrict(t, num) {
		if svc, ok := obj.obj.(*corev1.Service); ok && svc.Namespace+"/"+svc.Name == "shop/web-direct" && svc.Spec.Ports[0].TargetPort != intstr.FromInt32(13000) {
			t.Errorf("with InboundTargetNumber: targetPort %v, want 13000", svc.Spec.Ports[0].TargetPort)
		}
	}
	if back, _, err := uninjectBytes(t, num); err != nil || string(back) != inboundStream {
		t.Errorf("uninject of the numbered targetPorts: %v\n%s", err, back)
	}
}

// TestInboundNoService: without a Service among the manifests, inject
// says what targetPort to set, and what the ConfigMap must hold.
func TestInboundNoService(t *testing.T) {
	o := Defaults()
	o.Inbound = []InboundPort{{Port: 3000}, {Port: 8443, Listen: 9443}}
	_, log, err := injectBytes(t, o, []byte(deployment(`      containers:
        - name: app
          image: registry.example.com/web:1
`)))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	for _, want := range []string{
		"warning: --inbound 3000,8443: no container declares that port",
		"--inbound 3000: no Service among the manifests sends the injected pods' port 3000 to hookpace: in the Service that providers reach, set targetPort: hp-in-3000",
		"--inbound 8443: no Service among the manifests sends the injected pods' port 8443 to hookpace: in the Service that providers reach, set targetPort: hp-in-8443",
		`the ConfigMap "hookpace" must have the inbound routes {name: hp-in-3000, listen: ":13000", to: "http://127.0.0.1:3000"}, {name: hp-in-8443, listen: ":9443", to: "http://127.0.0.1:8443"}`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr lacks %q:\n%s", want, log)
		}
	}
}

// TestInboundConfigMap: the ConfigMap among the manifests gets a route
// and a hosts entry per port, which the real config loader reads; a route
// the user completed (verify) is kept on a re-inject; a route on the port
// to elsewhere is refused.
func TestInboundConfigMap(t *testing.T) {
	cm := `apiVersion: v1
kind: ConfigMap
metadata: {name: hookpace}
data:
  config.yaml: |
    listen: 127.0.0.1:8080
    hosts:
      "127.0.0.1:8443": {rate: 50/s}
---
` + deployment(appContainer)
	o := Defaults()
	o.Inbound = []InboundPort{{Port: 3000}, {Port: 8443, Listen: 9443}}
	out, log, err := injectBytes(t, o, []byte(cm))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var cfg struct {
		Hosts   map[string]map[string]any
		Inbound []map[string]any
	}
	configMap := decodeStrict(t, out)[0].obj.(*corev1.ConfigMap)
	if err := yaml.Unmarshal([]byte(configMap.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Parse("config.yaml", []byte(configMap.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("hookpace does not load the config inject wrote: %v\n%s", err, configMap.Data["config.yaml"])
	}
	if len(loaded.Inbound) != 2 || loaded.Inbound[0].Listen != ":13000" || loaded.Inbound[1].To != "http://127.0.0.1:8443" {
		t.Errorf("hookpace loads the routes as %+v", loaded.Inbound)
	}
	wantRoutes := []map[string]any{
		{"name": "hp-in-3000", "listen": ":13000", "to": "http://127.0.0.1:3000"},
		{"name": "hp-in-8443", "listen": ":9443", "to": "http://127.0.0.1:8443"},
	}
	if !reflect.DeepEqual(cfg.Inbound, wantRoutes) {
		t.Errorf("routes %v, want %v", cfg.Inbound, wantRoutes)
	}
	if h := cfg.Hosts["127.0.0.1:3000"]; h["concurrency"] != "auto" {
		t.Errorf("the app's hosts entry %v, want concurrency: auto", h)
	}
	if h := cfg.Hosts["127.0.0.1:8443"]; !reflect.DeepEqual(h, map[string]any{"rate": "50/s"}) {
		t.Errorf("the user's own hosts entry became %v", h)
	}

	edited := strings.Replace(string(out), "to: http://127.0.0.1:3000\n", "to: http://127.0.0.1:3000\n        verify: {scheme: github, secret_file: /etc/hookpace-inbound/github}\n", 1)
	if edited == string(out) {
		t.Fatalf("no route to edit in:\n%s", out)
	}
	again, log, err := injectBytes(t, o, []byte(edited))
	if err != nil || string(again) != edited {
		t.Errorf("re-inject after adding verify: %v\n%s\n%s", err, log, again)
	}

	o.Inbound = []InboundPort{{Port: 3000, Listen: 13001}}
	_, _, err = injectBytes(t, o, []byte(edited))
	if err == nil || !strings.Contains(err.Error(), "inbound route hp-in-3000 (listen :13000, to http://127.0.0.1:3000) is not --inbound 3000's (listen :13001") {
		t.Errorf("a route to the app on another port: %v", err)
	}
}

// TestInboundRefuses: ports that clash with hookpace's or the app's.
func TestInboundRefuses(t *testing.T) {
	for _, tc := range []struct {
		ports []InboundPort
		want  string
	}{
		{[]InboundPort{{Port: 60000}}, "--inbound: 60000: hookpace's port in front of it would be 70000"},
		{[]InboundPort{{Port: 3000}, {Port: 3000, Listen: 4000}}, "--inbound: 3000 given twice"},
		{[]InboundPort{{Port: 3000, Listen: 8080}}, "hookpace's port 8080 is its --proxy-port"},
		{[]InboundPort{{Port: 3000, Listen: 4000}, {Port: 4000}}, "hookpace's port 4000 is an app port given to --inbound too"},
		{[]InboundPort{{Port: 3000, Listen: 80}}, "give one from 1024 to 65535"},
		{[]InboundPort{{Port: 9090}}, "9090 is hookpace's own --admin-port in the pod"},
	} {
		o := Defaults()
		o.Inbound = tc.ports
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.ports, err, tc.want)
		}
	}
	o := Defaults()
	o.InboundSecret = "s"
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), "--inbound-secret: without --inbound") {
		t.Errorf("--inbound-secret alone: %v", err)
	}

	o = Defaults()
	o.Inbound = []InboundPort{{Port: 3000}}
	for input, want := range map[string]string{
		deployment(`      containers:
        - name: app
          image: registry.example.com/web:1
          ports: [{containerPort: 13000}]
`): `container "app" declares port 13000, which hookpace would listen on in front of 3000`,
		deployment(`      containers:
        - name: app
          image: registry.example.com/web:1
          ports: [{name: hp-in-3000, containerPort: 3001}]
`): `container "app" has a port named "hp-in-3000" already`,
	} {
		out, _, err := injectBytes(t, o, []byte(input))
		if err == nil || !strings.Contains(err.Error(), want) || len(out) > 0 {
			t.Errorf("%v, want %q", err, want)
		}
	}
}

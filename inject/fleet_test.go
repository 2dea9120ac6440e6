package inject

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/config"
	"gopkg.in/yaml.v3"
)

const fleetDeploy = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: app
          image: app:1
`

const fleetConfigMap = `apiVersion: v1
kind: ConfigMap
metadata: {name: hookpace}
data:
  config.yaml: |
    # the partners
    hosts:
      api.partner.example: {rate: 10/s}
`

func runInject(t *testing.T, o Options, manifests string) (out, log string, err error) {
	t.Helper()
	in, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	var ob, lb bytes.Buffer
	err = in.Inject(&ob, &lb, Input{Name: "m.yaml", R: strings.NewReader(manifests)})
	return ob.String(), lb.String(), err
}

// TestFleetWarning: a workload of more than one replica without
// fleet.redis gets a warning (each pod paces alone: the partner's limit
// multiplies); --fleet-redis sets fleet.redis in the ConfigMap's
// config.yaml, which hookpace then parses, and the warning goes.
func TestFleetWarning(t *testing.T) {
	_, log, err := runInject(t, Defaults(), fleetDeploy)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "warning: m.yaml: Deployment/web (3 replicas): each pod paces on its own without fleet.redis") {
		t.Errorf("no warning for 3 replicas without fleet.redis:\n%s", log)
	}
	_, log, err = runInject(t, Defaults(), strings.Replace(fleetDeploy, "replicas: 3", "replicas: 1", 1))
	if err != nil || strings.Contains(log, "warning") {
		t.Errorf("one replica: %v\n%s", err, log)
	}
	o := Defaults()
	o.FleetRedis = "redis://redis:6379/0"
	if _, _, err := runInject(t, o, fleetDeploy); err == nil || !strings.Contains(err.Error(), `--fleet-redis: the ConfigMap "hookpace" is not among the manifests`) {
		t.Errorf("--fleet-redis without the ConfigMap: %v", err)
	}
	out, log, err := runInject(t, o, fleetDeploy+"---\n"+fleetConfigMap)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log, "warning") {
		t.Errorf("a warning with --fleet-redis:\n%s", log)
	}
	var cfgText string
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var obj struct {
			Kind string
			Data map[string]string
		}
		if dec.Decode(&obj) != nil {
			break
		}
		if obj.Kind == "ConfigMap" {
			cfgText = obj.Data["config.yaml"]
		}
	}
	cfg, err := config.Parse("config.yaml", []byte(cfgText))
	if err != nil {
		t.Fatalf("the written config.yaml: %v\n%s", err, cfgText)
	}
	if cfg.Fleet.Redis != "redis://redis:6379/0" || cfg.Hosts["api.partner.example"].Rate.PerSecond() != 10 {
		t.Errorf("the written config: fleet.redis %q, hosts %v\n%s", cfg.Fleet.Redis, cfg.Hosts, cfgText)
	}
	// A ConfigMap that sets fleet.redis itself: no warning.
	withRedis := strings.Replace(fleetConfigMap, "    hosts:", "    fleet: {redis: \"redis://r:6379\"}\n    hosts:", 1)
	if _, log, err := runInject(t, Defaults(), fleetDeploy+"---\n"+withRedis); err != nil || strings.Contains(log, "warning") {
		t.Errorf("fleet.redis in the ConfigMap: %v\n%s", err, log)
	}
}

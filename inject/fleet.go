package inject

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// fleetBook is what inject learns of pacing across pods while it reads
// the manifests: the workloads with more than one replica, and whether
// the ConfigMap (among the manifests) or --fleet-redis sets fleet.redis.
type fleetBook struct {
	multi     []string // "Deployment/web (3 replicas)"
	configMap bool     // the ConfigMap named Options.ConfigMap was among the inputs
	redis     bool     // fleet.redis is set: by the ConfigMap, or by --fleet-redis into it
}

// replicas is a workload's spec.replicas (1 when absent).
func replicas(w workload) int {
	if w.kind != "Deployment" && w.kind != "StatefulSet" && w.kind != "ReplicaSet" {
		return 1
	}
	n := get(get(w.obj, "spec"), "replicas")
	if n == nil {
		return 1
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		return 1
	}
	return v
}

// noteWorkload records w's replicas.
func (in *Injector) noteWorkload(w workload) {
	if n := replicas(w); n > 1 {
		in.fleet.multi = append(in.fleet.multi, fmt.Sprintf("%s (%d replicas)", w.name, n))
	}
}

// configMap reads (and, with Options.FleetRedis, sets) fleet.redis in the
// ConfigMap that holds hookpace's config.yaml, when it is among the
// manifests. It reports whether obj was that ConfigMap.
func (in *Injector) configMap(obj *yaml.Node, name string) (bool, error) {
	if str(obj, "kind") != "ConfigMap" || str(dig(obj, "metadata"), "name") != in.o.ConfigMap {
		return false, nil
	}
	in.fleet.configMap = true
	data := get(obj, "data")
	cfgNode := get(data, "config.yaml")
	if cfgNode == nil {
		return true, nil
	}
	cfg, err := readConfig(cfgNode, name)
	if err != nil {
		return true, err
	}
	if r := str(get(cfg.root(), "fleet"), "redis"); r != "" && in.o.FleetRedis == "" {
		in.fleet.redis = true
		return true, nil
	}
	if in.o.FleetRedis == "" {
		return true, nil
	}
	set(child(cfg.root(), "fleet", yaml.MappingNode, ""), "redis", scalar(in.o.FleetRedis), "")
	if err := cfg.write(name); err != nil {
		return true, err
	}
	in.fleet.redis = true
	return true, nil
}

// fleetWarnings says, once the manifests are read, what pacing across
// pods needs.
func (in *Injector) fleetWarnings(log io.Writer) error {
	if in.o.FleetRedis != "" && !in.fleet.configMap {
		return fmt.Errorf("--fleet-redis: the ConfigMap %q is not among the manifests: add it (-f) so that inject sets fleet.redis in its config.yaml, or set fleet.redis there yourself", in.o.ConfigMap)
	}
	if len(in.fleet.multi) > 0 && !in.fleet.redis {
		fmt.Fprintf(log, "warning: %s: each pod paces on its own without fleet.redis, so a partner's limit multiplies by the replicas "+
			"(3 replicas: a 10/s partner gets up to 30/s). Set fleet.redis in the ConfigMap %q, or pass --fleet-redis URL with the ConfigMap among the manifests\n",
			strings.Join(in.fleet.multi, ", "), in.o.ConfigMap)
	}
	return nil
}

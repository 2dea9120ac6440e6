package config

import (
	"strconv"

	"github.com/hookpace/hookpace/spool"
	"gopkg.in/yaml.v3"
)

// Fairness is a host's `fairness` block: what a webhook's
// fairness key is, so that the host's queue is served in turns across the
// keys that have work instead of as one FIFO.
//
//	fairness:
//	  key: header            # header | proxy_user | path | none
//	  path_depth: 1          # key: path: leading path segments in the key
//	  weights: {tenant-a: 3} # a key not named weighs 1
//	  max_queued_per_key: 0  # 0: no cap; else 429 to that key's producer
//
// Each field overlays the one in defaults, as a host's other settings do;
// `key: none` turns fairness off for a host when defaults set it.
type Fairness struct {
	Key             string         // FairnessHeader, FairnessProxyUser or FairnessPath; "": no fairness keys
	PathDepth       int            // key: path: how many leading path segments make the key, >= 1
	Weights         map[string]int // by key; a key not named weighs 1
	MaxQueuedPerKey int64          // webhooks queued for one key before 429; 0 = no cap
}

// Where a webhook's fairness key comes from.
const (
	FairnessHeader    = "header"     // the Hookpace-Fairness-Key request header
	FairnessProxyUser = "proxy_user" // the proxy auth user the request authenticated as
	FairnessPath      = "path"       // the URL path's first path_depth segments
	FairnessNone      = "none"       // no fairness keys (stored as "")
)

// Priority is a host's `priority` block: the least share of a
// fairness key's turns that its lower priorities get while they have work.
type Priority struct {
	MinShare float64 // in (0,1)
}

// Bounds of the fairness settings.
const (
	MaxPathDepth = 32   // fairness.path_depth
	MaxWeight    = 1000 // fairness.weights' values
)

type rawFairness struct {
	Key             opt[string] `yaml:"key"`
	PathDepth       opt[int]    `yaml:"path_depth"`
	Weights         yaml.Node   `yaml:"weights"` // see resolveWeights
	MaxQueuedPerKey opt[int64]  `yaml:"max_queued_per_key"`
}

type rawPriority struct {
	MinShare opt[float64] `yaml:"min_share"`
}

var (
	fairnessFields = map[string]bool{"key": true, "path_depth": true, "weights": true, "max_queued_per_key": true}
	priorityFields = map[string]bool{"min_share": true}
)

func defaultFairness() Fairness { return Fairness{PathDepth: 1} }

func defaultPriority() Priority { return Priority{MinShare: 0.1} }

// resolveFairness overlays the fairness block at n (path is e.g.
// "defaults.fairness") on base.
func resolveFairness(p *problems, path string, n *yaml.Node, base Fairness) Fairness {
	var r rawFairness
	if n = deref(n); !decodeBlock(p, path, n, fairnessFields, "key, path_depth, weights, max_queued_per_key", &r) {
		return base
	}
	f := func(name string) string { return path + "." + name }
	fa := base
	if field(p, f("key"), r.Key, &fa.Key, oneOf(FairnessHeader, FairnessProxyUser, FairnessPath, FairnessNone)) && fa.Key == FairnessNone {
		fa.Key = ""
	}
	field(p, f("path_depth"), r.PathDepth, &fa.PathDepth, intWithin(1, MaxPathDepth)) // read with key: path only
	if w, ok := resolveWeights(p, f("weights"), &r.Weights); ok {
		fa.Weights = w
	}
	field(p, f("max_queued_per_key"), r.MaxQueuedPerKey, &fa.MaxQueuedPerKey, atLeast[int64](0))
	if fa.Key == "" {
		if r.MaxQueuedPerKey.Set && fa.MaxQueuedPerKey > 0 {
			p.add(r.MaxQueuedPerKey.Line, f("max_queued_per_key"), "needs a fairness key (key: header, proxy_user or path)")
		}
		if wn := deref(&r.Weights); wn.Kind != 0 && len(fa.Weights) > 0 {
			p.add(wn.Line, f("weights"), "needs a fairness key (key: header, proxy_user or path)")
		}
	}
	return fa
}

// resolveWeights reads the weights mapping at n: fairness key to an
// integer weight, 1 to MaxWeight. ok is false when n is absent or bad.
func resolveWeights(p *problems, path string, n *yaml.Node) (map[string]int, bool) {
	n = deref(n)
	if n.Kind == 0 {
		return nil, false
	}
	if n.ShortTag() == "!!null" {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		p.add(n.Line, path, "want a mapping of fairness keys to weights, got %s", quoteNode(n))
		return nil, false
	}
	w, ok := make(map[string]int, len(n.Content)/2), true
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		at := path + "[" + strconv.Quote(k.Value) + "]"
		if k.Kind != yaml.ScalarNode {
			p.add(k.Line, path, "want fairness keys, got %s", quoteNode(k))
			ok = false
			continue
		}
		if err := spool.CheckLaneKey(k.Value, spool.MaxLaneKey); err != nil {
			p.add(k.Line, at, "key %v", err)
			ok = false
			continue
		}
		if first, dup := seen[k.Value]; dup {
			p.add(k.Line, at, "duplicate key (first at line %d)", first)
			ok = false
			continue
		}
		seen[k.Value] = k.Line
		var o opt[int]
		_ = o.UnmarshalYAML(v)
		var weight int
		if !field(p, at, o, &weight, intWithin(1, MaxWeight)) {
			ok = false
			continue
		}
		w[k.Value] = weight
	}
	return w, ok
}

// resolvePriority overlays the priority block at n on base.
func resolvePriority(p *problems, path string, n *yaml.Node, base Priority) Priority {
	var r rawPriority
	if n = deref(n); !decodeBlock(p, path, n, priorityFields, "min_share", &r) {
		return base
	}
	pc := base
	field(p, path+".min_share", r.MinShare, &pc.MinShare, within(0, 1, false, false))
	return pc
}

// Package inject adds hookpace to Kubernetes manifests, as linkerd inject
// and istioctl kube-inject do for their proxies: a native sidecar, its
// volumes, and on each app container the proxy variables, NO_PROXY and the
// variables that make it trust hookpace's HTTPS interception CA.
//
// It reads a stream of YAML (or JSON) documents, edits the pod templates
// of Deployments, StatefulSets, DaemonSets, Jobs, CronJobs and Pods (also
// inside Lists), and writes the stream back with everything else as it
// was. Its output carries Annotation, so injecting it again changes
// nothing.
package inject

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// podSpecPath is where each kind keeps its pod spec; the pod's metadata is
// the mapping next to it.
var podSpecPath = map[string][]string{
	"Pod":         {"spec"},
	"Deployment":  {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"DaemonSet":   {"spec", "template", "spec"},
	"Job":         {"spec", "template", "spec"},
	"CronJob":     {"spec", "jobTemplate", "spec", "template", "spec"},
}

// Injector adds hookpace as its Options say.
type Injector struct {
	o       Options
	r       resources
	noTrust map[string]bool // container names named by Options.NoTrust
	seen    map[string]bool // of those, the ones some object has
	fleet   fleetBook
	capture captureBook
	inbound inboundBook
	jobs    []string // Jobs that need a hand-off target
	handoff bool     // the ConfigMap among the manifests sets shutdown.handoff
}

// New checks o and returns an Injector.
func New(o Options) (*Injector, error) {
	r, err := o.check()
	if err != nil {
		return nil, err
	}
	in := &Injector{o: o, r: r, noTrust: map[string]bool{}, seen: map[string]bool{}}
	for _, n := range o.NoTrust {
		in.noTrust[n] = true
	}
	return in, nil
}

// Input is one manifest stream and the name messages give it.
type Input struct {
	Name string
	R    io.Reader
}

// Inject reads every document of the inputs and writes them, as one
// stream, to out; log gets a line per object (what was done, or why not).
// If any object is refused, or an input does not parse, out gets nothing
// and the error names each object, container and variable at fault.
func (in *Injector) Inject(out, log io.Writer, inputs ...Input) error {
	return stream(out, log, inputs, func(root *yaml.Node, where string) error {
		return in.object(root, where, log)
	}, func() error {
		for _, n := range in.o.NoTrust {
			if n != "*" && !in.seen[n] {
				fmt.Fprintf(log, "warning: --no-trust=%s: no container of that name\n", n)
			}
		}
		in.captureNotes(log)
		reached, err := in.services(log)
		if err != nil {
			return err
		}
		in.inboundNotes(log, reached)
		return errors.Join(in.fleetWarnings(log), in.jobsRefused())
	})
}

// stream calls each on the root of every document of the inputs, then
// done (if not nil), and writes the documents as one stream to out,
// unless one of them returned an error. Nothing is encoded before done
// returns: done may still edit any document (a Service read before the
// workload it selects).
func stream(out, log io.Writer, inputs []Input, each func(root *yaml.Node, where string) error, done func() error) error {
	var docs []*yaml.Node
	var errs []error
	for _, input := range inputs {
		dec := yaml.NewDecoder(input.R)
		for i := 1; ; i++ {
			var doc yaml.Node
			err := dec.Decode(&doc)
			if err == io.EOF {
				break
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: document %d: %w", input.Name, i, err))
				break
			}
			root := doc.Content[0]
			if isNull(root) {
				continue // an empty document ("---" twice)
			}
			if root.Kind != yaml.MappingNode {
				errs = append(errs, fmt.Errorf("%s: document %d is not a Kubernetes object", input.Name, i))
				continue
			}
			if root.Style&yaml.FlowStyle != 0 {
				blockStyle(&doc) // JSON in, YAML out
			}
			expandAliases(&doc)
			errs = append(errs, each(root, fmt.Sprintf("%s: ", input.Name)))
			docs = append(docs, &doc)
		}
	}
	if done != nil {
		errs = append(errs, done())
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, doc := range docs {
		if err := enc.Encode(doc); err != nil {
			return fmt.Errorf("%s: %w", str(doc.Content[0], "kind"), err)
		}
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := out.Write(buf.Bytes())
	return err
}

// object injects one object, or each item of a List.
func (in *Injector) object(obj *yaml.Node, where string, log io.Writer) error {
	return visit(obj, where, func(obj *yaml.Node, name string) error {
		if str(obj, "kind") == "Service" {
			in.noteService(obj, name) // edited once every pod is known
			return nil
		}
		in.noteHandoff(obj)
		if err := in.captureConfigMap(obj, name); err != nil {
			return err
		}
		if err := in.inboundConfigMap(obj, name); err != nil {
			return err
		}
		if ok, err := in.configMap(obj, name); ok || err != nil {
			if err != nil {
				return err
			}
			fmt.Fprintf(log, "%s: hookpace's config\n", name)
			return nil
		}
		w, ok, err := asWorkload(obj, name)
		switch {
		case err != nil:
			return err
		case !ok:
			fmt.Fprintf(log, "%s: not a workload, unchanged\n", name)
			return nil
		}
		msg, err := in.workload(w)
		if err != nil {
			return err
		}
		in.noteWorkload(w)
		in.noteJob(w)
		in.notePod(w)
		fmt.Fprintf(log, "%s: %s%s\n", w.name, msg, in.undeclared(w))
		return nil
	})
}

// visit calls fn on obj, or on each item of a List, with the name
// messages give it ("deploy.yaml: Deployment/web (namespace shop)").
func visit(obj *yaml.Node, where string, fn func(obj *yaml.Node, name string) error) error {
	kind := str(obj, "kind")
	name := kind
	if n := str(dig(obj, "metadata"), "name"); n != "" {
		name += "/" + n
	}
	if ns := str(dig(obj, "metadata"), "namespace"); ns != "" {
		name += " (namespace " + ns + ")"
	}
	if items := get(obj, "items"); strings.HasSuffix(kind, "List") && items != nil && items.Kind == yaml.SequenceNode {
		var errs []error
		for _, item := range items.Content {
			if k := strings.TrimSuffix(kind, "List"); k != "" && item.Kind == yaml.MappingNode && str(item, "kind") == "" {
				// The API's own lists (PodList) leave their items' kind out.
				set(item, "kind", scalar(k), "")
			}
			errs = append(errs, visit(item, where+name+": ", fn))
		}
		return errors.Join(errs...)
	}
	return fn(obj, where+name)
}

// asWorkload finds obj's pod template; false if its kind has none.
func asWorkload(obj *yaml.Node, name string) (workload, bool, error) {
	kind := str(obj, "kind")
	keys, ok := podSpecPath[kind]
	if !ok {
		return workload{}, false, nil
	}
	w := workload{name: name, kind: kind, obj: obj, holder: obj}
	if len(keys) > 1 {
		w.holder = dig(obj, keys[:len(keys)-1]...)
	}
	w.spec = get(w.holder, "spec")
	if w.spec == nil || w.spec.Kind != yaml.MappingNode {
		return workload{}, true, fmt.Errorf("%s: no pod spec at %s", w.name, strings.Join(keys, "."))
	}
	return w, true, nil
}

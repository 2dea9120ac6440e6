package inject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"
)

// serviceRecord is PartsAnnotation's value on a Service whose targetPorts
// inject moved to hookpace's inbound ports: what each was, so that
// uninject and a re-inject put it back exactly.
type serviceRecord struct {
	Ports   []servicePort `json:"ports"`
	Created []string      `json:"created,omitempty"` // "metadata", "annotations": fields inject added
}

// servicePort is one port entry inject changed.
type servicePort struct {
	Index      int     `json:"index"`                // in spec.ports
	Port       string  `json:"port"`                 // its port, to tell an entry moved since
	TargetPort *string `json:"targetPort,omitempty"` // before; nil = unset (the port itself)
	Int        bool    `json:"int,omitempty"`        // it was a number, not a name
}

// noteService keeps a Service to edit once every pod is known.
func (in *Injector) noteService(obj *yaml.Node, name string) {
	in.inbound.services = append(in.inbound.services, obj)
	in.inbound.names = append(in.inbound.names, name)
}

// services takes inject's earlier edits out of each Service and moves
// the targetPorts that reach an inbound port of an injected pod to
// hookpace's named port; reached has the app ports some Service now
// sends to hookpace.
func (in *Injector) services(log io.Writer) (reached map[int]bool, err error) {
	reached = map[int]bool{}
	var errs []error
	for i, svc := range in.inbound.services {
		name := in.inbound.names[i]
		before, err := yaml.Marshal(svc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		msg, err := serviceBack(svc, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		moved := in.moveTargets(svc, reached)
		after, err := yaml.Marshal(svc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		switch {
		case msg != "" && bytes.Equal(before, after):
			msg = "already injected (" + Annotation + "), unchanged"
		case moved != "":
			msg = moved
		case msg == "":
			msg = "not a workload, unchanged"
		}
		fmt.Fprintf(log, "%s: %s\n", name, msg)
	}
	return reached, errors.Join(errs...)
}

// moveTargets points svc's ports that reach an inbound port of a pod it
// selects at hookpace's port in front of it, and records what they were.
func (in *Injector) moveTargets(svc *yaml.Node, reached map[int]bool) string {
	spec := get(svc, "spec")
	sel := get(spec, "selector")
	if sel == nil || sel.Kind != yaml.MappingNode || len(sel.Content) == 0 {
		return ""
	}
	ns := str(dig(svc, "metadata"), "namespace")
	var pods []podPorts
	for _, p := range in.inbound.pods {
		if p.namespace == ns && selects(sel, p.labels) {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return ""
	}
	var rec serviceRecord
	meta := get(svc, "metadata")
	if meta == nil || isNull(meta) {
		rec.Created = append(rec.Created, "metadata")
	}
	if a := get(meta, "annotations"); a == nil || isNull(a) {
		rec.Created = append(rec.Created, "annotations")
	}
	ports := get(spec, "ports")
	if ports == nil || ports.Kind != yaml.SequenceNode {
		return ""
	}
	msg := ""
	for i, port := range ports.Content {
		if port.Kind != yaml.MappingNode || (str(port, "protocol") != "" && str(port, "protocol") != "TCP") {
			continue
		}
		tp := get(port, "targetPort")
		target, _ := strconv.Atoi(str(port, "port")) // no targetPort: the port itself
		if tp != nil && !isNull(tp) {
			var err error
			if target, err = strconv.Atoi(tp.Value); err != nil {
				for _, p := range in.o.Inbound {
					if tp.Value == p.PortName() {
						reached[p.Port] = true // pointed there by hand
					}
				}
				target = 0
				for _, p := range pods {
					if n, ok := p.names[tp.Value]; ok {
						target = n
						break
					}
				}
			}
		}
		for _, p := range in.o.Inbound {
			if target == p.ListenPort() {
				reached[p.Port] = true // pointed there by hand
			}
			if target != p.Port {
				continue
			}
			sp := servicePort{Index: i, Port: str(port, "port")}
			if tp != nil && !isNull(tp) {
				v := tp.Value
				sp.TargetPort, sp.Int = &v, tp.ShortTag() == "!!int"
			}
			rec.Ports = append(rec.Ports, sp)
			now := scalar(p.PortName())
			if in.o.InboundTargetNumber {
				now = intScalar(int64(p.ListenPort()))
			}
			set(port, "targetPort", now, "")
			reached[p.Port] = true
			was := str(port, "port")
			if sp.TargetPort != nil {
				was = *sp.TargetPort
			}
			if msg != "" {
				msg += "; "
			}
			what := "hookpace's inbound port"
			if now.Value != p.PortName() {
				what += " " + p.PortName()
			}
			msg += fmt.Sprintf("port %s: targetPort %s → %s (%s)", str(port, "port"), was, now.Value, what)
		}
	}
	if len(rec.Ports) == 0 {
		return ""
	}
	b, err := json.Marshal(rec)
	if err != nil {
		panic("inject: " + err.Error()) // a struct of strings and ints
	}
	anns := child(child(svc, "metadata", yaml.MappingNode, "spec"), "annotations", yaml.MappingNode, "")
	set(anns, Annotation, scalar(Format), "")
	set(anns, PartsAnnotation, scalar(string(b)), "")
	return msg
}

// selects reports whether every label of the selector sel is in labels.
func selects(sel *yaml.Node, labels map[string]string) bool {
	for i := 0; i+1 < len(sel.Content); i += 2 {
		if v, ok := labels[sel.Content[i].Value]; !ok || v != sel.Content[i+1].Value {
			return false
		}
	}
	return true
}

// serviceBack puts back what inject changed in svc, as its record says;
// "" if inject had not changed it.
func serviceBack(svc *yaml.Node, name string) (string, error) {
	anns := dig(svc, "metadata", "annotations")
	switch v := str(anns, Annotation); {
	case v == "":
		return "", nil
	case v != Format:
		return "", fmt.Errorf("%s: injected in format %q, this hookpace reads %q", name, v, Format)
	}
	var rec serviceRecord
	if err := json.Unmarshal([]byte(str(anns, PartsAnnotation)), &rec); err != nil {
		return "", fmt.Errorf("%s: %s: %w", name, PartsAnnotation, err)
	}
	ports := get(get(svc, "spec"), "ports")
	for _, sp := range rec.Ports {
		if ports == nil || sp.Index >= len(ports.Content) || str(ports.Content[sp.Index], "port") != sp.Port {
			return "", fmt.Errorf("%s: spec.ports[%d] is no longer port %s, which inject changed: restore its targetPort by hand and remove the %s annotations",
				name, sp.Index, sp.Port, Annotation)
		}
	}
	for _, sp := range rec.Ports {
		port := ports.Content[sp.Index]
		switch {
		case sp.TargetPort == nil:
			del(port, "targetPort")
		case sp.Int:
			set(port, "targetPort", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: *sp.TargetPort}, "")
		default:
			set(port, "targetPort", scalar(*sp.TargetPort), "")
		}
	}
	del(anns, Annotation)
	del(anns, PartsAnnotation)
	meta := get(svc, "metadata")
	for _, f := range []struct{ id, key string }{{"annotations", "annotations"}, {"metadata", "metadata"}} {
		m := meta
		if f.id == "metadata" {
			m = svc
		}
		if v := get(m, f.key); v != nil && len(v.Content) == 0 && v.Kind == yaml.MappingNode && slices.Contains(rec.Created, f.id) {
			del(m, f.key)
		}
	}
	return "targetPorts put back", nil
}

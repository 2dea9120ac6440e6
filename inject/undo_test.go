package inject

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// generic decodes a stream into one JSON value per document, as the API
// server would see them (key order and YAML style gone).
func generic(t *testing.T, stream []byte) []any {
	t.Helper()
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out []any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		js, err := sigsyaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		var v any
		if err := json.Unmarshal(js, &v); err != nil {
			t.Fatal(err)
		}
		if v != nil {
			out = append(out, v)
		}
	}
}

func uninjectBytes(t *testing.T, input []byte) ([]byte, string, error) {
	t.Helper()
	var ob, lb bytes.Buffer
	err := Uninject(&ob, &lb, Input{Name: "in.yaml", R: bytes.NewReader(input)})
	return ob.Bytes(), lb.String(), err
}

// TestUpgradeAndUninject: injected output injected again with another
// image differs from it in the image only; with other options it is the
// bytes inject gives the original with those options; and uninject of
// any of them gives back the original's objects.
func TestUpgradeAndUninject(t *testing.T) {
	for _, file := range []string{"deployment.yaml", "statefulset.yaml", "daemonset.yaml", "job.yaml", "cronjob.yaml",
		"pod.yaml", "list.yaml", "stream.yaml", "deployment.json", "anchors.yaml"} {
		t.Run(file, func(t *testing.T) {
			input := readTestdata(t, file)
			o1 := Defaults()
			o1.Image, o1.AcceptLoss = "reg/hookpace:0.1.0", true
			v1, log, err := injectBytes(t, o1, input)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			o2 := o1
			o2.Image = "reg/hookpace:0.2.0"
			v2, log, err := injectBytes(t, o2, v1)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			if !strings.Contains(log, "re-injected") {
				t.Errorf("the upgrade's log does not say it replaced hookpace's parts:\n%s", log)
			}
			l1, l2 := strings.Split(string(v1), "\n"), strings.Split(string(v2), "\n")
			if len(l1) != len(l2) {
				t.Fatalf("the upgrade has %d lines, the first injection %d:\n%s", len(l2), len(l1), v2)
			}
			changed := 0
			for i := range l1 {
				if l1[i] == l2[i] {
					continue
				}
				changed++
				if strings.TrimSpace(l1[i]) != "image: reg/hookpace:0.1.0" || strings.TrimSpace(l2[i]) != "image: reg/hookpace:0.2.0" {
					t.Errorf("line %d: %q became %q: only the image should change", i+1, l1[i], l2[i])
				}
			}
			if changed == 0 {
				t.Errorf("the upgrade changed no line")
			}

			// Other options: the same bytes as injecting the original so.
			o3 := o2
			o3.Java, o3.NoTrust, o3.HandoffSecret, o3.MemoryLimit, o3.AppStop = true, []string{"*"}, "handoff", "", 40e9
			v3, log, err := injectBytes(t, o3, v2)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			direct, _, err := injectBytes(t, o3, input)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(v3, direct) {
				t.Errorf("re-injected with other options:\n%s\ninjecting the original with them:\n%s", v3, direct)
			}

			want := generic(t, input)
			for name, injected := range map[string][]byte{"0.1.0": v1, "0.2.0": v2, "other options": v3} {
				back, log, err := uninjectBytes(t, injected)
				if err != nil {
					t.Fatalf("uninject %s: %v\n%s", name, err, log)
				}
				if got := generic(t, back); !reflect.DeepEqual(got, want) {
					t.Errorf("uninject of %s gives:\n%s\nwant the objects of:\n%s", name, back, input)
				}
			}
		})
	}
}

// TestUpgradeKeepsUserEdits: what the user changed in injected output
// (a variable, a volume, a longer grace period) survives a re-inject and
// an uninject; only hookpace's parts go.
func TestUpgradeKeepsUserEdits(t *testing.T) {
	input := []byte(deployment(`      terminationGracePeriodSeconds: 20
      containers:
        - name: app
          image: registry.example.com/web:1
          env:
            - name: JAVA_TOOL_OPTIONS
              value: -Xmx1g
`))
	injected, log, err := injectBytes(t, Defaults(), input)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	edited := strings.Replace(string(injected), "            - name: JAVA_TOOL_OPTIONS\n", "            - name: FEATURE\n              value: \"on\"\n            - name: JAVA_TOOL_OPTIONS\n", 1)
	if edited == string(injected) {
		t.Fatalf("no JAVA_TOOL_OPTIONS entry to edit next to in:\n%s", injected)
	}
	o := Defaults()
	o.Image = "reg/hookpace:0.2.0"
	again, log, err := injectBytes(t, o, []byte(edited))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	back, log, err := uninjectBytes(t, again)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	want := generic(t, []byte(deployment(`      terminationGracePeriodSeconds: 20
      containers:
        - name: app
          image: registry.example.com/web:1
          env:
            - {name: FEATURE, value: "on"}
            - {name: JAVA_TOOL_OPTIONS, value: -Xmx1g}
`)))
	if got := generic(t, back); !reflect.DeepEqual(got, want) {
		t.Errorf("uninject after an edit and an upgrade:\n%s", back)
	}
	if !strings.Contains(string(again), "reg/hookpace:0.2.0") || !strings.Contains(string(again), "terminationGracePeriodSeconds: 50") {
		t.Errorf("the upgrade lost the image or the grace period:\n%s", again)
	}
}

// TestUninjectNeedsTheRecord: an object marked injected but without the
// record of its parts (or not injected at all) is not guessed at.
func TestUninjectNeedsTheRecord(t *testing.T) {
	injected, _, err := injectBytes(t, Defaults(), []byte(deployment(appContainer)))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(injected), "\n") {
		if !strings.Contains(l, PartsAnnotation) {
			kept = append(kept, l)
		}
	}
	out, _, err := uninjectBytes(t, []byte(strings.Join(kept, "\n")))
	if err == nil || !strings.Contains(err.Error(), PartsAnnotation) || len(out) > 0 {
		t.Errorf("uninject without the record: %v, wrote %d bytes", err, len(out))
	}
	plain := []byte(deployment(appContainer))
	out, log, err := uninjectBytes(t, plain)
	if err != nil || !strings.Contains(log, "not injected, unchanged") || !reflect.DeepEqual(generic(t, out), generic(t, plain)) {
		t.Errorf("uninject of a plain Deployment: %v\n%s\n%s", err, log, out)
	}
}

package rewrite

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func paths(t *testing.T, ss ...string) []Path {
	t.Helper()
	var out []Path
	for _, s := range ss {
		p, err := ParsePath(s)
		if err != nil {
			t.Fatalf("ParsePath(%q): %v", s, err)
		}
		out = append(out, p)
	}
	return out
}

func TestParsePath(t *testing.T) {
	for _, tc := range []struct {
		in    string
		steps []step
		err   string
	}{
		{in: "$.a.b", steps: []step{{kind: stepKey, key: "a"}, {kind: stepKey, key: "b"}}},
		{in: "$.items[*].card", steps: []step{{kind: stepKey, key: "items"}, {kind: stepAll}, {kind: stepKey, key: "card"}}},
		{in: "$.a[0]", steps: []step{{kind: stepKey, key: "a"}, {kind: stepIndex, index: 0}}},
		{in: "$[2].x-y_z", steps: []step{{kind: stepIndex, index: 2}, {kind: stepKey, key: "x-y_z"}}},
		{in: "a.b", err: "must start with $"},
		{in: "$", err: "whole body"},
		{in: "$.", err: "empty member name"},
		{in: "$.a..b", err: "empty member name"},
		{in: "$.a[", err: "without ']'"},
		{in: "$.a[-1]", err: "neither [*] nor an index"},
		{in: "$.a[x]", err: "neither [*] nor an index"},
		{in: "$.*", err: ".* is not supported"},
		{in: "$a", err: "unexpected"},
		{in: "$.a]", err: "unexpected"},
		{in: "$" + strings.Repeat(".a", MaxPathSteps+1), err: "more than"},
	} {
		p, err := ParsePath(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePath(%q) = %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(p.steps, tc.steps) || p.String() != tc.in {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v", tc.in, p.steps, err, tc.steps)
		}
	}
}

func TestJSONApply(t *testing.T) {
	for _, tc := range []struct {
		name       string
		drop, mask []string
		in, want   string
		hits       string
	}{
		{
			name: "the acceptance: other fields, their order and numbers intact; white space only where a path passed",
			drop: []string{"$.customer.email"}, mask: []string{"$.card.number"},
			in:   `{"id":"evt_1", "amount": 12345678901234567890.10, "customer":{"name":"Ann","email":"a@x.example","tier":1e3},"card":{"number":"4111111111111111","last4":"1111"},"z":[1, 2]}`,
			want: `{"id":"evt_1","amount":12345678901234567890.10,"customer":{"name":"Ann","tier":1e3},"card":{"number":"[masked]","last4":"1111"},"z":[1, 2]}`,
			hits: "drop $.customer.email (1); mask $.card.number (1)",
		},
		{
			name: "every element of an array",
			drop: []string{"$.items[*].card"},
			in:   `{"items":[{"card":1,"sku":"a"},{"sku":"b"},{"card":{"n":2},"sku":"c"}]}`,
			want: `{"items":[{"sku":"a"},{"sku":"b"},{"sku":"c"}]}`,
			hits: "drop $.items[*].card (2)",
		},
		{
			name: "one element, masked whatever its type",
			mask: []string{"$.a[1]"},
			in:   `{"a":[{"x":1},{"y":2},3]}`,
			want: `{"a":[{"x":1},"[masked]",3]}`,
			hits: "mask $.a[1] (1)",
		},
		{
			name: "duplicate keys are all dropped",
			drop: []string{"$.secret"},
			in:   `{"secret":1,"ok":true,"secret":2}`,
			want: `{"ok":true}`,
			hits: "drop $.secret (2)",
		},
		{
			name: "nothing matches: the body is returned as it came",
			drop: []string{"$.customer.email", "$.a[5]", "$.s.t"},
			in:   " {\"customer\": \"not an object\", \"a\": [1], \"s\": [1]}\n",
			want: " {\"customer\": \"not an object\", \"a\": [1], \"s\": [1]}\n",
		},
		{
			name: "a top-level array",
			mask: []string{"$[*].email"},
			in:   `[{"email":"a"},{"email":"b","n":1}]`,
			want: `[{"email":"[masked]"},{"email":"[masked]","n":1}]`,
			hits: "mask $[*].email (2)",
		},
		{
			name: "keys that need escaping keep their meaning",
			drop: []string{"$.x"},
			in:   `{"a\"b<":1,"é":2,"x":3}`,
			want: `{"a\"b<":1,"é":2}`,
			hits: "drop $.x (1)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &JSON{Drop: paths(t, tc.drop...), Mask: paths(t, tc.mask...)}
			got, a, err := j.Apply([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if a.String() != tc.hits || a.Changed() != (tc.hits != "") {
				t.Errorf("applied %q (changed %v), want %q", a.String(), a.Changed(), tc.hits)
			}
		})
	}
}

func TestJSONApplyNotJSON(t *testing.T) {
	j := &JSON{Drop: paths(t, "$.a")}
	for _, in := range []string{"a=1&b=2", `{"a":1`, "", `{"a":1} {"b":2}`} {
		if _, _, err := j.Apply([]byte(in)); !errors.Is(err, ErrNotJSON) {
			t.Errorf("Apply(%q) = %v, want ErrNotJSON", in, err)
		}
	}
	var none *JSON
	if out, _, err := none.Apply([]byte("not json")); err != nil || string(out) != "not json" {
		t.Errorf("nil rules: %q, %v", out, err)
	}
}

func TestHeadersApply(t *testing.T) {
	h := http.Header{"X-Internal-Trace": {"1"}, "X-Tenant": {"app", "other"}, "Content-Type": {"application/json"},
		AppliedHeader: {"drop $.a (1)"}}
	r := &Headers{Set: []Header{{"X-Tenant", "acme"}}, Remove: []string{"X-Internal-Trace"}}
	r.Apply(h)
	want := http.Header{"X-Tenant": {"acme"}, "Content-Type": {"application/json"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got %v, want %v", h, want)
	}
	h = http.Header{AppliedHeader: {"x"}, "A": {"b"}}
	(*Headers)(nil).Apply(h)
	if !reflect.DeepEqual(h, http.Header{"A": {"b"}}) {
		t.Errorf("nil rules left %v", h)
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name    string
		signing bool
		ok      bool
	}{
		{"X-Tenant", false, true}, {"content-type", false, true}, {"Authorization", false, true},
		{"connection", false, false}, {"Transfer-Encoding", false, false}, {"Host", false, false},
		{"Proxy-Authorization", false, false}, {"x-hookpace-id", false, false}, {"Hookpace-Delay", false, false},
		{"webhook-signature", false, true}, {"webhook-signature", true, false}, {"Webhook-Id", true, false},
	} {
		var signed []string
		if tc.signing {
			signed = []string{"webhook-id", "webhook-timestamp", "webhook-signature"}
		}
		if err := CheckName(tc.name, signed); (err == nil) != tc.ok {
			t.Errorf("CheckName(%q, %v) = %v, want ok %v", tc.name, tc.signing, err, tc.ok)
		}
	}
}

func BenchmarkJSONApply1KiB(b *testing.B) {
	body := []byte(`{"event":"invoice.paid","id":"evt_0123456789","data":"` + strings.Repeat("abcdefghij", 100) + `"}`)
	mask, _ := ParsePath("$.id")
	j := &JSON{Mask: []Path{mask}}
	b.ReportAllocs()
	for b.Loop() {
		if _, a, err := j.Apply(body); err != nil || a.Masked != 1 {
			b.Fatal(err)
		}
	}
}

// Strings holding brackets, quotes and escapes, and nesting, do not lead
// the splitter astray; whatever the input, the output is JSON and a body
// no rule matched comes back unchanged.
func FuzzJSONApply(f *testing.F) {
	for _, s := range []string{
		`{"a":"}]\"{[","b":[{"c":"x\\"},{"c":{"d":[1,{"e":"]"}]}}],"c":1}`,
		`{"a" : 1 , "b" : [ { "c" : true } , null ] }`,
		`[{"a":1},{"b":[{"c":2}]}]`,
		`{"\u0061":1,"b":[]}`,
		`"a"`, `12`, `{}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	drop, _ := ParsePath("$.a")
	mask, _ := ParsePath("$.b[*].c")
	j := &JSON{Drop: []Path{drop}, Mask: []Path{mask}}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, a, err := j.Apply(in)
		if !json.Valid(in) {
			if !errors.Is(err, ErrNotJSON) {
				t.Fatalf("invalid input: %v", err)
			}
			return
		}
		if err != nil || !json.Valid(out) {
			t.Fatalf("Apply(%s) = %s, %v", in, out, err)
		}
		if !a.Changed() && string(out) != string(in) {
			t.Fatalf("no hit, yet %s became %s", in, out)
		}
		var v any
		_ = json.Unmarshal(out, &v)
		if m, ok := v.(map[string]any); ok {
			if _, has := m["a"]; has {
				t.Fatalf("$.a survived: %s", out)
			}
		}
	})
}

// The unescaped key "a" is matched as written in any spelling.
func TestJSONApplyEscapedKey(t *testing.T) {
	j := &JSON{Drop: paths(t, "$.a")}
	out, _, err := j.Apply([]byte(`{"\u0061":1,"b":"}"}`))
	if err != nil || string(out) != `{"b":"}"}` {
		t.Errorf("got %s, %v", out, err)
	}
}

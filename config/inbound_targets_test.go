package config

import (
	"strings"
	"testing"
)

func TestInboundTargets(t *testing.T) {
	c := mustParse(t, `
inbound:
  - name: fan
    listen: 127.0.0.1:8081
    to:
      - http://127.0.0.1:3000/
      - url: http://billing.internal:8080/hooks
        name: billing
        filter: {json: type, matches: "^invoice\\.", path: "/webhooks/*"}
        rewrite: {json: {drop: ["$.customer.email"]}, headers: {set: {X-Team: billing}}}
      - url: http://audit.internal:9000
        filter: {header: X-GitHub-Event, equals: push}
  - listen: 127.0.0.1:8082
    to: http://127.0.0.1:3001
`)
	r := c.Inbound[0]
	if len(r.Targets) != 3 || r.To != "http://127.0.0.1:3000" || r.Host != "127.0.0.1:3000" {
		t.Fatalf("route 0: %+v", r)
	}
	t0, t1, t2 := r.Targets[0], r.Targets[1], r.Targets[2]
	if t0.Name != "to[0]" || t0.Filter != nil || t0.Filter.String() != "every webhook" {
		t.Errorf("target 0: %+v", t0)
	}
	if t1.Name != "billing" || t1.URL != "http://billing.internal:8080/hooks" || t1.Host != "billing.internal:8080" ||
		t1.Filter.String() != "json type ~ /^invoice\\./ and path /webhooks/*" || t1.Rewrite.JSON == nil || t1.Rewrite.Headers == nil || t1.Line != 7 {
		t.Errorf("target 1: %+v, filter %s", t1, t1.Filter)
	}
	if t2.Name != "to[2]" || t2.Filter.String() != `header X-GitHub-Event = "push"` {
		t.Errorf("target 2: %+v, filter %s", t2, t2.Filter)
	}
	if r := c.Inbound[1]; len(r.Targets) != 1 || r.Targets[0].Name != "" || r.Targets[0].URL != r.To {
		t.Errorf("a route with one to: %+v", r.Targets)
	}
}

func TestInboundTargetErrors(t *testing.T) {
	const head = "inbound:\n  - listen: ':8081'\n    to:\n"
	for _, tc := range []struct{ yaml, want string }{
		{"inbound:\n  - {listen: ':8081', to: []}", "config.yaml:2: inbound[0].to: must not be empty"},
		{"inbound:\n  - {listen: ':8081', to: {url: 'http://a:1'}}", "config.yaml:2: inbound[0].to: want a URL or a list of targets"},
		{head + "      - http://a:1\n      - ftp://b", "config.yaml:5: inbound[0].to[1]: want an absolute http:// or https:// URL"},
		{head + "      - name: b", "config.yaml:4: inbound[0].to[0].url: required"},
		{head + "      - {url: 'http://a:1', colour: red}", `unknown field "colour" in inbound[0].to[0]`},
		{head + "      - {url: 'http://a:1', name: x}\n      - {url: 'http://b:1', name: x}", `config.yaml:5: inbound[0].to[1].name: target name "x" is used twice`},
		{head + "      - {url: 'http://a:1', filter: {}}", "config.yaml:4: inbound[0].to[0].filter: needs a condition"},
		{head + "      - {url: 'http://a:1', filter: {json: type}}", "inbound[0].to[0].filter: json or header takes one of equals or matches"},
		{head + "      - {url: 'http://a:1', filter: {json: a, header: b, equals: c}}", "inbound[0].to[0].filter: one of json or header"},
		{head + "      - {url: 'http://a:1', filter: {equals: c}}", "inbound[0].to[0].filter: equals and matches test a json field or a header"},
		{head + "      - {url: 'http://a:1', filter: {json: a, matches: '('}}", "config.yaml:4: inbound[0].to[0].filter.matches: not a regular expression"},
		{head + "      - {url: 'http://a:1', filter: {path: webhooks}}", "inbound[0].to[0].filter.path: want a path starting with /"},
		{head + "      - {url: 'http://a:1', rewrite: {json: {drop: [nope]}}}", "inbound[0].to[0].rewrite.json.drop[0]"},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s\n got %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
}

// TestInboundTargetsRestart: the same targets read twice need no
// restart; a changed filter does.
func TestInboundTargetsRestart(t *testing.T) {
	const y = `
inbound:
  - listen: ':8081'
    to:
      - http://a:1
      - {url: 'http://b:1', filter: {json: type, matches: '^invoice\.', path: /h/*}, rewrite: {json: {drop: [$.x]}, headers: {set: {X-A: b}}}}
`
	a, b := mustParse(t, y), mustParse(t, y)
	if got := RestartRequired(a, b); len(got) != 0 {
		t.Errorf("same targets: RestartRequired = %v", got)
	}
	if got := RestartRequired(a, mustParse(t, strings.Replace(y, "invoice", "charge", 1))); !strings.Contains(strings.Join(got, ","), "inbound") {
		t.Errorf("another filter: RestartRequired = %v", got)
	}
}

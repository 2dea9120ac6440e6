package server

import (
	"strings"
	"testing"

	"github.com/hookpace/hookpace/config"
)

// A changed file is reloaded only once two polls in a row read
// the same bytes: an editor's or kubectl's write caught half-way is not.
func TestSettle(t *testing.T) {
	var st settle
	last := []byte("hosts: {a.example: {rate: 1/s}}\n")
	for i, step := range []struct {
		read string
		want bool
	}{
		{string(last), false},
		{"", false},              // emptied: wait
		{"hosts: {a.exa", false}, // half-written: another read, wait again
		{"hosts: {a.example: {rate: 2/s}}\n", false},
		{"hosts: {a.example: {rate: 2/s}}\n", true}, // the same twice: reload
		{string(last), false},                       // back as it was: nothing to do
		{"x: 1\n", false},
		{string(last), false},
		{"x: 1\n", false}, // not the same as two polls ago's change: wait
	} {
		if got := st.settled([]byte(step.read), last); got != step.want {
			t.Errorf("poll %d (%q): settled %v, want %v", i, step.read, got, step.want)
		}
	}
}

// A reload may not turn off proxy auth or egress rules without
// naming them, nor take an empty file.
func TestKeepsGuards(t *testing.T) {
	parse := func(s string) *config.Config {
		c, err := config.Parse("c.yaml", []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := parse("auth: {users: [{username: a, password: b}]}\negress: {allow: [10.0.0.0/8], deny: [10.1.0.0/16]}\n")
	for _, tc := range []struct {
		new, want string
	}{
		{"hosts: {}\n", "auth.users: the running config has 1"},
		{"auth: {users: []}\n", "egress.allow"},
		{"auth: {users: []}\negress: {allow: []}\n", "egress.deny"},
		{"auth: {users: []}\negress: {allow: [], deny: []}\n", ""},
		{"auth: {users: [{username: c, password: d}]}\negress: {allow: [10.0.0.0/8], deny: []}\n", ""},
	} {
		err := keepsGuards(old, parse(tc.new))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.new, err, tc.want)
		}
	}
	if err := vetFile([]byte(" \n\t")); err != errEmptyConfig {
		t.Errorf("an empty file: %v", err)
	}
}

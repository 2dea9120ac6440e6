// Package procenv gives the environment for a child process that must go
// exactly where it is told: this process's environment less the proxy
// variables (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ALL_PROXY, in either case).
// The e2e tests and the bench start hookpace and proxy clients with it.
package procenv

import (
	"os"
	"strings"
)

// WithoutProxy returns os.Environ() less every proxy variable.
func WithoutProxy() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY":
			continue
		}
		env = append(env, kv)
	}
	return env
}

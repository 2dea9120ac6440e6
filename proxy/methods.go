package proxy

import (
	"net/http"
	"slices"
	"sync"
)

// spools reports whether a request with method m is spooled
// (spool.methods); a Policy without Methods spools POST only.
func (pol *Policy) spools(m string) bool {
	if len(pol.Methods) == 0 {
		return m == http.MethodPost
	}
	return slices.Contains(pol.Methods, m)
}

// maxNoticed bounds the hosts remembered for noticePassthrough; past it
// the memory starts again (and a host may be logged once more).
const maxNoticed = 10000

// noticed remembers the hosts whose webhook-like passthrough was logged.
type noticed struct {
	mu    sync.Mutex
	hosts map[string]bool
}

// first reports whether host is new, and remembers it.
func (n *noticed) first(host string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hosts[host] {
		return false
	}
	if n.hosts == nil || len(n.hosts) >= maxNoticed {
		n.hosts = map[string]bool{}
	}
	n.hosts[host] = true
	return true
}

// noticePassthrough logs, once per host, a passthrough of a method that
// can carry a webhook (POST, PUT, PATCH, DELETE) but is not in
// spool.methods: such a webhook went out unspooled and unpaced, and
// nothing else would tell.
func (p *Proxy) noticePassthrough(pol *Policy, method, host string) {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return
	}
	if !p.noticed.first(host) {
		return
	}
	methods := pol.Methods
	if len(methods) == 0 {
		methods = []string{http.MethodPost}
	}
	p.log.Warn("passthrough of a method that is not spooled: not paced, not retried", "method", method, "host", host,
		"spool_methods", methods, "hint", "add "+method+" to spool.methods to spool it (logged once per host)")
}

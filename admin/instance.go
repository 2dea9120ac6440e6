package admin

import (
	"context"
	"net/http"
	"time"
)

// Instance says which hookpace answers: its spool directory, when it
// started, where it listens, and what came through its proxy since.
type Instance struct {
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	SpoolDir  string    `json:"spool_dir"`
	Listen    string    `json:"listen"`
	Admin     string    `json:"admin"`
	Config    string    `json:"config,omitempty"`
	// Ingest counts the proxy's requests since the start by ingest
	// outcome (accepted, passthrough, refused...); outcomes with none are
	// left out.
	Ingest map[string]int64 `json:"ingest"`
	// HTTPS says how CONNECT (https:// through the proxy) is handled.
	HTTPS *HTTPS `json:"https,omitempty"`
}

// HTTPS is the CA that intercepts CONNECT, and which HTTPS destinations
// went around the pacing.
type HTTPS struct {
	CA     string   `json:"ca"`              // "own" (hookpace's), "operator" (mitm.ca_cert) or "none"
	Names  []string `json:"names,omitempty"` // what the CA may vouch for; none: unconstrained
	CACert string   `json:"ca_cert,omitempty"`
	Bundle string   `json:"bundle,omitempty"` // the trust bundle apps point at
	// Uncovered are hosts to be intercepted that the CA cannot vouch for:
	// their tunnels pass through.
	Uncovered []string `json:"uncovered,omitempty"`
	// Notice says what changed about the CA that apps must act on.
	Notice string `json:"notice,omitempty"`
	// Tunnels are what CONNECTs to each host became since the start; those
	// not intercepted come first.
	Tunnels []Tunnel `json:"tunnels"`
	// Open says the CA is hookpace's open-world one: any DNS name but
	// Excluded (and no IP address).
	Open     bool     `json:"open,omitempty"`
	Excluded []string `json:"excluded,omitempty"`
	// Forwarded counts, by host, the requests (not tunnels) forwarded
	// because they were not webhooks: API calls, with the partner's answer.
	Forwarded []Forward `json:"forwarded"`
}

// Forward is the requests to one host forwarded as API calls.
type Forward struct {
	Host  string    `json:"host"`
	Count int64     `json:"count"`
	Last  time.Time `json:"last"`
}

// Tunnel is what the CONNECTs to one host became.
type Tunnel struct {
	Host   string    `json:"host"`
	Mode   string    `json:"mode"` // intercepted, passthrough (NOT paced), refused, or rejected (the client refused hookpace's certificate)
	Count  int64     `json:"count"`
	Last   time.Time `json:"last"`
	Reason string    `json:"reason,omitempty"`
}

// GET /v1/instance
func (a *api) instance(w http.ResponseWriter, r *http.Request) {
	if a.Instance == nil {
		writeError(w, http.StatusNotFound, "no instance information")
		return
	}
	writeJSON(w, http.StatusOK, a.Instance())
}

// Instance reports which hookpace answers.
func (c *Client) Instance(ctx context.Context) (Instance, error) {
	var out Instance
	err := c.do(ctx, http.MethodGet, "/v1/instance", nil, &out)
	return out, err
}

// Base is the admin API's URL the client talks to.
func (c *Client) Base() string { return c.base }

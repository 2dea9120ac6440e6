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

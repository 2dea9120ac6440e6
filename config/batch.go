package config

import (
	"fmt"
	"net/http"
	"time"

	"gopkg.in/yaml.v3"
)

// Batching is a host's `batch` block: webhooks to the same URL
// with JSON bodies are sent together, many to a request, at delivery
// time. The spool keeps one record per webhook.
//
//	batch:
//	  max_events: 50      # 2..500
//	  max_bytes: 1MiB     # of a batch's body, at most 1 MiB
//	  max_wait: 1s        # how long a lone webhook waits for company
//	  format: json-array  # or envelope, or none
//
// A host's batch block replaces the one in defaults as a whole.
type Batching struct {
	MaxEvents int
	MaxBytes  ByteSize
	MaxWait   Duration
	Format    string   // BatchJSONArray or BatchEnvelope
	Headers   []string // envelope: the members' headers each event carries, canonical
}

// Batch formats.
const (
	BatchJSONArray = "json-array" // the bodies, as a JSON array
	BatchEnvelope  = "envelope"   // {"events": [{"id", "received_at", "headers", "body"}]}
	BatchNone      = "none"       // turns batching off for a host when defaults batch
)

// Batch bounds: the rule of thumb of the webhook-delivery literature, at
// most 500 events or 1 MB to a request.
const (
	BatchMaxEvents = 500
	BatchMaxBytes  = ByteSize(1 << 20)
	BatchMaxWait   = Duration(time.Minute)
)

type rawBatch struct {
	MaxEvents opt[int]           `yaml:"max_events"`
	MaxBytes  opt[ByteSize]      `yaml:"max_bytes"`
	MaxWait   opt[Duration]      `yaml:"max_wait"`
	Format    opt[string]        `yaml:"format"`
	Headers   opt[[]opt[string]] `yaml:"headers"`
}

var batchFields = map[string]bool{"max_events": true, "max_bytes": true, "max_wait": true, "format": true, "headers": true}

// resolveBatch resolves the batch block at n (path is e.g.
// "hosts.a.example.batch"). It returns base when n is absent, nil for
// `format: none`, and base after recording problems when the block is
// invalid.
func resolveBatch(p *problems, path string, n *yaml.Node, base *Batching) *Batching {
	before := len(p.errs)
	var r rawBatch
	if n = deref(n); !decodeBlock(p, path, n, batchFields, "max_events, max_bytes, max_wait, format, headers", &r) {
		return base
	}
	f := func(name string) string { return path + "." + name }
	b := &Batching{MaxBytes: BatchMaxBytes, MaxWait: Duration(time.Second), Format: BatchJSONArray}
	if field(p, f("format"), r.Format, &b.Format, oneOf(BatchJSONArray, BatchEnvelope, BatchNone)) && b.Format == BatchNone {
		return nil
	}
	if !r.MaxEvents.Set && r.MaxEvents.Err == nil {
		p.add(n.Line, f("max_events"), "required: how many webhooks one request may carry, 2 to %d", BatchMaxEvents)
	}
	field(p, f("max_events"), r.MaxEvents, &b.MaxEvents, intWithin(2, BatchMaxEvents))
	field(p, f("max_bytes"), r.MaxBytes, &b.MaxBytes, sizeWithin(1<<10, BatchMaxBytes))
	field(p, f("max_wait"), r.MaxWait, &b.MaxWait, durationWithin(0, time.Duration(BatchMaxWait)))
	list(p, f("headers"), r.Headers, &b.Headers, checkEnvelopeHeader, false)
	for i, h := range b.Headers {
		b.Headers[i] = http.CanonicalHeaderKey(h)
	}
	if len(b.Headers) > 0 && b.Format != BatchEnvelope {
		p.add(r.Headers.Line, f("headers"), "only for format envelope (json-array carries the bodies alone)")
	}
	if len(p.errs) > before {
		return base
	}
	return b
}

func checkEnvelopeHeader(s string) error {
	if s == "" {
		return fmt.Errorf("must not be empty")
	}
	return checkHeaderName(s)
}

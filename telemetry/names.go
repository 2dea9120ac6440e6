package telemetry

// Metric names, exactly as they appear on /metrics. They are also the OTel
// instrument names: the Prometheus exporter keeps a name unchanged when it
// already ends in the suffix it would add ("_total" for counters, "_seconds"
// for unit "s", "_bytes" for unit "By"), and units written in braces such as
// "{request}" add no suffix. TestPrometheusSeriesNames scrapes Handler() to
// hold the exporter to that.
const (
	MetricIngestRequests  = "hookpace_ingest_requests_total"    // counter {outcome}
	MetricDeliveries      = "hookpace_deliveries_total"         // counter {host,outcome}
	MetricBatchWebhooks   = "hookpace_batch_webhooks_total"     // counter {host,outcome}
	MetricDeliveryLatency = "hookpace_delivery_latency_seconds" // histogram {host}
	MetricSpoolMessages   = "hookpace_spool_messages"           // gauge {} total, {host} per host
	MetricSpoolBytes      = "hookpace_spool_bytes"              // gauge {} total, {host} per host
	MetricHostHeld        = "hookpace_host_held"                // gauge {host} 1 while held, else 0
	MetricHostRate        = "hookpace_host_rate"                // gauge {host} requests per second
	MetricHostInFlight    = "hookpace_host_in_flight"           // gauge {host}
	MetricHostConcurrency = "hookpace_host_concurrency_limit"   // gauge {host}: the bound on in flight (concurrency: auto: the adaptive limit)
	MetricHosts           = "hookpace_hosts"                    // gauge {}: hosts held in memory

	// Fleet mode (fleet.redis set).
	MetricFleetRoundTrips = "hookpace_fleet_round_trips_total"  // counter {op,result}
	MetricFleetLatency    = "hookpace_fleet_round_trip_seconds" // histogram {op}
	MetricFleetFallbacks  = "hookpace_fleet_fallbacks_total"    // counter {}

	// The HTTP client histograms of OpenTelemetry's semantic conventions,
	// recorded by WrapTransport for every delivery attempt.
	MetricHTTPClientDuration = "http_client_request_duration_seconds" // histogram {http_request_method,http_response_status_code|error_type,url_scheme,network_protocol_*}
	MetricHTTPClientBodySize = "http_client_request_body_size_bytes"  // histogram, same labels
)

// Label keys.
const (
	LabelHost    = "host"
	LabelOutcome = "outcome"
)

// OtherHost is the host label value shared by every host beyond the
// MaxHostLabels cap (and by an empty host name).
const OtherHost = "other"

// latencyBuckets (seconds) cover 1ms..1h: a webhook is usually delivered in
// milliseconds, but one that waited out a 429 holding pattern or an outage
// can take minutes to an hour. Each bucket is a line per host label on
// /metrics: fine steps where deliveries are, coarse ones beyond a second.
var latencyBuckets = []float64{
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
	1, 5, 30, 120, 600, 3600,
}

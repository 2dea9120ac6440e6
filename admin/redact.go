package admin

import (
	"net/http"

	"github.com/hookpace/hookpace/spool"
)

// Redacted stands in for a hidden value.
const Redacted = spool.Redacted

// RedactURL hides what a webhook URL may carry as a secret: the value of
// every query parameter (names stay, so "?token=REDACTED" still says what
// was there), a userinfo password, a fragment and the path after the
// prefix of an incoming-webhook URL (spool.RedactURL, the one rule the
// journal applies too).
func RedactURL(s string) string { return spool.RedactURL(s) }

// RedactHeader returns h with every value hidden but those of the
// allow-list (spool.RedactHeader).
func RedactHeader(h http.Header) http.Header { return spool.RedactHeader(h) }

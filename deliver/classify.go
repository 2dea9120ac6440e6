package deliver

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/pacer"
)

// verdict is what happens to a message after an attempt. It is the
// attempt's telemetry outcome, so that the metric, the log line and the
// span all name it alike.
type verdict = Outcome

const (
	vDone  = OutcomeDelivered // delivered: delete it
	vHold  = OutcomeHeld      // 429: hold the host, the message goes first afterwards
	vRetry = OutcomeRetried   // transient failure: retry after a backoff
	vDead  = OutcomeDead      // permanent failure: dead letters
	vSplit = OutcomeSplit     // a batch too large: its halves go again at once (batchsplit.go)
)

// Refusal is implemented by errors for destinations that egress policy
// forbids; such a message goes to the dead letters with the reason.
type Refusal interface {
	error
	Refused() string
}

// classify maps an attempt's answer to what happens to the message and what
// the pacer learns. retry4xx lists the 4xx statuses retried like 5xx.
func classify(status int, err error, retry4xx []int) (v verdict, o pacer.Outcome, reason string) {
	if err != nil {
		var un unsendable
		if errors.As(err, &un) {
			// The webhook's own failure: dead at once, and the host
			// learns nothing from it (no breaker, no auto-pause).
			return vDead, pacer.NoSend, un.Error()
		}
		var ref Refusal
		if errors.As(err, &ref) {
			return vDead, pacer.NoSend, "egress refused: " + ref.Refused()
		}
		var ae authError
		if errors.As(err, &ae) {
			// No credentials (the token endpoint failed): hold the host,
			// without spending the message's attempts, as for DNS.
			return vHold, pacer.AuthFailed, ae.Error()
		}
		var dns *net.DNSError
		if errors.As(err, &dns) && dns.IsNotFound {
			// No such host: hold the host (pacer/dns.go), as DNS can fail
			// for a while, without spending the message's attempts.
			return vHold, pacer.Unresolved, errorClass(err)
		}
		return vRetry, pacer.Failure, errorClass(err)
	}
	switch {
	case status >= 200 && status < 300:
		return vDone, pacer.Success, ""
	case status == http.StatusTooManyRequests:
		return vHold, pacer.Throttled, "429 Too Many Requests"
	case status >= 300 && status < 400:
		return vDead, pacer.Answered, fmt.Sprintf("redirect %d not followed", status)
	case status >= 400 && status < 500:
		if slices.Contains(retry4xx, status) {
			return vRetry, pacer.Answered, fmt.Sprintf("status %d", status)
		}
		return vDead, pacer.Answered, fmt.Sprintf("permanent status %d", status)
	default:
		return vRetry, pacer.Failure, fmt.Sprintf("status %d", status)
	}
}

// errorClass names a transport error briefly and stably, so that repeated
// failures share one log throttle key: its class (egress.ErrorClass, the
// attempt's error_type), then the innermost error's words.
func errorClass(err error) string {
	class := egress.ErrorClass(err)
	var dns *net.DNSError
	switch {
	case class == egress.ErrTimeout:
		return class
	case errors.As(err, &dns):
		return class + ": " + dns.Err
	default:
		return class + ": " + innermost(err).Error()
	}
}

func innermost(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// ParseRetryAfter reads a Retry-After value, as delay-seconds or an
// HTTP-date (RFC 9110 §10.2.3). It reports false for a missing, negative
// or malformed value, or a date further past than dateSlack: the caller
// then uses its default. A date at most dateSlack past is now (0, true).
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return time.Duration(1<<63 - 1), true // absurd: the caller caps it
			}
			return 0, false
		}
		if n > uint64((1<<63-1)/time.Second) {
			return time.Duration(1<<63 - 1), true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d > 0:
		return d, true
	case d >= -dateSlack:
		return 0, true
	}
	return 0, false
}

// dateSlack is how far past a Retry-After date may be and still mean "now":
// a date says whole seconds, so "at the end of this second" (a fixed
// window's reset) is up to a second past by the time the answer is read,
// and more on a busy machine. A date further past is a clock hookpace
// does not share, whose 429s follow hold_schedule.
const dateSlack = 2 * time.Second

// backoff returns the delay before retry number attempt (1-based) with full
// jitter: uniform in [0, backoffCeil(attempt, initial, maxDelay)], at least
// 10 ms.
func backoff(attempt int, initial, maxDelay time.Duration) time.Duration {
	ceil := backoffCeil(attempt, initial, maxDelay)
	return max(time.Duration(rand.Int64N(int64(ceil)+1)), 10*time.Millisecond)
}

// backoffCeil is min(maxDelay, initial·2^(attempt-1)), computed without
// overflowing however large attempt is.
func backoffCeil(attempt int, initial, maxDelay time.Duration) time.Duration {
	shift := max(attempt-1, 0)
	if initial <= 0 || shift >= 62 || initial > maxDelay>>shift {
		return maxDelay
	}
	return initial << shift
}

// authError is an attempt that did not go: its credentials could not be
// had.
type authError struct{ err error }

func (e authError) Error() string { return e.err.Error() }
func (e authError) Unwrap() error { return e.err }

// unsendable is an attempt that did not go because the stored request
// can't be built (spool.NewRequest): an older record, a header or URL the
// builder refuses. It is the webhook's failure, never the host's.
type unsendable struct{ err error }

func (e unsendable) Error() string { return "cannot be sent as stored: " + e.err.Error() }
func (e unsendable) Unwrap() error { return e.err }

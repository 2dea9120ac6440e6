package deliver

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookpace/hookpace/egress"
	"github.com/hookpace/hookpace/pacer"
)

func TestClassify(t *testing.T) {
	refused := &egress.DeniedError{Host: "moved.example", Addr: netip.MustParseAddr("10.0.0.7"), Reason: "private"}
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	retry4xx := []int{408, 425}
	for _, tc := range []struct {
		name    string
		status  int
		err     error
		verdict verdict
		outcome pacer.Outcome
		reason  string
	}{
		{"200", 200, nil, vDone, pacer.Success, ""},
		{"202", 202, nil, vDone, pacer.Success, ""},
		{"204", 204, nil, vDone, pacer.Success, ""},
		{"299", 299, nil, vDone, pacer.Success, ""},
		{"429 holds", 429, nil, vHold, pacer.Throttled, "429 Too Many Requests"},
		{"301 is not followed: dead", 301, nil, vDead, pacer.Answered, "redirect 301 not followed"},
		{"302 is not followed: dead", 302, nil, vDead, pacer.Answered, "redirect 302 not followed"},
		{"307 is not followed: dead", 307, nil, vDead, pacer.Answered, "redirect 307 not followed"},
		{"308 is not followed: dead", 308, nil, vDead, pacer.Answered, "redirect 308 not followed"},
		{"304", 304, nil, vDead, pacer.Answered, "redirect 304 not followed"},
		{"400", 400, nil, vDead, pacer.Answered, "permanent status 400"},
		{"404", 404, nil, vDead, pacer.Answered, "permanent status 404"},
		{"410", 410, nil, vDead, pacer.Answered, "permanent status 410"},
		{"408 listed: retried", 408, nil, vRetry, pacer.Answered, "status 408"},
		{"425 listed: retried", 425, nil, vRetry, pacer.Answered, "status 425"},
		{"499", 499, nil, vDead, pacer.Answered, "permanent status 499"},
		{"500", 500, nil, vRetry, pacer.Failure, "status 500"},
		{"502", 502, nil, vRetry, pacer.Failure, "status 502"},
		{"503", 503, nil, vRetry, pacer.Failure, "status 503"},
		{"599", 599, nil, vRetry, pacer.Failure, "status 599"},
		{"1xx", 101, nil, vRetry, pacer.Failure, "status 101"},
		{"egress refused", 0, fmt.Errorf("dial: %w", refused), vDead, pacer.NoSend, "egress refused: 10.0.0.7: private"},
		{"timeout", 0, context.DeadlineExceeded, vRetry, pacer.Failure, "timeout"},
		{"wrapped timeout", 0, fmt.Errorf("post: %w", context.DeadlineExceeded), vRetry, pacer.Failure, "timeout"},
		{"dns", 0, &net.DNSError{Err: "no such host", Name: "nx.example", IsNotFound: true}, vHold, pacer.Unresolved, "dns: no such host"},
		{"dns failing", 0, &net.DNSError{Err: "server misbehaving", Name: "nx.example", IsTemporary: true}, vRetry, pacer.Failure, "dns: server misbehaving"},
		{"connect", 0, dialErr, vRetry, pacer.Failure, "connect: connection refused"},
		{"other error", 0, fmt.Errorf("read: %w", errors.New("connection reset by peer")), vRetry, pacer.Failure, "reset: connection reset by peer"},
		{"reset errno", 0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, vRetry, pacer.Failure, "reset: connection reset by peer"},
		{"tls", 0, fmt.Errorf("post: %w", x509.UnknownAuthorityError{}), vRetry, pacer.Failure, "tls: x509: certificate signed by unknown authority"},
		{"eof", 0, fmt.Errorf("post: %w", io.EOF), vRetry, pacer.Failure, "closed: EOF"},
		{"something else", 0, errors.New("odd"), vRetry, pacer.Failure, "error: odd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, o, reason := classify(tc.status, tc.err, retry4xx)
			if v != tc.verdict || o != tc.outcome || reason != tc.reason {
				t.Fatalf("classify(%d, %v) = %v, outcome %d, %q; want %v, outcome %d, %q",
					tc.status, tc.err, v, o, reason, tc.verdict, tc.outcome, tc.reason)
			}
		})
	}
	// Without a retry list every 4xx but 429 is permanent.
	if v, _, _ := classify(408, nil, nil); v != vDead {
		t.Errorf("408 with no retry_4xx: %v, want dead", v)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	huge := time.Duration(1<<63 - 1)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"   ", 0, false},
		{"0", 0, true},
		{"1", time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"86400", 24 * time.Hour, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"10s", 0, false},
		{"soon", 0, false},
		{"9223372036", 9223372036 * time.Second, true},
		{"9223372037", huge, true},              // seconds overflow a Duration: the caller caps it
		{"99999999999999999999999", huge, true}, // overflows uint64 too
		{"Mon, 23 Nov 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Monday, 23-Nov-26 12:01:00 GMT", time.Minute, true}, // RFC 850
		{"Mon Nov 23 12:00:05 2026", 5 * time.Second, true},   // asctime
		{"Mon, 23 Nov 2026 12:00:00 GMT", 0, true},            // now
		{"Mon, 23 Nov 2026 11:59:58 GMT", 0, true},            // the end of a second read late: now
		{"Mon, 23 Nov 2026 11:59:57 GMT", 0, false},           // further past: a clock not shared
		{"Mon, 23 Nov 2026 11:00:00 GMT", 0, false},           // past
		{"Mon, 23 Nov 2026 12:00:30", 0, false},               // no zone
		{"2026-11-23T12:00:30Z", 0, false},                    // not an HTTP-date
	} {
		got, ok := ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBackoffCeiling(t *testing.T) {
	for _, tc := range []struct {
		attempt           int
		initial, maxDelay time.Duration
		want              time.Duration
	}{
		{1, time.Second, time.Minute, time.Second},
		{2, time.Second, time.Minute, 2 * time.Second},
		{3, time.Second, time.Minute, 4 * time.Second},
		{6, time.Second, time.Minute, 32 * time.Second},
		{7, time.Second, time.Minute, time.Minute},
		{8, time.Second, time.Minute, time.Minute},
		{1, 10 * time.Millisecond, 50 * time.Millisecond, 10 * time.Millisecond},
		{4, 10 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond},
		{1, time.Minute, time.Second, time.Second}, // initial above the maximum
		// Far past the point where initial·2^(attempt-1) overflows.
		{35, time.Second, 100 * time.Hour, 100 * time.Hour},
		{38, time.Second, 100 * time.Hour, 100 * time.Hour},
		{39, time.Second, 100 * time.Hour, 100 * time.Hour},
		{64, time.Second, time.Hour, time.Hour},
		{1000, time.Second, time.Hour, time.Hour},
		{0, time.Second, time.Hour, time.Second}, // never asked for; no shift by -1
	} {
		if got := backoffCeil(tc.attempt, tc.initial, tc.maxDelay); got != tc.want {
			t.Errorf("backoffCeil(%d, %v, %v) = %v, want %v", tc.attempt, tc.initial, tc.maxDelay, got, tc.want)
		}
	}
}

// TestBackoffFullJitter checks the bounds of every draw, and that the
// draws spread over the range (full jitter, not a fixed delay).
func TestBackoffFullJitter(t *testing.T) {
	const draws = 2000
	for _, tc := range []struct {
		attempt           int
		initial, maxDelay time.Duration
	}{
		{1, time.Second, time.Minute},
		{4, time.Second, time.Minute},
		{20, time.Second, time.Minute},
		{39, time.Second, 100 * time.Hour},
		{1, time.Millisecond, time.Minute}, // ceiling under the 10 ms floor
	} {
		ceil := backoffCeil(tc.attempt, tc.initial, tc.maxDelay)
		lo, hi := time.Duration(1<<63-1), time.Duration(0)
		for range draws {
			d := backoff(tc.attempt, tc.initial, tc.maxDelay)
			if d < 10*time.Millisecond || d > max(ceil, 10*time.Millisecond) {
				t.Fatalf("backoff(%d, %v, %v) = %v, outside [10ms, %v]", tc.attempt, tc.initial, tc.maxDelay, d, ceil)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if ceil > 10*time.Millisecond && (lo > ceil/4 || hi < ceil*3/4) {
			// Each bound fails with probability (3/4)^2000 for a uniform draw.
			t.Errorf("backoff(%d, %v, %v): %d draws all in [%v, %v], want spread over [0, %v]",
				tc.attempt, tc.initial, tc.maxDelay, draws, lo, hi, ceil)
		}
	}
}

// A redirect is a permanent failure: the dispatcher buries the message
// after one attempt. (Not following it is the delivery client's part:
// server's deliveryClient, checked in e2e.)
func TestRedirectGoesToDeadLetters(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rc := &receiver{handle: func(r *http.Request, n int) (int, http.Header) {
					return status, http.Header{"Location": {"http://elsewhere.example/hook"}}
				}}
				// The delivery client's setting (server's deliveryClient).
				q := newMemQueue()
				startWith(t, q, policy(100, 10, 2), &http.Client{Transport: rc,
					CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }})
				q.add("moved.example", 2)
				synctest.Wait()
				if len(q.dead) != 2 {
					t.Fatalf("%d dead letters, want 2", len(q.dead))
				}
				if n := len(rc.arrivals("")); n != 2 {
					t.Fatalf("%d attempts, want one per message", n)
				}
				want := fmt.Sprintf("redirect %d not followed", status)
				for i, m := range q.dead {
					if q.why[i] != want || m.Attempts != 1 || m.LastStatus != status {
						t.Fatalf("dead letter: reason %q, attempts %d, status %d; want %q, 1, %d", q.why[i], m.Attempts, m.LastStatus, want, status)
					}
				}
			})
		})
	}
}

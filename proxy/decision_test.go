package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/hookpace/hookpace/egress"
)

// The direct path (serveIngest writes answer) and goproxy's (response) give
// the same status, headers and body for every kind of decision.
func TestAnswerIsBuiltOnce(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "http://partner.example/hook", nil)
	ref, _ := refused(&egress.DeniedError{Host: "x", Addr: netip.MustParseAddr("10.0.0.1"), Reason: egress.ReasonPrivate})
	for _, d := range []decision{
		{outcome: outcomeAccepted, status: http.StatusAccepted, id: "0000000000000001"},
		unauthorized(),
		badRequest("request URL has no host"),
		ref,
		tooLarge(10, 5),
	} {
		w := httptest.NewRecorder()
		body := d.answer(w.Header(), "partner.example")
		w.WriteHeader(d.status)
		w.Write(body)

		resp := d.response(r, "partner.example")
		got, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != w.Code || string(got) != w.Body.String() || !reflect.DeepEqual(resp.Header, w.Header()) {
			t.Errorf("%s: goproxy answer %d %v %q, direct %d %v %q", d.outcome, resp.StatusCode, resp.Header, got,
				w.Code, w.Header(), w.Body.String())
		}
		if resp.ContentLength != int64(len(got)) {
			t.Errorf("%s: Content-Length %d, body %d bytes", d.outcome, resp.ContentLength, len(got))
		}
	}
}

// An egress refusal is a 403 naming the guard's reason, wrapped or not;
// any other error is not a refusal.
func TestRefusedMapsOnce(t *testing.T) {
	den := &egress.DeniedError{Host: "metadata", Addr: netip.MustParseAddr("169.254.169.254"), Reason: egress.ReasonCloudMetadata}
	for _, err := range []error{den, fmt.Errorf("dial: %w", den)} {
		d, ok := refused(err)
		if !ok || d.status != http.StatusForbidden || d.outcome != outcomeRefused || d.reason != den.Error() {
			t.Errorf("refused(%v) = %+v, %v; want 403 refused with %q", err, d, ok, den.Error())
		}
	}
	loop := &egress.DeniedError{Host: "localhost", Addr: netip.MustParseAddr("127.0.0.1"), Reason: egress.ReasonLoopback}
	if d, _ := refused(loop); !strings.HasSuffix(d.reason, `add it to egress.allow (egress: {allow: ["127.0.0.0/8"]})`) {
		t.Errorf("a loopback refusal says %q, without how to allow it", d.reason)
	}
	if d, ok := refused(errors.New("connection refused")); ok {
		t.Errorf("a dial error mapped to %+v", d)
	}
}

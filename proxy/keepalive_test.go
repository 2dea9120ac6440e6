package proxy

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Webhooks sent one after another on one connection are each answered
// and stored, the connection kept between them: a body read to its end
// (under the body deadline's wrapper, with or without Expect) leaves
// nothing for the server to discard, and nothing of it is read as the
// next request.
func TestWebhooksShareAConnection(t *testing.T) {
	p, sp := laneProxy(t, HostPolicy{}, nil, nil)
	pol := *p.policy.Load()
	pol.BodyTimeout = time.Minute
	p.SetPolicy(pol)
	srv := httptest.NewServer(p)
	defer srv.Close()
	post := func(body, extra string) string {
		return "POST http://" + laneHost + "/hook HTTP/1.1\r\nHost: " + laneHost + "\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n" + extra + "\r\n" + body
	}
	bodies := []string{`{"n":1}`, `{"n":2,"expect":true}`, strings.Repeat("x", 3000), `{"n":4}`}
	raw := post(bodies[0], "") + post(bodies[1], "Expect: 100-continue\r\n") + post(bodies[2], "") +
		post(bodies[3], "Connection: close\r\n")
	var got []int
	for _, st := range statuses(t, srv.Listener.Addr().String(), raw) {
		if st >= 200 { // not the 100 Continue
			got = append(got, st)
		}
	}
	if want := []int{202, 202, 202, 202}; !equalInts(got, want) {
		t.Fatalf("answers %v on one connection, want %v", got, want)
	}
	ms := queued(t, sp)
	if len(ms) != len(bodies) {
		t.Fatalf("stored %d, want %d", len(ms), len(bodies))
	}
	for i, m := range ms {
		if string(m.Body) != bodies[i] {
			t.Errorf("webhook %d stored %.40q, want %.40q", i, m.Body, bodies[i])
		}
	}
}

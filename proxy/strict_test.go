package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// judgeServer serves raw requests with the judge in front, on a real
// loopback listener with the taps the doors have: 200 and "ok" for what
// the judge lets through, its refusal otherwise.
func judgeServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ConnContext: TapContext, ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if why := judgeRequest(r); why != "" {
				refuseFraming(w, why)
				return
			}
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "ok")
		})}
	go srv.Serve(TapListener(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// statuses writes raw on one connection and reads every answer until the
// server closes it.
func statuses(t *testing.T, addr, raw string) []int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var got []int
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return got
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got = append(got, resp.StatusCode)
	}
}

func TestJudgeRequest(t *testing.T) {
	addr := judgeServer(t)
	post := func(target, proto, extra, body string) string {
		return "POST " + target + " " + proto + "\r\nHost: partner.example\r\n" + extra + "\r\n" + body
	}
	for _, tc := range []struct {
		name string
		raw  string
		want []int // the answers before the server closes
	}{
		{"plain", post("http://partner.example/hook", "HTTP/1.1", "Content-Length: 2\r\nConnection: close\r\n", "{}"), []int{200}},
		{"two on one connection", post("/a", "HTTP/1.1", "Content-Length: 2\r\n", "{}") + post("/b", "HTTP/1.1", "Content-Length: 2\r\nConnection: close\r\n", "{}"), []int{200, 200}},
		{"HTTP/1.0 with Content-Length", post("/hook", "HTTP/1.0", "Content-Length: 2\r\n", "{}"), []int{200}},
		{"HTTP/1.0 chunked", post("/hook", "HTTP/1.0", "Transfer-Encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n"), []int{400}},
		{"HTTP/1.0 chunked, lower case", post("/hook", "HTTP/1.0", "transfer-encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n"), []int{400}},
		{"HTTP/1.0 chunked beside Content-Length", post("/hook", "HTTP/1.0", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n"), []int{400}},
		{"HTTP/1.0 chunked, bare LF", "POST /hook HTTP/1.0\nHost: p\nTransfer-Encoding: chunked\n\n2\r\n{}\r\n0\r\n\r\n", []int{400}},
		{"HTTP/1.0 keep-alive then chunked", post("/a", "HTTP/1.0", "Content-Length: 2\r\nConnection: keep-alive\r\n", "{}") +
			post("/b", "HTTP/1.0", "Transfer-Encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n"), []int{200, 400}},
		{"HTTP/1.1 then HTTP/1.0", post("/a", "HTTP/1.1", "Content-Length: 2\r\n", "{}") +
			post("/b", "HTTP/1.0", "Content-Length: 2\r\n", "{}"), []int{200, 400}},
		{"Transfer_Encoding", post("/hook", "HTTP/1.1", "Content-Length: 2\r\nTransfer_Encoding: chunked\r\n", "{}"), []int{400}},
		{"Content_Length", post("/hook", "HTTP/1.1", "Content-Length: 2\r\nContent_Length: 1000\r\n", "{}"), []int{400}},
		{"Transfer---Encoding", post("/hook", "HTTP/1.1", "Content-Length: 2\r\nTransfer---Encoding: chunked\r\n", "{}"), []int{400}},
		{"fragment with a bad escape", post("http://partner/hook?a=1#%^", "HTTP/1.1", "Content-Length: 2\r\n", "{}"), []int{400}},
		{"fragment", post("/hook#frag", "HTTP/1.1", "Content-Length: 2\r\n", "{}"), []int{400}},
		{"bad escape in the query", post("/hook?a=%zz", "HTTP/1.1", "Content-Length: 2\r\n", "{}"), []int{400}},
		{"escape cut short", post("/hook?a=%4", "HTTP/1.1", "Content-Length: 2\r\n", "{}"), []int{400}},
		{"origin form //", post("//webhooks/stripe", "HTTP/1.1", "Content-Length: 2\r\n", "{}"), []int{400}},
		{"origin form ///", post("///webhooks/stripe", "HTTP/1.1", "Content-Length: 2\r\nConnection: close\r\n", "{}"), []int{200}},
		{"good escapes", post("/h%41?q=%7e", "HTTP/1.1", "Content-Length: 2\r\nConnection: close\r\n", "{}"), []int{200}},
	} {
		if got := statuses(t, addr, tc.raw); !equalInts(got, tc.want) {
			t.Errorf("%s: answers %v, want %v", tc.name, got, tc.want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// What judgeTarget lets through reads alike to both of Go's parsers:
// url.ParseRequestURI (the server's) and url.Parse (delivery's).
func FuzzJudgeTarget(f *testing.F) {
	for _, raw := range []string{"/", "/a/b?c=d", "//a/b", "///a", "/a//b", "http://h/p?q", "http://h:8080//x", "https://h/%2F",
		"/a?b#c", "/a#", "/%zz", "/a?%", "http://h/?a=1#%^", "/a;b", "/a/../b", "http://[::1]:80/x", "/a?b=c%20d", "/x?/y//z",
		"h/p", "*", "http:/x", "//", "/./", "/?#", "/%", "/%0", "/%00", "//h:80/p", "http://h//a", "/\\x"} {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, errA := url.ParseRequestURI(raw)
		if errA != nil || raw == "*" || judgeTarget(raw) != "" {
			return // net/http answers 400 itself, or the judge does
		}
		b, errB := url.Parse(raw)
		if errB != nil || a.String() != b.String() || a.Host != b.Host || a.Path != b.Path || b.Fragment != "" || strings.Contains(raw, "#") {
			t.Errorf("%q passes the judge but parses as %+v and %+v (%v)", raw, a, b, errB)
		}
	})
}

// A server that does not keep raw header blocks can't tell whether an
// HTTP/1.0 request had Transfer-Encoding: it refuses them all.
func TestJudgeHTTP10WithoutTap(t *testing.T) {
	r, _ := http.NewRequest("POST", "http://partner.example/hook", nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.0", 1, 0
	r.RequestURI = "http://partner.example/hook"
	if why := judgeRequest(r); !strings.Contains(why, "HTTP/1.0") {
		t.Fatalf("HTTP/1.0 without a tap: %q, want a refusal", why)
	}
	r.Proto, r.ProtoMinor = "HTTP/1.1", 1
	if why := judgeRequest(r); why != "" {
		t.Fatalf("HTTP/1.1 without a tap: refused: %s", why)
	}
}

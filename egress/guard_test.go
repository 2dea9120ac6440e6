package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeResolver answers from a table. answers[name][i] is the answer to the
// i-th lookup of name; the last answer repeats.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	calls   map[string]int
}

var errNoSuchHost = errors.New("no such host")

func resolver(answers map[string][][]string) *fakeResolver {
	return &fakeResolver{answers: answers, calls: map[string]int{}}
}

// static returns a resolver that gives each name the same answer every time.
func static(m map[string][]string) *fakeResolver {
	answers := map[string][][]string{}
	for name, addrs := range m {
		answers[name] = [][]string{addrs}
	}
	return resolver(answers)
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := normalizeName(host)
	seq, ok := r.answers[key]
	if !ok {
		return nil, &net.DNSError{Err: errNoSuchHost.Error(), Name: host, IsNotFound: true, UnwrapErr: errNoSuchHost}
	}
	n := min(r.calls[key], len(seq)-1)
	r.calls[key]++
	var out []netip.Addr
	for _, s := range seq[n] {
		out = append(out, netip.MustParseAddr(s))
	}
	return out, nil
}

func mustNew(t *testing.T, opts Options) *Guard {
	t.Helper()
	g, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestCheck(t *testing.T) {
	dns := map[string][]string{
		"evil.example":           {"127.0.0.1"},
		"localhost":              {"127.0.0.1", "::1"},
		"mixed.example":          {"203.0.113.10", "127.0.0.1", "203.0.113.11"},
		"public.example":         {"203.0.113.10"},
		"hooks.internal.example": {"10.0.0.5"},
		"other.internal.example": {"10.0.0.6"},
		"a.b.corp.example":       {"10.1.0.1"},
		"corp.example":           {"10.1.0.2"},
		"x.bad.example":          {"203.0.113.20"},
		"bad.example":            {"203.0.113.21"},
		"meta.corp.example":      {"169.254.169.254"},
		"nat64.example":          {"64:ff9b::a01:203"},
		"empty.example":          {},
	}
	tests := []struct {
		name   string
		allow  []string
		deny   []string
		host   string
		want   []string // permitted addresses
		reason string   // else the DeniedError reason
	}{
		{name: "public", host: "public.example", want: []string{"203.0.113.10"}},
		{name: "name to loopback", host: "evil.example", reason: ReasonLoopback},
		{name: "localhost", host: "localhost", reason: ReasonLoopback},
		{name: "literal v4", host: "127.0.0.1", reason: ReasonLoopback},
		{name: "literal v6 bracketed", host: "[::1]", reason: ReasonLoopback},
		{name: "literal metadata", host: "169.254.169.254", reason: ReasonCloudMetadata},
		{name: "literal public", host: "8.8.8.8", want: []string{"8.8.8.8"}},
		{name: "mixed keeps public in order", host: "mixed.example", want: []string{"203.0.113.10", "203.0.113.11"}},
		{name: "allow cidr", allow: []string{"127.0.0.0/8"}, host: "evil.example", want: []string{"127.0.0.1"}},
		{name: "allow mapped cidr", allow: []string{"::ffff:127.0.0.0/104"}, host: "evil.example", want: []string{"127.0.0.1"}},
		{name: "allow single ip", allow: []string{"::1"}, host: "localhost", want: []string{"::1"}},
		{name: "deny beats allow", allow: []string{"127.0.0.0/8"}, deny: []string{"127.0.0.1/32"}, host: "evil.example", reason: ReasonDenied},
		{name: "deny host beats allow cidr", allow: []string{"127.0.0.0/8"}, deny: []string{"evil.example"}, host: "EVIL.example.", reason: ReasonDenied},
		{name: "deny public cidr", deny: []string{"203.0.113.0/24"}, host: "public.example", reason: ReasonDenied},
		{name: "deny embedded v4", allow: []string{"64:ff9b::/96"}, deny: []string{"10.0.0.0/8"}, host: "nat64.example", reason: ReasonDenied},
		{name: "nat64 private refused by default", host: "nat64.example", reason: ReasonPrivate},
		{name: "deny wildcard", deny: []string{"*.bad.example"}, host: "X.Bad.Example", reason: ReasonDenied},
		{name: "deny wildcard skips apex", deny: []string{"*.bad.example"}, host: "bad.example", want: []string{"203.0.113.21"}},
		{name: "deny exact skips subdomain", deny: []string{"bad.example"}, host: "x.bad.example", want: []string{"203.0.113.20"}},
		{name: "allow host", allow: []string{"hooks.internal.example"}, host: "Hooks.Internal.Example", want: []string{"10.0.0.5"}},
		{name: "allow host is exact", allow: []string{"hooks.internal.example"}, host: "other.internal.example", reason: ReasonPrivate},
		{name: "allow wildcard", allow: []string{"*.corp.example"}, host: "a.b.corp.example", want: []string{"10.1.0.1"}},
		{name: "allow wildcard skips apex", allow: []string{"*.corp.example"}, host: "corp.example", reason: ReasonPrivate},
		{name: "allow host never opens metadata", allow: []string{"*.corp.example"}, host: "meta.corp.example", reason: ReasonCloudMetadata},
		{name: "allow cidr opens metadata", allow: []string{"169.254.169.254/32"}, host: "meta.corp.example", want: []string{"169.254.169.254"}},
		{name: "host rules ignore literals", allow: []string{"evil.example"}, host: "127.0.0.1", reason: ReasonLoopback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustNew(t, Options{Allow: tt.allow, Deny: tt.deny, Resolver: static(dns)})
			got, err := g.Check(context.Background(), tt.host)
			if tt.reason != "" {
				var d *DeniedError
				if !errors.As(err, &d) {
					t.Fatalf("Check(%q) = %v, %v; want DeniedError %q", tt.host, got, err, tt.reason)
				}
				if d.Reason != tt.reason {
					t.Fatalf("Check(%q) reason = %q, want %q (%v)", tt.host, d.Reason, tt.reason, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check(%q): %v", tt.host, err)
			}
			if want := addrs(tt.want...); !reflect.DeepEqual(got, want) {
				t.Fatalf("Check(%q) = %v, want %v", tt.host, got, want)
			}
		})
	}
}

func TestCheckErrors(t *testing.T) {
	g := mustNew(t, Options{Resolver: static(map[string][]string{
		"evil.example":  {"127.0.0.1"},
		"empty.example": {},
	})})
	ctx := context.Background()

	_, err := g.Check(ctx, "evil.example")
	if want := "egress to 127.0.0.1 (evil.example) refused: loopback"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	_, err = g.Check(ctx, "127.0.0.1")
	if want := "egress to 127.0.0.1 refused: loopback"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	_, err = g.Check(ctx, "nx.example")
	if err == nil || IsDenied(err) || !errors.Is(err, errNoSuchHost) {
		t.Errorf("DNS failure: got %v, want wrapped resolver error that is not DeniedError", err)
	}
	// .invalid never resolves (RFC 6761), even where the resolver would
	// answer it: NXDOMAIN at once, not a refusal.
	inv := mustNew(t, Options{Resolver: static(map[string][]string{"no-such-host.invalid": {"93.184.215.14"}})})
	for _, host := range []string{"no-such-host.invalid", "NO-SUCH-HOST.INVALID.", "invalid"} {
		var dns *net.DNSError
		if _, err := inv.Check(ctx, host); !errors.As(err, &dns) || !dns.IsNotFound || IsDenied(err) {
			t.Errorf("Check(%q) = %v, want a not-found *net.DNSError", host, err)
		}
	}
	for _, host := range []string{"empty.example", "", "evil.example:80"} {
		if _, err := g.Check(ctx, host); err == nil || IsDenied(err) {
			t.Errorf("Check(%q) = %v, want a non-denied error", host, err)
		}
	}
}

func TestNewRejectsBadEntries(t *testing.T) {
	tests := []struct {
		opts Options
		bad  string
	}{
		{Options{Allow: []string{"10.0.0.0/33"}}, "10.0.0.0/33"},
		{Options{Allow: []string{"ok.example", "bad host"}}, "bad host"},
		{Options{Deny: []string{"foo.*.example"}}, "foo.*.example"},
		{Options{Deny: []string{"*"}}, `"*"`},
		{Options{Deny: []string{"10.0.0.300"}}, "10.0.0.300"},
		{Options{Deny: []string{"a..example"}}, "a..example"},
		{Options{Allow: []string{"fe80::1%eth0"}}, "fe80::1%eth0"},
		{Options{Self: []string{"127.0.0.1"}}, `"127.0.0.1"`},
		{Options{Self: []string{"127.0.0.1:0"}}, "127.0.0.1:0"},
		{Options{Self: []string{"example.com:80"}}, "example.com:80"},
	}
	for _, tt := range tests {
		_, err := New(tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.bad) {
			t.Errorf("New(%+v) error = %v, want one naming %s", tt.opts, err, tt.bad)
		}
	}
	if _, err := New(Options{
		Allow: []string{"127.0.0.0/8", "::1", "hooks.internal.example", "*.corp.example", "_svc.Example.COM."},
		Self:  []string{"127.0.0.1:8080", "[::]:9090", ":9091", "localhost:9092"},
	}); err != nil {
		t.Errorf("New with valid entries: %v", err)
	}
}

func listen(t *testing.T) (net.Listener, uint16) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, uint16(ln.Addr().(*net.TCPAddr).Port)
}

func TestDialContextConnects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	url := "http://hooks.test:" + strconv.Itoa(port) + "/"
	dns := static(map[string][]string{"hooks.test": {"127.0.0.1"}})

	get := func(g *Guard) (string, error) {
		tr := &http.Transport{DialContext: g.DialContext}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	if _, err := get(mustNew(t, Options{Resolver: dns})); !IsDenied(err) {
		t.Fatalf("without Allow: err = %v, want DeniedError", err)
	}
	body, err := get(mustNew(t, Options{Allow: []string{"127.0.0.0/8"}, Resolver: dns}))
	if err != nil || body != "hello" {
		t.Fatalf("with Allow: body %q, err %v", body, err)
	}
}

// recordDial replaces the Guard's dialler so tests see what would be dialled
// without touching the network. Addresses in ok get a pipe; others fail.
func recordDial(g *Guard, ok ...string) *[]string {
	var dialled []string
	g.dial = func(_ context.Context, network, address string) (net.Conn, error) {
		dialled = append(dialled, address)
		for _, a := range ok {
			if a == address {
				c1, c2 := net.Pipe()
				c2.Close()
				return c1, nil
			}
		}
		return nil, errors.New("connection refused")
	}
	return &dialled
}

func TestDialContextRebinding(t *testing.T) {
	ctx := context.Background()

	// The name answers public first and loopback on every later lookup:
	// the Guard must resolve once and dial the address it checked.
	r := resolver(map[string][][]string{"rebind.example": {{"203.0.113.10"}, {"127.0.0.1"}}})
	g := mustNew(t, Options{Resolver: r})
	dialled := recordDial(g, "203.0.113.10:80")
	c, err := g.DialContext(ctx, "tcp", "rebind.example:80")
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	c.Close()
	if want := []string{"203.0.113.10:80"}; !reflect.DeepEqual(*dialled, want) {
		t.Errorf("dialled %v, want %v", *dialled, want)
	}
	if n := r.calls["rebind.example"]; n != 1 {
		t.Errorf("resolver called %d times, want 1", n)
	}

	// One answer with public and loopback addresses: only public ones are
	// tried, in order, even when they all fail.
	g = mustNew(t, Options{Resolver: static(map[string][]string{
		"mixed.example": {"203.0.113.10", "127.0.0.1", "::1", "203.0.113.11"},
	})})
	dialled = recordDial(g)
	_, err = g.DialContext(ctx, "tcp", "mixed.example:443")
	if err == nil || IsDenied(err) || strings.Contains(err.Error(), "\n") || strings.Count(err.Error(), "connection refused") != 2 {
		t.Fatalf("DialContext = %q, want both dial errors on one line", err)
	}
	if want := []string{"203.0.113.10:443", "203.0.113.11:443"}; !reflect.DeepEqual(*dialled, want) {
		t.Errorf("dialled %v, want %v", *dialled, want)
	}

	// The second permitted address is used when the first fails.
	dialled = recordDial(g, "203.0.113.11:443")
	c, err = g.DialContext(ctx, "tcp", "mixed.example:443")
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	c.Close()
	if len(*dialled) != 2 {
		t.Errorf("dialled %v, want two attempts", *dialled)
	}
}

func TestDialContextSelf(t *testing.T) {
	ctx := context.Background()
	_, selfPort := listen(t)
	_, otherPort := listen(t)
	self := "127.0.0.1:" + strconv.Itoa(int(selfPort))

	g := mustNew(t, Options{Allow: []string{"127.0.0.0/8", "::1/128"}, Self: []string{self}})
	if _, err := g.DialContext(ctx, "tcp", self); !IsDenied(err) || !strings.HasSuffix(err.Error(), ReasonSelf) {
		t.Fatalf("dial self %s: err = %v, want refused: self", self, err)
	}
	// Check has no port, so Self does not apply there.
	if _, err := g.Check(ctx, "127.0.0.1"); err != nil {
		t.Errorf("Check(127.0.0.1) with Allow: %v", err)
	}
	// Another port on the same IP is fine, and really connects.
	c, err := g.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(int(otherPort)))
	if err != nil {
		t.Fatalf("dial other port: %v", err)
	}
	c.Close()

	// An unspecified listen address covers every loopback address.
	for _, listenAddr := range []string{"[::]:9090", "0.0.0.0:9090", ":9090", "localhost:9090"} {
		g := mustNew(t, Options{Allow: []string{"127.0.0.0/8", "::1/128"}, Self: []string{listenAddr}})
		dialled := recordDial(g, "127.0.0.1:9091")
		for _, target := range []string{"127.0.0.1:9090", "127.1.2.3:9090", "[::1]:9090", "[::ffff:127.0.0.1]:9090"} {
			if _, err := g.DialContext(ctx, "tcp", target); !IsDenied(err) {
				t.Errorf("Self %s: dial %s: err = %v, want DeniedError", listenAddr, target, err)
			}
		}
		if _, err := g.DialContext(ctx, "tcp", "127.0.0.1:9091"); err != nil {
			t.Errorf("Self %s: dial another port: %v", listenAddr, err)
		}
		if len(*dialled) != 1 {
			t.Errorf("Self %s: dialled %v, want only the other port", listenAddr, *dialled)
		}
	}
}

func TestDialContextBadInput(t *testing.T) {
	g := mustNew(t, Options{})
	dialled := recordDial(g)
	for _, tc := range []struct{ network, addr string }{
		{"udp", "8.8.8.8:53"},
		{"tcp", "8.8.8.8"},
		{"tcp", "8.8.8.8:http"},
		{"tcp", "8.8.8.8:0"},
	} {
		if _, err := g.DialContext(context.Background(), tc.network, tc.addr); err == nil || IsDenied(err) {
			t.Errorf("DialContext(%s, %s) = %v, want a non-denied error", tc.network, tc.addr, err)
		}
	}
	if len(*dialled) != 0 {
		t.Errorf("dialled %v, want nothing", *dialled)
	}
}

// An IPv4 address the resolver answers in its IPv6-mapped form is
// judged, refused and named as the IPv4 address it is.
func TestMappedAnswerIsIPv4(t *testing.T) {
	g := mustNew(t, Options{Resolver: static(map[string][]string{"billing.corp.example": {"::ffff:10.1.2.3"}, "partner.example": {"::ffff:203.0.113.7"}})})
	_, err := g.Check(context.Background(), "billing.corp.example")
	var de *DeniedError
	if !errors.As(err, &de) || de.Addr != netip.MustParseAddr("10.1.2.3") || strings.Contains(err.Error(), "::ffff:") {
		t.Errorf("a private address answered mapped: %v, want refused as 10.1.2.3", err)
	}
	addrs, err := g.Check(context.Background(), "partner.example")
	if err != nil || len(addrs) != 1 || addrs[0] != netip.MustParseAddr("203.0.113.7") {
		t.Errorf("a public address answered mapped: %v %v, want 203.0.113.7", addrs, err)
	}
}

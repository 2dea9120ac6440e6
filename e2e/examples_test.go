package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/procenv"
)

// debianPython is the interpreter Debian's python3-requests and
// python3-httpx install for (.ci/run installs them).
const debianPython = "/usr/bin/python3"

// sender is one of examples/' runnable senders, as a user runs it.
type sender struct {
	name string
	cmd  func(t *testing.T, target string) *exec.Cmd
}

func senders() []sender {
	py := func(script string) func(*testing.T, string) *exec.Cmd {
		return func(t *testing.T, target string) *exec.Cmd {
			mod := strings.TrimPrefix(strings.TrimSuffix(script, ".py"), "send_")
			if mod != "urllib" {
				if out, err := exec.Command(debianPython, "-c", "import "+mod).CombinedOutput(); err != nil {
					t.Fatalf("%s cannot import %s (apt-get install python3-%s; .ci/run does): %v\n%s", debianPython, mod, mod, err, out)
				}
			}
			return exec.Command(debianPython, filepath.Join("..", "examples", "python", script), target)
		}
	}
	return []sender{
		{"go", func(t *testing.T, target string) *exec.Cmd {
			cmd := exec.Command("go", "run", "./examples/go-sender", target)
			cmd.Dir = ".."
			return cmd
		}},
		{"python-requests", py("send_requests.py")},
		{"python-urllib", py("send_urllib.py")},
		{"python-httpx", py("send_httpx.py")},
		{"node-fetch", func(t *testing.T, target string) *exec.Cmd {
			node := exampleNode(t, "node") // undici 7 needs Node 20.18.1 or later
			dir := filepath.Join("..", "examples", "node")
			cmd := exec.Command(node, "fetch.mjs", target)
			cmd.Dir = dir
			return cmd
		}},
	}
}

var senderOutput = regexp.MustCompile(`^(\d{3}) (\S+)$`)

// The example senders in Go, Python (requests, urllib, httpx)
// and Node (fetch with undici's EnvHttpProxyAgent at its defaults, which
// tunnels) each get hookpace's 202 with an X-Hookpace-Id, not the
// partner's answer, and each webhook then arrives, paced.
func TestExampleSenders(t *testing.T) {
	t.Parallel()
	rc := NewReceiver(t)
	hp := Start(t, fmt.Sprintf(`
log: {level: debug}
egress: {allow: ["127.0.0.0/8"]}
hosts:
  "%s": {rate: 2/s, burst: 1, concurrency: 1}
`, rc.Host()))
	env := append(procenv.WithoutProxy(), "HTTP_PROXY=http://"+hp.Proxy, "http_proxy=http://"+hp.Proxy)
	ids := map[string]string{}
	for _, s := range senders() {
		cmd := s.cmd(t, rc.URL+"/hooks/"+s.name)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s sender: %v\n%s", s.name, err, out)
		}
		last := lastLine(string(out))
		m := senderOutput.FindStringSubmatch(last)
		if m == nil || m[1] != "202" || m[2] == "null" || m[2] == "None" || m[2] == "" {
			t.Fatalf("%s sender printed %q; want 202 and hookpace's id\n%s", s.name, last, out)
		}
		if other, dup := ids[m[2]]; dup {
			t.Fatalf("%s and %s got the same id %s", s.name, other, m[2])
		}
		ids[m[2]] = s.name
		t.Logf("%s: %s", s.name, last)
	}
	n := len(ids)
	rc.WaitFor(t, 20*time.Second, "every sender's webhook", func(as []Arrival) bool { return len(as) >= n })
	as := rc.Arrivals()
	for _, s := range senders() {
		if rc.Count(func(a Arrival) bool { return a.Path == "/hooks/"+s.name && a.Method == "POST" }) != 1 {
			t.Errorf("%s's webhook arrived %d times, want once", s.name, rc.Count(func(a Arrival) bool { return a.Path == "/hooks/"+s.name }))
		}
	}
	// Paced at 2/s, burst 1: n arrivals take at least (n-1)/2 s.
	if took := as[len(as)-1].At.Sub(as[0].At); took < time.Duration(n-1)*450*time.Millisecond {
		t.Errorf("%d webhooks arrived within %v: not paced at 2/s", n, took)
	}
	// undici's EnvHttpProxyAgent tunnelled: its POST came through a CONNECT.
	if !strings.Contains(hp.Log(), `decision="plain http"`) {
		t.Errorf("no plain-HTTP tunnel in hookpace's log: the Node sender did not tunnel?\n%s", hp.Log())
	}
}

func lastLine(s string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	return last
}

// The snippets of the runtime pages (docs/runtime-*.md) are parts of the
// example senders that TestExampleSenders runs: every snippet marked
// <!-- example: PATH --> appears, line for line and in order, in that file.
func TestReadmeSnippetsAreTheExamples(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../docs/runtime-*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/runtime-*.md pages: %v", err)
	}
	var section string
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		section += string(b)
	}
	re := regexp.MustCompile("(?s)<!-- example: (\\S+) -->\\s*```[a-z]*\\n(.*?)```")
	blocks := re.FindAllStringSubmatch(section, -1)
	if len(blocks) < 5 {
		t.Fatalf("%d marked snippets in the runtime pages, want one per example sender (5)", len(blocks))
	}
	for _, m := range blocks {
		src, err := os.ReadFile(filepath.Join("..", m[1]))
		if err != nil {
			t.Fatalf("snippet for %s: %v", m[1], err)
		}
		lines := strings.Split(string(src), "\n")
		at := 0
		for _, want := range strings.Split(m[2], "\n") {
			want = strings.TrimSpace(want)
			if want == "" {
				continue
			}
			for at < len(lines) && strings.TrimSpace(lines[at]) != want {
				at++
			}
			if at == len(lines) {
				t.Errorf("docs snippet for %s: line %q is not in the example (in this order)", m[1], want)
				break
			}
			at++
		}
	}
}

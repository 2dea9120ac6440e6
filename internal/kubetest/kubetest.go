// Package kubetest runs a real Kubernetes control plane for tests: etcd
// (Debian's etcd-server) and kube-apiserver, each on free loopback ports,
// stopped by pid when the test ends. No controllers run: a test creates
// the Pods itself, through the API, as a controller would.
//
// The Kubernetes binaries are built from the Go module proxy by the tool
// module in tools/ (k8s.io/kubernetes with every staging module at its
// published version), once, into Dir(): the Go build cache's neighbour,
// so that later runs on the same machine, CI's included, reuse them.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/proctest"
)

// Version is the k8s.io/kubernetes release tools/go.mod requires.
const Version = "v1.37.2"

// Dir is where the binaries are built: $(go env GOCACHE)/../hookpace-kube/Version.
func Dir() (string, error) {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOCACHE: %w", err)
	}
	return filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "hookpace-kube", Version), nil
}

// Binary returns the path of cmd (kube-apiserver),
// building it first if Dir has none. Concurrent callers, in this process
// or another, wait for one build (an flock on Dir/.lock).
func Binary(t testing.TB, cmd string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	return proctest.Built(t, "kube", Version, cmd, filepath.Join(filepath.Dir(here), "tools"), "k8s.io/kubernetes/cmd/"+cmd)
}

// Cluster is a running etcd and kube-apiserver.
type Cluster struct {
	URL    string // https://127.0.0.1:PORT
	Token  string // a bearer token of a member of system:masters
	Client *http.Client
	dir    string
	t      testing.TB
}

// FreePort is a loopback port nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// start runs a process whose output goes to dir/name.log, killed by pid
// (and waited for) when the test ends.
func start(t testing.TB, dir, name, bin string, args ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := proctest.Command(bin, args...) // gone with the test process, even one killed hung
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("%s's log (end):\n%s", name, b)
		}
	})
	return cmd
}

// Start runs etcd and kube-apiserver and waits for /readyz.
func Start(t testing.TB) *Cluster {
	t.Helper()
	apiserver := Binary(t, "kube-apiserver")
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatal("etcd not found: apt-get install etcd-server (.ci/run does)")
	}
	dir := t.TempDir()
	client, peer := FreePort(t), FreePort(t)
	cu, pu := fmt.Sprintf("http://127.0.0.1:%d", client), fmt.Sprintf("http://127.0.0.1:%d", peer)
	start(t, dir, "etcd", etcd, "--name", "kubetest", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", cu, "--advertise-client-urls", cu,
		"--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu, "--initial-cluster", "kubetest="+pu)

	token := randomHex(t)
	tokens := filepath.Join(dir, "tokens.csv")
	os.WriteFile(tokens, []byte(token+",kubetest,kubetest-uid,system:masters\n"), 0o600)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	port := FreePort(t)
	start(t, dir, "kube-apiserver", apiserver,
		"--etcd-servers", cu,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(port),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens, "--anonymous-auth=false", "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", saKey,
		"--service-account-signing-key-file", saKey, "--service-cluster-ip-range", "10.96.0.0/16",
		// No ServiceAccount controller unless a test starts the
		// controller manager: pods need no token to be admitted.
		"--disable-admission-plugins", "ServiceAccount",
		"--profiling=false", "--enable-priority-and-fairness=false", "--endpoint-reconciler-type", "none")
	c := &Cluster{URL: fmt.Sprintf("https://127.0.0.1:%d", port), Token: token, dir: dir, t: t,
		Client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			// The API server's self-signed serving certificate, made at start.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	deadline := time.Now().Add(120 * time.Second)
	for {
		code, body, err := c.Do("GET", "/readyz", "", nil)
		if err == nil && code == 200 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 120 s: %d %s %v", code, body, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Kubeconfig is the path of a kubeconfig file for c (helm).
func (c *Cluster) Kubeconfig() string {
	path := filepath.Join(c.dir, "kubeconfig")
	os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: kubetest, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: kubetest, user: {token: %q}}]
contexts: [{name: kubetest, context: {cluster: kubetest, user: kubetest}}]
current-context: kubetest
`, c.URL, c.Token)), 0o600)
	return path
}

// Do sends one request with the token; body is JSON unless contentType says otherwise.
func (c *Cluster) Do(method, path, contentType string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if contentType == "" {
		contentType = "application/json"
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// Must is Do that fails the test on an error or a status other than want.
func (c *Cluster) Must(want int, method, path, contentType string, body []byte) []byte {
	c.t.Helper()
	code, b, err := c.Do(method, path, contentType, body)
	if err != nil || code != want {
		c.t.Fatalf("%s %s: %d %v, want %d\n%s", method, path, code, err, want, b)
	}
	return b
}

func randomHex(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

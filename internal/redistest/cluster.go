package redistest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookpace/hookpace/internal/proctest"
)

// CLI returns the redis-cli binary, or fails the test.
func CLI(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli not found (install it: apt-get install -y redis-tools): %v", err)
	}
	return bin
}

// cli runs redis-cli against port with args and returns its output.
func cli(t testing.TB, port int, args ...string) (string, error) {
	t.Helper()
	out, err := proctest.Command(CLI(t), append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(port)}, args...)...).CombinedOutput()
	return string(out), err
}

// waitFor polls cond every 20 ms until it holds, or fails the test after
// limit with what cond last said.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, limit, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts n redis-servers in cluster mode (persistence off),
// joins them with redis-cli --cluster create and waits until every node
// says cluster_state:ok. They stop when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{}
	for range n {
		dir := t.TempDir()
		s := &Server{t: t, bin: Binary(t), dir: dir, extra: []string{"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-port", "{port2}",
			"--cluster-node-timeout", "2000"}}
		c.Nodes = append(c.Nodes, startWith(t, s))
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-yes")
	if out, err := proctest.Command(CLI(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	for _, s := range c.Nodes {
		waitFor(t, 30*time.Second, "cluster_state:ok on "+s.Addr(), func() (bool, string) {
			out, err := cli(t, s.port, "cluster", "info")
			return err == nil && strings.Contains(out, "cluster_state:ok") &&
				strings.Contains(out, "cluster_known_nodes:"+strconv.Itoa(n)), out
		})
	}
	return c
}

// Addrs are the nodes' host:port.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, s := range c.Nodes {
		a = append(a, s.Addr())
	}
	return a
}

// Sentinel is a master, one replica of it and one sentinel watching it
// (quorum 1, a master down after 1 s).
type Sentinel struct {
	Name            string // the master's name at the sentinel
	Master, Replica *Server
	Sentinel        *Server
}

// SentinelBinary returns Debian's redis-sentinel, or fails the test.
func SentinelBinary(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		t.Fatalf("redis-sentinel not found (install it: apt-get install -y redis-sentinel): %v", err)
	}
	return bin
}

// StartSentinel starts a master, a replica (--replicaof) and a sentinel,
// and waits until the replica is in sync and the sentinel knows it.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	st := &Sentinel{Name: "hookpace-test"}
	st.Master = Start(t)
	st.Replica = startWith(t, &Server{t: t, bin: Binary(t), dir: t.TempDir(),
		extra: []string{"--replicaof", "127.0.0.1", strconv.Itoa(st.Master.port)}})
	waitFor(t, 30*time.Second, "replica in sync", func() (bool, string) {
		out, err := cli(t, st.Replica.port, "info", "replication")
		return err == nil && strings.Contains(out, "master_link_status:up"), out
	})
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	body := "sentinel monitor " + st.Name + " 127.0.0.1 " + strconv.Itoa(st.Master.port) + " 1\n" +
		"sentinel down-after-milliseconds " + st.Name + " 1000\n" +
		"sentinel failover-timeout " + st.Name + " 10000\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	st.Sentinel = startWith(t, &Server{t: t, bin: SentinelBinary(t), dir: dir, pre: []string{conf}})
	waitFor(t, 30*time.Second, "sentinel knows the replica", func() (bool, string) {
		out, err := cli(t, st.Sentinel.port, "info", "sentinel")
		if err != nil || !strings.Contains(out, "status=ok") || !strings.Contains(out, "slaves=1") {
			return false, out
		}
		out, err = cli(t, st.Sentinel.port, "sentinel", "replicas", st.Name)
		return err == nil && strings.Contains(out, strconv.Itoa(st.Replica.port)) && !strings.Contains(out, "disconnected"), out
	})
	return st
}

// Addrs are the sentinels' host:port.
func (st *Sentinel) Addrs() []string { return []string{st.Sentinel.Addr()} }

// KillMaster kills the master and waits until the sentinel has promoted
// the replica.
func (st *Sentinel) KillMaster() {
	t := st.Master.t
	t.Helper()
	st.Master.Kill()
	want := strconv.Itoa(st.Replica.port)
	waitFor(t, 60*time.Second, "failover to the replica", func() (bool, string) {
		out, err := cli(t, st.Sentinel.port, "sentinel", "get-master-addr-by-name", st.Name)
		if err != nil || !strings.Contains(out, want) {
			return false, out
		}
		out, err = cli(t, st.Replica.port, "info", "replication")
		return err == nil && strings.Contains(out, "role:master"), out
	})
}

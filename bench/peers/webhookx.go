package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookpace/hookpace/internal/procenv"
)

// webhookxSys is a webhookx binary on its own PostgreSQL cluster and
// redis-server, both from the distribution's packages, started fresh for
// each measurement. Ingest runs with webhookx's worker off, so that the
// webhooks wait in its store as they wait in hookpace's paused queue; the
// release restarts webhookx with the worker on, which then delivers them.
// Its settings are its defaults except: listeners on loopback, the worker's
// ACL allowing loopback (the sink), no colours in its logs, the anonymous
// usage reports off, and Redis with an append-only file synced
// every second (as webhookx's own compose file runs it).
type webhookxSys struct {
	bin, pgBin string

	dir, cfgPath, adminAddr string
	pg, redis, wx           *child
	// retired is the CPU of webhookx processes that have exited.
	retired time.Duration
}

func (w *webhookxSys) name() string { return "webhookx" }

// asPostgres runs cmd as the postgres user when this process is root:
// PostgreSQL refuses to run as root.
func asPostgres(cmd *exec.Cmd) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running PostgreSQL as root is refused, and there is no postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return nil
}

func chownPostgres(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}

func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

func (w *webhookxSys) start(ctx context.Context, dir, sinkAddr string, conns int) (*poster, error) {
	w.dir = dir
	pgPort, err := freePort()
	if err != nil {
		return nil, err
	}
	redisAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	proxyAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	if w.adminAddr, err = freePort(); err != nil {
		return nil, err
	}
	statusAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, pgPortNum, _ := net.SplitHostPort(pgPort)
	_, redisPortNum, _ := net.SplitHostPort(redisAddr)

	// PostgreSQL: a new cluster, trust auth on loopback, the server's defaults.
	pgRoot := filepath.Join(dir, "pg")
	if err := os.Mkdir(pgRoot, 0o700); err != nil {
		return nil, err
	}
	if err := chownPostgres(pgRoot); err != nil {
		return nil, fmt.Errorf("handing %s to the postgres user: %w", pgRoot, err)
	}
	data := filepath.Join(pgRoot, "data")
	initdb := exec.Command(filepath.Join(w.pgBin, "initdb"), "-D", data, "-U", "webhookx", "--auth=trust", "-E", "UTF8")
	if err := asPostgres(initdb); err != nil {
		return nil, err
	}
	if err := run(initdb); err != nil {
		return nil, fmt.Errorf("creating the PostgreSQL cluster: %w", err)
	}
	pgCmd := exec.Command(filepath.Join(w.pgBin, "postgres"), "-D", data, "-p", pgPortNum,
		"-k", pgRoot, "-c", "listen_addresses=127.0.0.1")
	if err := asPostgres(pgCmd); err != nil {
		return nil, err
	}
	if w.pg, err = startChild(pgCmd, filepath.Join(dir, "postgres.log")); err != nil {
		return nil, err
	}
	if err := waitFor(w.pg, "PostgreSQL accepting connections", 60*time.Second, func() bool {
		return exec.Command(filepath.Join(w.pgBin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", pgPortNum).Run() == nil
	}); err != nil {
		return nil, err
	}
	if err := run(exec.Command(filepath.Join(w.pgBin, "createdb"), "-h", "127.0.0.1", "-p", pgPortNum, "-U", "webhookx", "webhookx")); err != nil {
		return nil, fmt.Errorf("creating webhookx's database: %w", err)
	}

	redisDir := filepath.Join(dir, "redis")
	if err := os.Mkdir(redisDir, 0o755); err != nil {
		return nil, err
	}
	redisCmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", redisPortNum,
		"--dir", redisDir, "--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
	if w.redis, err = startChild(redisCmd, filepath.Join(dir, "redis.log")); err != nil {
		return nil, err
	}
	if err := waitFor(w.redis, "redis PONG", 30*time.Second, func() bool { return redisPing(redisAddr) }); err != nil {
		return nil, err
	}

	cfg := fmt.Sprintf(`log:
  level: info
  colored: false
access_log:
  colored: false
anonymous_reports: false
database:
  host: 127.0.0.1
  port: %s
  username: webhookx
  database: webhookx
redis:
  host: 127.0.0.1
  port: %s
proxy:
  listen: %s
  queue:
    type: redis
    redis:
      host: 127.0.0.1
      port: %s
admin:
  listen: %s
status:
  listen: %s
worker:
  enabled: true
  deliverer:
    acl:
      deny: []
`, pgPortNum, redisPortNum, proxyAddr, redisPortNum, w.adminAddr, statusAddr)
	w.cfgPath = filepath.Join(dir, "webhookx.yml")
	if err := os.WriteFile(w.cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := run(w.command("db", "up")); err != nil {
		return nil, fmt.Errorf("running webhookx's migrations: %w", err)
	}
	if err := w.launch("ingest", false); err != nil {
		return nil, err
	}
	if err := w.adminPost(ctx, "/workspaces/default/endpoints", fmt.Sprintf(
		`{"name":"sink","request":{"url":"http://%s/hook","method":"POST","timeout":10000},"events":["bench.event"]}`, sinkAddr)); err != nil {
		return nil, err
	}
	if err := w.adminPost(ctx, "/workspaces/default/sources",
		`{"name":"bench","type":"http","config":{"http":{"path":"/","methods":["POST"]}}}`); err != nil {
		return nil, err
	}
	p := newPoster("http://"+proxyAddr+"/", nil, conns)
	// The proxy builds its routes from the entities in the background:
	// ready when a webhook of run 0 (which no sink run counts) is accepted.
	if err := waitFor(w.wx, "webhookx's ingest route", 30*time.Second, func() bool {
		code, err := p.post(ctx, body(0, 0))
		return err == nil && code/100 == 2
	}); err != nil {
		return nil, err
	}
	return p, nil
}

func (w *webhookxSys) command(args ...string) *exec.Cmd {
	cmd := exec.Command(w.bin, append(args, "--config", w.cfgPath)...)
	cmd.Env = procenv.WithoutProxy()
	return cmd
}

// launch starts webhookx with the worker on or off and waits for its
// admin API.
func (w *webhookxSys) launch(phase string, worker bool) error {
	cmd := w.command("start")
	cmd.Env = append(cmd.Env, "WEBHOOKX_WORKER_ENABLED="+strconv.FormatBool(worker))
	var err error
	if w.wx, err = startChild(cmd, filepath.Join(w.dir, "webhookx-"+phase+".log")); err != nil {
		return err
	}
	return waitFor(w.wx, "webhookx's admin API", 60*time.Second, func() bool { return httpOK("http://" + w.adminAddr + "/") })
}

func (w *webhookxSys) adminPost(ctx context.Context, path, js string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+w.adminAddr+path, strings.NewReader(js))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ctl.Do(req)
	if err != nil {
		return fmt.Errorf("webhookx admin POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhookx admin POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// release stops the ingest process (SIGTERM, as an operator would) and
// starts webhookx again with its worker on.
func (w *webhookxSys) release(ctx context.Context) error {
	w.wx.stop(syscall.SIGTERM, 30*time.Second)
	if st := w.wx.cmd.ProcessState; st != nil {
		w.retired += st.UserTime() + st.SystemTime()
	}
	return w.launch("deliver", true)
}

func (w *webhookxSys) cpu() time.Duration {
	var roots []int
	for _, c := range []*child{w.pg, w.redis, w.wx} {
		if c != nil {
			roots = append(roots, c.pid())
		}
	}
	return w.retired + treeCPU(roots)
}

func (w *webhookxSys) stop() {
	if w.wx != nil {
		w.wx.stop(syscall.SIGKILL, 10*time.Second)
	}
	if w.redis != nil {
		w.redis.stop(syscall.SIGKILL, 10*time.Second)
	}
	if w.pg != nil {
		// Fast shutdown: the postmaster ends its backends before it exits.
		w.pg.stop(syscall.SIGINT, 30*time.Second)
	}
}

func redisPing(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.HasPrefix(line, "+PONG")
}

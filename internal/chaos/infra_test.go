package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// The infrastructure of one suite run: a private PostgreSQL cluster, NATS
// server and redis-server (never the shared local stack — the suite
// restarts them), Toxiproxy in front of each, and the Berth binaries as
// subprocesses so that kill -9 is real.

const pgBinDir = "/usr/lib/postgresql/15/bin"

// freePort asks the kernel for a free loopback port. The port is released
// before it is used, so a rare collision is possible; callers start the
// listener right away.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitPort waits until something accepts on addr.
func waitPort(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: nothing listens after %s", addr, within)
}

// pgCluster is a PostgreSQL 15 cluster of our own in a temporary directory.
type pgCluster struct {
	dir, data, logFile string
	port               int
	asPostgres         bool
}

// runPG runs a PostgreSQL binary, as the postgres user when we are root
// (PostgreSQL refuses to run as root).
func (c *pgCluster) runPG(timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	bin := filepath.Join(pgBinDir, name)
	var cmd *exec.Cmd
	if c.asPostgres {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, bin, args...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return nil
}

func startPostgres(t *testing.T) *pgCluster {
	t.Helper()
	if _, err := os.Stat(filepath.Join(pgBinDir, "initdb")); err != nil {
		require(t, "PostgreSQL 15 binaries not found in "+pgBinDir)
	}
	dir, err := os.MkdirTemp("", "berth-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &pgCluster{dir: dir, data: filepath.Join(dir, "data"), logFile: filepath.Join(dir, "postgres.log"), port: freePort(t)}
	sock := filepath.Join(dir, "sock")
	if err := os.MkdirAll(sock, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			require(t, "running as root and there is no postgres user to run PostgreSQL as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, p := range []string{dir, sock} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		c.asPostgres = true
	}
	t.Cleanup(func() {
		_ = c.runPG(60*time.Second, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop")
		if t.Failed() {
			if b, err := os.ReadFile(c.logFile); err == nil {
				t.Logf("postgres log (tail):\n%s", tail(string(b), 3000))
			}
		}
		os.RemoveAll(dir)
	})
	if err := c.runPG(120*time.Second, "initdb", "-D", c.data, "-U", "berth", "--auth=trust", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`
# berth chaos suite
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
max_connections = 300
shared_buffers = 64MB
# A process crash (pg_ctl restart -m immediate) keeps committed data with
# fsync off; only an OS crash would not, and the suite injects none.
fsync = off
full_page_writes = off
`, c.port, sock)
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(conf); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := c.runPG(90*time.Second, "pg_ctl", "-D", c.data, "-l", c.logFile, "-w", "-t", "60", "start"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE berth"); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *pgCluster) addr() string { return fmt.Sprintf("127.0.0.1:%d", c.port) }

func (c *pgCluster) url(db string) string {
	return fmt.Sprintf("postgres://berth@%s/%s?sslmode=disable", c.addr(), db)
}

// restart crashes the server (immediate mode: no shutdown checkpoint, crash
// recovery on start) and starts it again.
func (c *pgCluster) restart() error {
	return c.runPG(120*time.Second, "pg_ctl", "-D", c.data, "-l", c.logFile, "-m", "immediate", "-w", "-t", "90", "restart")
}

// natsNode is an in-process NATS server with JetStream whose store
// survives a restart on the same port.
type natsNode struct {
	mu   sync.Mutex
	opts natsserver.Options
	srv  *natsserver.Server
}

func startNATS(t *testing.T) *natsNode {
	t.Helper()
	n := &natsNode{opts: natsserver.Options{
		Host: "127.0.0.1", Port: freePort(t), JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true, MaxPayload: 8 << 20,
	}}
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.stop)
	return n
}

func (n *natsNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	opts := n.opts
	s, err := natsserver.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("nats server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("nats server not ready on :%d", n.opts.Port)
	}
	n.srv = s
	return nil
}

func (n *natsNode) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

func (n *natsNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.opts.Port) }

// startRedis runs a redis-server subprocess without persistence.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		require(t, "redis-server not found")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--dir", t.TempDir(), "--logfile", "")
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitPort(addr, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return addr
}

// proxies is the in-process Toxiproxy server with one proxy per upstream.
type proxies struct {
	srv    *toxiproxy.ApiServer
	byName map[string]*toxiproxy.Proxy
}

func newProxies(t *testing.T) *proxies {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := &proxies{srv: srv, byName: map[string]*toxiproxy.Proxy{}}
	t.Cleanup(func() {
		for _, px := range p.byName {
			px.Stop()
		}
	})
	return p
}

// add starts a proxy on a free loopback port in front of upstream and
// returns its address.
func (p *proxies) add(t *testing.T, name, upstream string) string {
	t.Helper()
	px := toxiproxy.NewProxy(p.srv, name, "127.0.0.1:0", upstream)
	if err := px.Start(); err != nil {
		t.Fatalf("proxy %s: %v", name, err)
	}
	p.byName[name] = px
	return px.Listen
}

// toxic adds a toxic to the named proxy, e.g.
// toxic("pg", "latency", "downstream", `{"latency":300}`).
func (p *proxies) toxic(proxy, typ, stream, attrs string) error {
	px, ok := p.byName[proxy]
	if !ok {
		return fmt.Errorf("no proxy %q", proxy)
	}
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1.0,"attributes":%s}`, typ+"_"+stream, typ, stream, attrs)
	if _, err := px.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		return fmt.Errorf("toxic %s on %s: %w", typ, proxy, err)
	}
	return nil
}

// heal removes every toxic of the named proxies.
func (p *proxies) heal(names ...string) {
	for _, n := range names {
		if px, ok := p.byName[n]; ok {
			px.Toxics.ResetToxics(context.Background())
		}
	}
}

// proc is a Berth binary running as a subprocess, restartable.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string
	health  string // URL polled for 200 after start ("" = none)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logf *os.File
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "\n=== chaos: start %s at %s ===\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done, p.logf = cmd, done, f
	return nil
}

// waitReady polls the health URL until it answers 200.
func (p *proc) waitReady(within time.Duration) error {
	if p.health == "" {
		return nil
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		done := p.done
		p.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("%s exited during start-up; see %s", p.name, p.logPath)
		default:
		}
		resp, err := client.Get(p.health)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s; see %s", p.name, within, p.logPath)
}

// kill sends SIGKILL and waits for the process to go.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done, f := p.cmd, p.done, p.logf
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
	}
	if f != nil {
		fmt.Fprintf(f, "\n=== chaos: kill -9 %s at %s ===\n", p.name, time.Now().UTC().Format(time.RFC3339Nano))
		f.Close()
	}
}

// run runs a binary to completion and returns its combined output.
func runBin(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// buildBinaries builds the three Berth binaries into dir.
func buildBinaries(t *testing.T, root, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(os.PathSeparator), "./cmd/booking", "./cmd/readmodel", "./cmd/router")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// require fails the test when a prerequisite is missing: the chaos suite
// skips itself only under -short (see its entry points), never because the
// machine lacks what it needs — `make deps` installs all of it.
func require(t *testing.T, why string) {
	t.Helper()
	t.Fatal(why + " (run `make deps`)")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

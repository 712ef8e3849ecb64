// Package redistest runs a real redis-server for a test, on a free loopback
// port, with no persistence, so a test can stop it and start it again on the
// same port (a Redis outage). It skips the test when redis-server is not
// installed, unless BERTH_REQUIRE_DB is set.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Server is a redis-server process owned by one test.
type Server struct {
	t    testing.TB
	Port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server on a free port; it is killed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		// As dbtest: a missing server fails the test, except under -short.
		const why = "redis-server is not installed: run `make deps`"
		if testing.Short() && os.Getenv("BERTH_REQUIRE_DB") == "" {
			t.Skip(why + "; skipped under -short")
		}
		t.Fatal(why)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{t: t, Port: port}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.Port) }

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Stop kills the server (an outage) and waits until it is gone.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port (empty: no persistence)
// and waits until it accepts connections.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr())
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("redis-server on %s did not come up: %v", s.Addr(), err)
		case <-s.done:
			s.t.Fatalf("redis-server on %s exited", s.Addr())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

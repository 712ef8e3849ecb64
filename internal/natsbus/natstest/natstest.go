// Package natstest runs an in-process NATS server with JetStream for tests,
// on a random port and a temporary store directory, and can restart it on
// the same port and store (clients reconnect by themselves).
package natstest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is a running in-process NATS server.
type Server struct {
	t    testing.TB
	opts server.Options
	srv  *server.Server
	URL  string
}

// Start starts a JetStream-enabled server; it stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	}}
	s.start()
	s.URL = s.srv.ClientURL()
	// A restart reuses the port the first start picked, so clients find it.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("nats server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("nats server not ready")
	}
	s.srv = srv
}

// Shutdown stops the server (idempotent).
func (s *Server) Shutdown() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart stops the server and starts it again on the same port and store.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.start()
}

// Drained reports whether the durable consumer of stream has acked every
// message of the stream that its filters match: nothing delivered and
// unacked, and its ack floor at or past the last such message.
//
// A consumer's NumPending cannot tell this: the server answers a publish
// before it tells the stream's consumers about the new message (through a
// queue another goroutine works off), so for a moment after a publisher
// holds its ack the consumer reports nothing pending and nothing in flight
// though the message is stored. The stream's last matching sequence is read
// from the store itself.
func Drained(ctx context.Context, js jetstream.JetStream, stream, durable string) (bool, error) {
	c, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		return false, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return false, err
	}
	if info.NumAckPending > 0 {
		return false, nil
	}
	filters := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		filters = append(filters, info.Config.FilterSubject)
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return false, err
	}
	for _, f := range filters {
		m, err := s.GetLastMsgForSubject(ctx, f)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if m.Sequence > info.AckFloor.Stream {
			return false, nil
		}
	}
	return true, nil
}

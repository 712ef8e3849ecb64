package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A slow client (slowloris) cannot hold a connection open: headers that
// trickle in are cut off by the server's header timeout; an oversized
// header block is refused with 431.
func TestSlowAndOversizedClients(t *testing.T) {
	s := startService(t)
	t.Run("slow headers", func(t *testing.T) {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		// Never finish the headers; the server must close the connection on
		// its own (ReadHeaderTimeout), well before this test's own bound.
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadAll(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server kept a slow client's connection open for 30 s: %v", err)
		}
	})
	t.Run("oversized headers", func(t *testing.T) {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		req := "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 100<<10) + "\r\n\r\n"
		go func() { _, _ = io.WriteString(c, req) }()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to an oversized header block: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("oversized headers answered %d, want 431", resp.StatusCode)
		}
	})
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/wan"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serve puts a proxy with a latency toxic on each direction in front of
// every upstream of the plan, visible in the Toxiproxy API, and requests
// pass through it unchanged.
func TestServeProxiesWithLatency(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	t.Cleanup(upstream.Close)
	link := wan.Link{Name: "eu-west-to-us-east-booking", From: "eu-west", To: "us-east", Service: "booking",
		Listen: freeAddr(t), Upstream: upstream.Listener.Addr().String(), OneWay: 37 * time.Millisecond, Jitter: 3 * time.Millisecond}
	api := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, []wan.Link{link}, api) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	client := &http.Client{Timeout: 5 * time.Second}
	var proxies map[string]struct {
		Listen, Upstream string
		Toxics           []struct {
			Type, Stream string
			Attributes   map[string]int
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := client.Get("http://" + api + "/proxies")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&proxies)
			resp.Body.Close()
		}
		if err == nil && len(proxies) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Toxiproxy API did not list the proxy: %v %v", err, proxies)
		}
		time.Sleep(50 * time.Millisecond)
	}
	px := proxies[link.Name]
	if px.Upstream != link.Upstream || len(px.Toxics) != 2 {
		t.Fatalf("proxy %+v", px)
	}
	streams := map[string]bool{}
	for _, tx := range px.Toxics {
		streams[tx.Stream] = true
		if tx.Type != "latency" || tx.Attributes["latency"] != 37 || tx.Attributes["jitter"] != 3 {
			t.Errorf("toxic %+v", tx)
		}
	}
	if !streams["upstream"] || !streams["downstream"] {
		t.Errorf("toxics on %v, want both directions", streams)
	}
	resp, err := client.Get(link.URL() + "/v1/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello from /v1/x" {
		t.Fatalf("through the proxy: %q", body)
	}
}

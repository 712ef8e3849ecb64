package routerd

import (
	"strings"
	"testing"
)

// A router process and an embedded router read the same settings but two:
// the embedded one listens on BERTH_ROUTER_ADDR (BERTH_HTTP_ADDR is its
// booking service's), does not need its own region's booking URL (it
// serves that region in-process), and leaves profiles to its process.
func TestLoadAndLoadEmbedded(t *testing.T) {
	base := map[string]string{
		"BERTH_REGION": "eu-west", "BERTH_DATABASE_URL": "postgres://x", "BERTH_HTTP_ADDR": ":9081",
		"BERTH_ROUTER_ADDR": ":8081", "BERTH_PPROF_ADDR": "127.0.0.1:6060",
		"BERTH_BOOKING_URLS": "us-east=http://10.0.0.1:9080", "BERTH_REDIS_URL": "", "BERTH_RATE_LIMITS": "",
		"BERTH_WAITING_ROOMS": "", "BERTH_TOKEN_SECRET": "", "BERTH_ORIGIN_COUNTS": "",
	}
	for k, v := range base {
		t.Setenv(k, v)
	}
	if _, err := Load(Overrides{}); err == nil || !strings.Contains(err.Error(), "BERTH_BOOKING_URLS") {
		t.Fatalf("a router process without its own region's booking URL: %v", err)
	}
	c, err := LoadEmbedded(Overrides{})
	if err != nil {
		t.Fatalf("embedded: %v", err)
	}
	if c.Addr != ":8081" || c.PprofAddr != "" || c.Region != "eu-west" || c.BookingURLs["us-east"] != "http://10.0.0.1:9080" {
		t.Fatalf("embedded settings: addr %q pprof %q region %q bookings %v", c.Addr, c.PprofAddr, c.Region, c.BookingURLs)
	}
	t.Setenv("BERTH_BOOKING_URLS", "us-east=http://10.0.0.1:9080,eu-west=http://10.0.0.2:9081")
	c, err = Load(Overrides{Addr: ":7000"})
	if err != nil {
		t.Fatalf("router process: %v", err)
	}
	if c.Addr != ":7000" || c.PprofAddr != "127.0.0.1:6060" {
		t.Fatalf("router process settings: addr %q pprof %q", c.Addr, c.PprofAddr)
	}
	t.Setenv("BERTH_ROUTER_ADDR", "8081")
	if _, err := LoadEmbedded(Overrides{}); err == nil || !strings.Contains(err.Error(), "BERTH_ROUTER_ADDR") {
		t.Fatalf("a bad BERTH_ROUTER_ADDR: %v", err)
	}
}

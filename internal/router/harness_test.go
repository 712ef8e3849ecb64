package router_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/clientip"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/router"
)

// platform is three regions in-process: a booking service and a router per
// region, all on one fresh database, all over loopback HTTP on port 0.
type platform struct {
	t        testing.TB
	bookings map[string]*bookingtest.Env
	routers  map[string]*bookingtest.Env // Env pointed at the router (for Do/Try)
	dirs     map[string]*placement.Directory
	db       *postgres.DB
}

type platformOptions struct {
	// transport, when set, replaces the routers' upstream transport.
	transport func(region string) http.RoundTripper
	readModel string
	// proxies are the routers' trusted proxies (BERTH_TRUSTED_PROXIES).
	proxies clientip.Proxies
	// cache, when set, gives every booking service this regional cache.
	cache httpapi.Cache
	// configure, when set, adjusts each router's configuration.
	configure func(*router.Config)
}

func startPlatform(t testing.TB, o platformOptions) *platform {
	t.Helper()
	db, url := dbtest.New(t, postgres.Options{LockTimeout: 2 * time.Second, StatementTimeout: 5 * time.Second})
	p := &platform{t: t, bookings: map[string]*bookingtest.Env{}, routers: map[string]*bookingtest.Env{},
		dirs: map[string]*placement.Directory{}, db: db}
	urls := map[string]string{}
	for _, region := range berth.Regions() {
		env := bookingtest.StartOn(t, db, url, bookingtest.Options{Region: region, Configure: func(c *httpapi.Config, s *postgres.Store) {
			c.Placements = postgres.NewPlacements(s.DB())
			if o.cache != nil {
				c.Cache = o.cache
			}
		}})
		p.bookings[region] = env
		urls[region] = env.URL
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, region := range berth.Regions() {
		dir := placement.NewDirectory(postgres.NewPlacements(db), quiet)
		if err := dir.Load(context.Background()); err != nil {
			t.Fatal(err)
		}
		cfg := router.Config{Region: region, Bookings: urls, ReadModel: o.readModel, Directory: dir, Logger: quiet,
			TrustedProxies: o.proxies}
		if o.transport != nil {
			cfg.Transport = o.transport(region)
		}
		if o.configure != nil {
			o.configure(&cfg)
		}
		rt, err := router.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(rt)
		t.Cleanup(srv.Close)
		b := p.bookings[region]
		p.routers[region] = &bookingtest.Env{T: t, URL: srv.URL, DB: db, Store: b.Store, Tokens: b.Tokens, Client: b.Client, Server: srv}
		p.dirs[region] = dir
	}
	return p
}

// seedHotel creates a hotel homed in region (through that region's booking
// service, which must be home to add room types and inventory).
func (p *platform) seedHotel(region string, rooms int, from, to string) bookingtest.Hotel {
	p.t.Helper()
	return p.bookings[region].SeedHotel(region, rooms, 0, from, to)
}

// regionOf names the region whose booking service listens at host.
func (p *platform) regionOf(host string) string {
	for region, env := range p.bookings {
		if strings.TrimPrefix(env.URL, "http://") == host {
			return region
		}
	}
	return ""
}

// metric reads one counter from a router's /metrics.
func (p *platform) metric(region, name string) int {
	p.t.Helper()
	m := p.routers[region].Do(bookingtest.Request{Method: "GET", Path: "/metrics"})
	for _, line := range strings.Split(string(m.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				p.t.Fatalf("metric %s: %q", name, line)
			}
			return n
		}
	}
	p.t.Fatalf("router %s has no metric %s", region, name)
	return 0
}

func (p *platform) guest(sub string) string {
	return p.bookings[berth.Regions()[0]].Token(sub, berth.RoleGuest)
}

func (p *platform) ops() string { return p.bookings[berth.Regions()[0]].Token("ops", berth.RoleOps) }

func holdBody(guest string, h bookingtest.Hotel, in, out string, qty int) map[string]any {
	return map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID, "check_in": in, "check_out": out, "quantity": qty}
}

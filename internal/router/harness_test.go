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
// region, all on one fresh database, all over loopback HTTP on port 0 — or,
// in the together layout, each router serving its own region's requests
// through that booking service's handler in-process (router.InProcess).
type platform struct {
	t        testing.TB
	layout   layout
	bookings map[string]*bookingtest.Env
	routers  map[string]*bookingtest.Env // Env pointed at the router (for Do/Try)
	dirs     map[string]*placement.Directory
	db       *postgres.DB
}

// layout is how a region's router reaches its own region's booking
// service: over loopback HTTP like any other region's (split), or through
// its handler in the same process (together, ADR 0022). Everything else —
// the other regions, the read model — is over HTTP in both.
type layout string

const (
	split    layout = "split"
	together layout = "together"
)

// forLayouts runs test once per layout, in parallel subtests: the router's
// behaviour must not depend on the layout.
func forLayouts(t *testing.T, test func(t *testing.T, l layout)) {
	t.Helper()
	for _, l := range []layout{split, together} {
		t.Run(string(l), func(t *testing.T) {
			t.Parallel()
			test(t, l)
		})
	}
}

// forLayoutsInTurn runs test once per layout, one after the other: for the
// load tests, whose two runs at once would starve each other of CPU on a
// small machine.
func forLayoutsInTurn(t *testing.T, test func(t *testing.T, l layout)) {
	t.Helper()
	for _, l := range []layout{split, together} {
		t.Run(string(l), func(t *testing.T) { test(t, l) })
	}
}

type platformOptions struct {
	// layout is split unless set.
	layout layout
	// transport, when set, wraps the routers' upstream transport (next is
	// the layout's: the network, or in-process for the router's own region).
	transport func(region string, next http.RoundTripper) http.RoundTripper
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
	if o.layout == "" {
		o.layout = split
	}
	p := &platform{t: t, layout: o.layout, bookings: map[string]*bookingtest.Env{}, routers: map[string]*bookingtest.Env{},
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
			TrustedProxies: o.proxies, Transport: p.upstream(region, urls[region])}
		if o.transport != nil {
			cfg.Transport = o.transport(region, cfg.Transport)
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

// upstream is the transport of a router of region in the platform's layout;
// base is the URL its own booking service is named by.
func (p *platform) upstream(region, base string) http.RoundTripper {
	p.t.Helper()
	if p.layout != together {
		return router.NewTransport()
	}
	tr, err := router.InProcess(p.bookings[region].Server.Config.Handler, base, router.NewTransport(),
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		p.t.Fatal(err)
	}
	return tr
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

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// tokenSecret is the HS256 secret of the suite's private deployment.
const tokenSecret = "chaos-suite-secret-chaos-suite-secret-0123"

// webhookSecret signs the payment webhooks of the suite's deployment.
const webhookSecret = "chaos-suite-webhook-secret-0123456789"

// devIntentSecret signs the development provider's intents; every booking
// service of the suite shares it, as a deployment's do (ADR 0027).
const devIntentSecret = "chaos-suite-dev-intent-secret-0123456789"

// regions the fault suite deploys: two booking services so that one region
// keeps serving while the other is killed.
var regions = []string{"us-east", "eu-west"}

// stackOptions shape a deployment; the zero value is the fault suite's.
type stackOptions struct {
	// regions get a booking service each (default: regions).
	regions []string
	// routers are the regions that get a router each (default: us-east).
	routers []string
	// noReadModel leaves the read model out.
	noReadModel bool
}

// stack is the whole platform of one run.
type stack struct {
	root, bin, logs string
	regions         []string

	pg      *pgCluster
	nats    *natsNode
	redis   string // redis-server address (direct)
	prox    *proxies
	db      *postgres.DB // direct, for checks (never through a proxy)
	tokens  *auth.Tokens
	admin   string
	booking map[string]*proc // by region
	urls    map[string]string
	router  *proc
	rm      *proc
	// routerURL is where clients send every request: the first router.
	routerURL string
	// routers and routerURLs by region (the first one is router).
	routers    map[string]*proc
	routerURLs map[string]string
	pgProxies  []string // proxies in front of PostgreSQL
	// walkPairs are the walk hotels (seedWalks); caughtWalks the stays the
	// kill-walk fault caught mid-saga.
	walkPairs   []*walkPair
	caughtWalks []string
}

// bookingProxy names the PostgreSQL proxy a region's booking service uses:
// us-east has its own so that the relay-kill fault can slow only it.
func bookingProxy(region string) string {
	if region == "us-east" {
		return "pg-us-east"
	}
	return "pg"
}

func startStack(t *testing.T, runDir string, o stackOptions) *stack {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.regions) == 0 {
		o.regions = regions
	}
	if len(o.routers) == 0 {
		o.routers = []string{"us-east"}
	}
	s := &stack{root: root, bin: t.TempDir(), logs: filepath.Join(runDir, "logs"), regions: o.regions,
		booking: map[string]*proc{}, urls: map[string]string{}, routers: map[string]*proc{}, routerURLs: map[string]string{}}
	if err := os.MkdirAll(s.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	s.pg = startPostgres(t)
	s.redis = startRedis(t)
	s.nats = startNATS(t)
	buildBinaries(t, root, s.bin)

	s.prox = newProxies(t)
	pgAddr := s.prox.add(t, "pg", s.pg.addr())
	pgEast := s.prox.add(t, "pg-us-east", s.pg.addr())
	natsAddr := s.prox.add(t, "nats", s.nats.addr())
	redisAddr := s.prox.add(t, "redis", s.redis)
	s.pgProxies = []string{"pg", "pg-us-east"}
	dbURL := func(addr string) string {
		return fmt.Sprintf("postgres://berth@%s/berth?sslmode=disable&connect_timeout=5", addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := runBin(ctx, filepath.Join(s.bin, "booking"), []string{"BERTH_DATABASE_URL=" + s.pg.url("berth")}, "migrate"); err != nil {
		t.Fatalf("booking migrate: %v\n%s", err, out)
	}
	s.db, err = postgres.Open(ctx, s.pg.url("berth"), postgres.Options{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.db.Close)
	dbtest.Register(t, s.db, s.pg.url("berth"))
	s.tokens, err = auth.New(tokenSecret)
	if err != nil {
		t.Fatal(err)
	}
	s.admin, err = s.tokens.Mint(berth.Principal{Subject: "chaos-admin", Role: berth.RoleAdmin}, 6*time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	common := []string{
		"BERTH_TOKEN_SECRET=" + tokenSecret,
		"BERTH_NATS_URL=nats://" + natsAddr,
		"BERTH_REDIS_URL=redis://" + redisAddr + "/0",
		"BERTH_LOG_FORMAT=text",
		"BERTH_SHUTDOWN_TIMEOUT=2s",
	}
	var bookingURLs []string
	for _, r := range s.regions {
		port := freePort(t)
		s.urls[r] = fmt.Sprintf("http://127.0.0.1:%d", port)
		bookingURLs = append(bookingURLs, r+"="+s.urls[r])
		proxyAddr := pgAddr
		if bookingProxy(r) == "pg-us-east" {
			proxyAddr = pgEast
		}
		s.booking[r] = &proc{
			name: "booking-" + r, bin: filepath.Join(s.bin, "booking"),
			args: []string{"serve", "--region", r, "--addr", fmt.Sprintf("127.0.0.1:%d", port)},
			// The development payment provider with its pay endpoint: prepaid
			// appointments are paid as a patient would, and the webhook confirms.
			env: append([]string{"BERTH_DATABASE_URL=" + dbURL(proxyAddr), "BERTH_HOLD_TTL=30m", "BERTH_SWEEP_INTERVAL=2s",
				"BERTH_PAYMENT_PROVIDER=dev", "BERTH_DEV_PAYMENTS=on", "BERTH_WEBHOOK_SECRET=" + webhookSecret,
				"BERTH_DEV_INTENT_SECRET=" + devIntentSecret,
				"BERTH_WALK_RESUME_AFTER=" + walkResumeAfter.String()}, common...),
			logPath: filepath.Join(s.logs, "booking-"+r+".log"), health: s.urls[r] + "/readyz",
		}
	}
	rmPort := freePort(t)
	rmURL := fmt.Sprintf("http://127.0.0.1:%d", rmPort)
	s.rm = &proc{
		name: "readmodel", bin: filepath.Join(s.bin, "readmodel"), args: []string{"serve"},
		env: append([]string{"BERTH_DATABASE_URL=" + dbURL(pgAddr), "BERTH_READMODEL_ADDR=" + strings.TrimPrefix(rmURL, "http://"),
			"BERTH_NOTIFY_SENDER=none"}, common...),
		logPath: filepath.Join(s.logs, "readmodel.log"), health: rmURL + "/healthz",
	}
	all := []*proc{}
	for _, r := range s.regions {
		all = append(all, s.booking[r])
	}
	if !o.noReadModel {
		all = append(all, s.rm)
	}
	for _, r := range o.routers {
		port := freePort(t)
		s.routerURLs[r] = fmt.Sprintf("http://127.0.0.1:%d", port)
		s.routers[r] = &proc{
			name: "router-" + r, bin: filepath.Join(s.bin, "router"), args: []string{"serve", "--region", r},
			env: append([]string{"BERTH_DATABASE_URL=" + dbURL(pgAddr), "BERTH_HTTP_ADDR=" + strings.TrimPrefix(s.routerURLs[r], "http://"),
				"BERTH_BOOKING_URLS=" + strings.Join(bookingURLs, ","), "BERTH_READMODEL_URL=" + rmURL,
				"BERTH_DIRECTORY_REFRESH=2s"}, common...),
			logPath: filepath.Join(s.logs, "router-"+r+".log"), health: s.routerURLs[r] + "/readyz",
		}
		all = append(all, s.routers[r])
	}
	s.router, s.routerURL = s.routers[o.routers[0]], s.routerURLs[o.routers[0]]
	for _, p := range all {
		t.Cleanup(p.kill)
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range all {
		if err := p.waitReady(90 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// hotel is a seeded hotel with one room type.
type hotel struct {
	ID, RoomTypeID, Region string
	Hot                    bool // few rooms: sells out early
}

// seed creates, through each region's booking service, one "hot" hotel
// per region with hotRooms rooms (it sells out: the 409 path and the
// sell-limit boundary stay busy) and perRegion hotels with rooms rooms (they
// never sell out, so a failing hold always means a fault), each with one
// room type over nights [from, to).
func (s *stack) seed(t *testing.T, perRegion, rooms, hotRooms int, from, to string) []hotel {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	post := func(method, url string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, url, strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer "+s.admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %v", method, url, resp.StatusCode, m)
		}
		return m
	}
	var out []hotel
	for _, r := range s.regions {
		base := s.urls[r]
		for i := 0; i <= perRegion; i++ {
			n := rooms
			if i == 0 {
				n = hotRooms
			}
			h := post("POST", base+"/v1/hotels", map[string]any{"name": fmt.Sprintf("Chaos %s %d", r, i), "city": "Lisbon",
				"country": "PT", "timezone": "Europe/Lisbon", "home_region": r})
			id, _ := h["hotel_id"].(string)
			rt := post("POST", base+"/v1/hotels/"+id+"/room-types", map[string]any{"name": "Double", "max_guests": 2,
				"price_cents": 12000, "currency": "EUR", "overbooking_pct": 0})
			rtID, _ := rt["room_type_id"].(string)
			post("PUT", base+"/v1/hotels/"+id+"/room-types/"+rtID+"/inventory", map[string]any{"from": from, "to": to, "total_rooms": n})
			out = append(out, hotel{ID: id, RoomTypeID: rtID, Region: r, Hot: i == 0})
		}
	}
	return out
}

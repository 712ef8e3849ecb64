package scenario

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A short flash sale against a real booking server on a fresh database:
// exactly K winners among N, and the audit passes.
func TestFlashSaleEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnv(t)
	r, err := e.RunFlashSale(context.Background(), FlashSale{Clients: 40, Rooms: 3, Load: Load{Rate: 400, Workers: 16}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Figures["winners"] != 3 {
		t.Fatalf("winners %v, want 3", r.Figures["winners"])
	}
	audited := false
	for _, c := range r.Checks {
		if !c.OK {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
		if strings.HasPrefix(c.Name, "inventory:") && !c.Skipped {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no inventory audit ran: %+v", r.Checks)
	}
	if r.Ops["hold_lost"].Outcomes["sold_out"] != 37 {
		t.Errorf("losers: %v", r.Ops["hold_lost"].Outcomes)
	}
}

// startEnv starts a booking server on a fresh database and returns the
// scenario environment that drives it (a client of its one region) and
// audits it (the database, plain and through the store).
func startEnv(t *testing.T) *Env {
	t.Helper()
	return startEnvWith(t, bookingtest.Options{})
}

// startEnvWith is startEnv with server options (e.g. the clinic routes).
func startEnvWith(t *testing.T, opts bookingtest.Options) *Env {
	t.Helper()
	return startEnvFront(t, opts, nil)
}

// startEnvFront is startEnvWith with the client's requests going through
// front (given the booking server's handler as a reverse proxy) when set.
func startEnvFront(t *testing.T, opts bookingtest.Options, front func(http.Handler) http.Handler) *Env {
	t.Helper()
	env := bookingtest.Start(t, opts)
	target := env.URL
	if front != nil {
		u, err := url.Parse(env.URL)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(front(httputil.NewSingleHostReverseProxy(u)))
		t.Cleanup(srv.Close)
		target = srv.URL
	}
	tg, err := client.ParseTargets("us-east=" + target)
	if err != nil {
		t.Fatal(err)
	}
	tg.Kind = map[string]string{"us-east": "booking"}
	cl, err := client.New(tg, bookingtest.Secret, "", "", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	pool, err := pgxpool.New(context.Background(), env.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &Env{Client: cl, DB: pool, Store: env.DB, Log: io.Discard, Quiet: true}
}

// With --connected every client's connection is open before the sale (the
// sale page's reads, each on a connection of its own, up to the sale's
// workers) and the sale's holds re-use them: the sale dials none.
func TestFlashSaleConnectedClientsReuseThePageConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnv(t)
	dials := e.Client.Dials()
	r, err := e.RunFlashSale(context.Background(), FlashSale{Clients: 30, Rooms: 2, Connected: true,
		Load: Load{Rate: 400, Workers: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Figures["sale_page_ms"]; !ok {
		t.Errorf("no sale_page_ms figure: %v", r.Figures)
	}
	// The seeding's connection, then the page's 8.
	if got := e.Client.Dials() - dials; got < 8 {
		t.Errorf("%d connections opened in all, want at least the page's 8", got)
	}
	if got := r.Figures["sale_dials"]; got != 0 {
		t.Errorf("the sale dialled %v connection(s), want 0: the page's were open", got)
	}
	if r.Figures["winners"] != 2 {
		t.Errorf("winners %v, want 2", r.Figures["winners"])
	}
	checksPass(t, r)
}

// With processes to account, a sale's report holds their CPU over the sale
// alone, per request: the generator's own row and the database's backends.
func TestFlashSaleAccountsTheSalesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnv(t)
	e.CPUPostgres = true
	r, err := e.RunFlashSale(context.Background(), FlashSale{Clients: 40, Rooms: 1, Load: Load{Rate: 400, Workers: 16}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.CPU) != 1 || r.CPU[0].Op != "hold" || r.CPU[0].Ops != 40 {
		t.Fatalf("cpu tables %+v, want one of op hold over 40 requests", r.CPU)
	}
	rows := map[string]bool{}
	for _, row := range r.CPU[0].Rows {
		rows[row.Name] = true
	}
	if !rows[loadGenerator] {
		t.Errorf("no row of the generator: %+v", r.CPU[0].Rows)
	}
	backends := false
	for name := range rows {
		backends = backends || strings.HasPrefix(name, "postgres backends")
	}
	if !backends {
		t.Errorf("no row of the database's backends: %+v", r.CPU[0].Rows)
	}
	if _, ok := r.Figures["cpu_ms_per_hold"]; !ok {
		t.Errorf("no cpu_ms_per_hold figure: %v", r.Figures)
	}
}

// checksPass fails t for every check of r that did not pass (a skipped
// check is listed with OK true).
func checksPass(t *testing.T, r *report.Report) {
	t.Helper()
	for _, c := range r.Checks {
		if !c.OK {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
	}
}

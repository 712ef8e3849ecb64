package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
)

// clinicEnv is a booking server with the clinic routes on a fresh database.
type clinicEnv struct {
	*bookingtest.Env
	Clinics *postgres.ClinicStore
}

func startClinics(t testing.TB, holdTTL time.Duration) *clinicEnv {
	t.Helper()
	return startClinicsWith(t, holdTTL, bookingtest.Options{})
}

// startDayOf24 starts a clinics environment with one clinic (Madrid), one
// doctor (20-minute slots, 07:00–15:00, no prepayment) and that doctor's
// day in two weeks materialized: its 24 slots, in order. The read hint of
// a full window or a taken slot lasts a minute (1 s in production), so that
// the tests of the reads' refusals do not depend on how fast the machine
// runs them.
func startDayOf24(t *testing.T) (e *clinicEnv, clinic, doctor string, slots []slotView) {
	t.Helper()
	e, clinic, doctor, slots = startDayOf24With(t, bookingtest.Options{})
	e.Clinics.SetReadHintTTL(time.Minute)
	return e, clinic, doctor, slots
}

// startDayOf24With is startDayOf24's day on a service started with opts
// (e.g. a statement recorder), the read hints at their default.
func startDayOf24With(t *testing.T, opts bookingtest.Options) (e *clinicEnv, clinic, doctor string, slots []slotView) {
	t.Helper()
	e = startClinicsWith(t, 0, opts)
	clinic = e.seedClinic("Europe/Madrid")
	doctor = e.seedDoctor(clinic, 20, false, allWeek("07:00", "15:00"))
	day := bookingtest.Date(14)
	e.materialize(clinic, day, bookingtest.Date(15))
	slots = e.slots(clinic, doctor, day)
	if len(slots) != 24 {
		t.Fatalf("%d slots, want 24", len(slots))
	}
	return e, clinic, doctor, slots
}

// startClinicsWith is startClinics with more options (e.g. guest limits).
func startClinicsWith(t testing.TB, holdTTL time.Duration, opts bookingtest.Options) *clinicEnv {
	t.Helper()
	var cs *postgres.ClinicStore
	env := bookingtest.Start(t, bookingtest.Options{GuestLimits: opts.GuestLimits, DB: opts.DB, Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		cs = postgres.NewClinicStore(st, holdTTL)
		cfg.Clinics = cs
		cfg.ClinicWaitlist = cs
	}})
	return &clinicEnv{Env: env, Clinics: cs}
}

type window = map[string]any

// allWeek is a template of every weekday from start to end.
func allWeek(start, end string) []window {
	var w []window
	for d := 1; d <= 7; d++ {
		w = append(w, window{"weekday": d, "start": start, "end": end})
	}
	return w
}

// seedPricedDoctor creates a doctor who requires prepayment of price.
func (e *clinicEnv) seedPricedDoctor(clinicID string, slotMinutes int, price int64, currency string) string {
	e.T.Helper()
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/doctors", Token: e.Admin(),
		Body: map[string]any{"name": "Dr. Prepaid", "slot_minutes": slotMinutes, "prepay_required": true,
			"price_cents": price, "currency": currency, "weekly": allWeek("08:00", "12:00")}})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create doctor: %d %s", r.Status, r.Body)
	}
	return r.JSON()["doctor_id"].(string)
}

// seedClinic creates a clinic in tz homed in the server's region.
func (e *clinicEnv) seedClinic(tz string) string {
	e.T.Helper()
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics", Token: e.Admin(),
		Body: map[string]any{"name": "Test Clinic", "timezone": tz, "home_region": e.Store.Region()}})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create clinic: %d %s", r.Status, r.Body)
	}
	return r.JSON()["clinic_id"].(string)
}

func (e *clinicEnv) seedDoctor(clinicID string, slotMinutes int, prepay bool, weekly []window) string {
	e.T.Helper()
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/doctors", Token: e.Admin(),
		Body: map[string]any{"name": "Dr. Test", "slot_minutes": slotMinutes, "prepay_required": prepay, "weekly": weekly}})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create doctor: %d %s", r.Status, r.Body)
	}
	return r.JSON()["doctor_id"].(string)
}

func (e *clinicEnv) materialize(clinicID, from, to string) int {
	e.T.Helper()
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/slots/materialize", Token: e.Admin(),
		Body: map[string]any{"from": from, "to": to}})
	if r.Status != http.StatusOK {
		e.T.Fatalf("materialize: %d %s", r.Status, r.Body)
	}
	return int(r.JSON()["created"].(float64))
}

type slotView struct {
	ID, Status       string
	StartsAt, EndsAt time.Time
}

func (e *clinicEnv) slots(clinicID, doctorID, date string) []slotView {
	e.T.Helper()
	r := e.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinicID + "/doctors/" + doctorID + "/slots?date=" + date})
	if r.Status != http.StatusOK {
		e.T.Fatalf("list slots: %d %s", r.Status, r.Body)
	}
	var out []slotView
	for _, v := range r.JSON()["slots"].([]any) {
		m := v.(map[string]any)
		s := slotView{ID: m["slot_id"].(string), Status: m["status"].(string)}
		s.StartsAt, _ = time.Parse(time.RFC3339, m["starts_at"].(string))
		s.EndsAt, _ = time.Parse(time.RFC3339, m["ends_at"].(string))
		out = append(out, s)
	}
	return out
}

func (e *clinicEnv) guest(id string) string { return e.Token(id, berth.RoleGuest) }

// hold asks for a slot as the guest themselves.
func (e *clinicEnv) hold(ctx context.Context, clinicID, guestID string, body map[string]any) (bookingtest.Response, error) {
	body["guest_id"] = guestID
	return e.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments",
		Token: e.guest(guestID), IdemKey: bookingtest.NewKey(), Body: body})
}

// queryInt runs a counting query against the test database.
func (e *clinicEnv) queryInt(sql string, args ...any) int {
	e.T.Helper()
	var n int64
	if err := dbtest.SQL(e.DB).QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.T.Fatalf("%s: %v", sql, err)
	}
	return int(n)
}

// checkSlotInvariant asserts, from the database, with the audit of
// `booking verify`: no slot has two live appointments, every live
// appointment is exactly the one its slot names, and every occupied slot
// names a live appointment.
func (e *clinicEnv) checkSlotInvariant(clinicID string) {
	e.T.Helper()
	e.AssertSlots(clinicID)
}

// herd is requests released together, each on its own goroutine (the
// clinic tests' races): add queues one under a tag, run sends them all at
// once and returns every answer, in the order added.
type herd struct {
	tags []string
	reqs []bookingtest.Request
}

// herdAnswer is one answer of a herd: its tag, its place in the order
// added, and what came back.
type herdAnswer struct {
	tag string
	i   int
	r   bookingtest.Response
	err error
}

func (h *herd) add(tag string, req bookingtest.Request) {
	h.tags, h.reqs = append(h.tags, tag), append(h.reqs, req)
}

func (h *herd) run(e *clinicEnv) []herdAnswer {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		out   = make([]herdAnswer, len(h.reqs))
	)
	for i, req := range h.reqs {
		wg.Go(func() {
			<-start
			r, err := e.Try(context.Background(), req)
			out[i] = herdAnswer{h.tags[i], i, r, err}
		})
	}
	close(start)
	wg.Wait()
	return out
}

// checkSlotTaken fails t unless r is a 409 slot_taken with alternatives,
// none of them the slot asked for.
func checkSlotTaken(t *testing.T, r bookingtest.Response, slotID string) {
	t.Helper()
	alts, _ := r.JSON()["alternatives"].([]any)
	if r.Status != http.StatusConflict || r.Code() != "slot_taken" || len(alts) == 0 {
		t.Errorf("a hold of a taken slot: %d %s, want 409 slot_taken with alternatives", r.Status, r.Body)
	}
	for _, a := range alts {
		if a.(map[string]any)["slot_id"] == slotID {
			t.Errorf("the taken slot offered as its own alternative: %s", r.Body)
		}
	}
}

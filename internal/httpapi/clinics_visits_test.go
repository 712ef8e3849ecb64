package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// daytimeZone returns a zone in which it is now between 03:00 and 18:00, so
// a test's clinic has a good part of its local day still ahead and the
// day does not turn while the test runs.
func daytimeZone(t *testing.T) *time.Location {
	t.Helper()
	for _, name := range []string{"Pacific/Kiritimati", "Asia/Tokyo", "Europe/Berlin", "America/New_York", "Pacific/Honolulu", "Pacific/Pago_Pago"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		if h := time.Now().In(loc).Hour(); h >= 3 && h < 18 {
			return loc
		}
	}
	t.Fatal("no zone in daytime (the list spans every hour)")
	return nil
}

// visitClinic is a clinic with a doctor seeing patients every five minutes
// all day, no prepayment, slots made for yesterday to the day after
// tomorrow (UTC), in a zone where it is daytime.
type visitClinic struct {
	*clinicEnv
	clinicID, doctorID string
	loc                *time.Location
}

func startVisitClinic(t *testing.T) *visitClinic {
	t.Helper()
	e := startClinics(t, 5*time.Minute)
	loc := daytimeZone(t)
	v := &visitClinic{clinicEnv: e, loc: loc, clinicID: e.seedClinic(loc.String())}
	v.doctorID = e.seedDoctor(v.clinicID, 5, false, allWeek("00:00", "24:00"))
	e.materialize(v.clinicID, bookingtest.Date(-1), bookingtest.Date(3))
	return v
}

// openToday lists the doctor's open slots of the clinic's today that have not begun.
func (v *visitClinic) openToday(doctorID string) []slotView {
	v.T.Helper()
	var out []slotView
	for _, s := range v.slots(v.clinicID, doctorID, time.Now().In(v.loc).Format(time.DateOnly)) {
		if s.Status == "open" && s.StartsAt.After(time.Now().Add(time.Minute)) {
			out = append(out, s)
		}
	}
	return out
}

// book makes a confirmed appointment (the doctor needs no prepayment) of
// guest on slot, with contact data.
func (v *visitClinic) book(guest, slotID string) map[string]any {
	v.T.Helper()
	r := v.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + v.clinicID + "/appointments", Token: v.guest(guest),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": guest, "slot_id": slotID,
			"contact_email": guest + "@example.test", "contact_phone": "+4915100000000"}})
	if r.Status != http.StatusCreated || r.JSON()["status"] != "confirmed" {
		v.T.Fatalf("book: %d %s", r.Status, r.Body)
	}
	return r.JSON()
}

func (v *visitClinic) desk(action, apptID, key string) bookingtest.Response {
	v.T.Helper()
	return v.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + v.clinicID + "/appointments/" + apptID + "/" + action,
		Token: v.Token("desk-1", "staff", v.clinicID), IdemKey: key})
}

func (v *visitClinic) status(apptID string) string {
	v.T.Helper()
	var s string
	if err := dbtest.SQL(v.DB).QueryRow(context.Background(), `SELECT status FROM appointments WHERE appointment_id = $1`, apptID).Scan(&s); err != nil {
		v.T.Fatal(err)
	}
	return s
}

func wantConflict(t *testing.T, what string, r bookingtest.Response) {
	t.Helper()
	if r.Status != http.StatusConflict || r.Code() != "invalid_state" {
		t.Fatalf("%s: got %d %s, want 409 invalid_state", what, r.Status, r.Body)
	}
}

// The reception's path through a visit: arrived, then completed, each
// replayable by its key and harmless when repeated; the wrong order and the
// wrong day refused; the day list shows status and contact data; the slot
// stays booked throughout, and every step is an event.
func TestVisitArriveAndComplete(t *testing.T) {
	t.Parallel()
	v := startVisitClinic(t)
	open := v.openToday(v.doctorID)
	if len(open) < 2 {
		t.Fatalf("only %d open slots today", len(open))
	}
	a := v.book("pat", open[0].ID)
	id := a["appointment_id"].(string)

	wantConflict(t, "complete before arriving", v.desk("complete", id, bookingtest.NewKey()))
	key := bookingtest.NewKey()
	r := v.desk("arrive", id, key)
	if r.Status != http.StatusOK || r.JSON()["status"] != "arrived" || r.JSON()["version"].(float64) != a["version"].(float64)+1 {
		t.Fatalf("arrive: %d %s", r.Status, r.Body)
	}
	if again := v.desk("arrive", id, key); again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(r.Body) {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	if again := v.desk("arrive", id, bookingtest.NewKey()); again.Status != http.StatusOK || again.JSON()["version"] != r.JSON()["version"] {
		t.Fatalf("arrive again: %d %s", again.Status, again.Body)
	}
	wantConflict(t, "cancel an arrived appointment", v.Do(bookingtest.Request{Method: "POST",
		Path: "/v1/clinics/" + v.clinicID + "/appointments/" + id + "/cancel", Token: v.Admin(), IdemKey: bookingtest.NewKey()}))

	day := time.Now().In(v.loc).Format(time.DateOnly)
	list := v.Do(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + v.clinicID + "/doctors/" + v.doctorID + "/appointments?date=" + day,
		Token: v.Token("desk-1", "staff", v.clinicID)})
	if list.Status != http.StatusOK {
		t.Fatalf("day list: %d %s", list.Status, list.Body)
	}
	var body struct {
		Date         string                    `json:"date"`
		Appointments []appointment.Appointment `json:"appointments"`
	}
	if err := json.Unmarshal(list.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Date != day || len(body.Appointments) != 1 || body.Appointments[0].ID != id || body.Appointments[0].Status != appointment.StatusArrived ||
		body.Appointments[0].ContactEmail != "pat@example.test" || body.Appointments[0].ContactPhone != "+4915100000000" {
		t.Fatalf("day list: %s", list.Body)
	}

	if r := v.desk("complete", id, bookingtest.NewKey()); r.Status != http.StatusOK || r.JSON()["status"] != "completed" {
		t.Fatalf("complete: %d %s", r.Status, r.Body)
	}
	if r := v.desk("complete", id, bookingtest.NewKey()); r.Status != http.StatusOK || r.JSON()["status"] != "completed" {
		t.Fatalf("complete again: %d %s", r.Status, r.Body)
	}
	wantConflict(t, "arrive after completing", v.desk("arrive", id, bookingtest.NewKey()))

	// Tomorrow's patient cannot arrive today.
	tomorrow := time.Now().In(v.loc).AddDate(0, 0, 1).Format(time.DateOnly)
	later := v.book("pat2", v.slots(v.clinicID, v.doctorID, tomorrow)[10].ID)
	wantConflict(t, "arrive the day before", v.desk("arrive", later["appointment_id"].(string), bookingtest.NewKey()))

	for _, s := range v.slots(v.clinicID, v.doctorID, day) {
		if s.ID == open[0].ID && s.Status != "booked" {
			t.Fatalf("the visited slot shows %s", s.Status)
		}
	}
	for typ, want := range map[string]int{"appointment.arrived": 1, "appointment.completed": 1} {
		if n := v.queryInt(`SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND event_type = $2`, id, typ); n != want {
			t.Errorf("%d %s events, want %d", n, typ, want)
		}
	}
	v.checkSlotInvariant(v.clinicID)
}

// Bad input and wrong callers change nothing: no key, a body, an unknown
// appointment, a bad date.
func TestVisitInput(t *testing.T) {
	t.Parallel()
	v := startVisitClinic(t)
	id := v.book("pat", v.openToday(v.doctorID)[0].ID)["appointment_id"].(string)
	staff := v.Token("desk-1", "staff", v.clinicID)
	base := "/v1/clinics/" + v.clinicID
	for _, tc := range []struct {
		name   string
		req    bookingtest.Request
		status int
		code   string
	}{
		{"no key", bookingtest.Request{Method: "POST", Path: base + "/appointments/" + id + "/arrive", Token: staff}, 400, "idempotency_key_required"},
		{"a body", bookingtest.Request{Method: "POST", Path: base + "/appointments/" + id + "/arrive", Token: staff, IdemKey: bookingtest.NewKey(),
			Body: map[string]any{"status": "completed"}}, 400, "invalid_request"},
		{"unknown appointment", bookingtest.Request{Method: "POST", Path: base + "/appointments/" + "00000000-0000-4000-8000-000000000000/arrive",
			Token: staff, IdemKey: bookingtest.NewKey()}, 404, "not_found"},
		{"not an id", bookingtest.Request{Method: "POST", Path: base + "/appointments/x/complete", Token: staff, IdemKey: bookingtest.NewKey()}, 404, "not_found"},
		{"the patient themselves", bookingtest.Request{Method: "POST", Path: base + "/appointments/" + id + "/arrive", Token: v.guest("pat"),
			IdemKey: bookingtest.NewKey()}, 403, "forbidden"},
		{"day list without a date", bookingtest.Request{Method: "GET", Path: base + "/doctors/" + v.doctorID + "/appointments", Token: staff}, 400, "invalid_request"},
		{"day list, bad date", bookingtest.Request{Method: "GET", Path: base + "/doctors/" + v.doctorID + "/appointments?date=2027-02-30", Token: staff}, 400, "invalid_request"},
		{"day list, unknown parameter", bookingtest.Request{Method: "GET", Path: base + "/doctors/" + v.doctorID + "/appointments?date=2027-02-03&all=1", Token: staff}, 400, "invalid_request"},
		{"day list, unknown doctor", bookingtest.Request{Method: "GET", Path: base + "/doctors/00000000-0000-4000-8000-000000000000/appointments?date=2027-02-03",
			Token: staff}, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := v.Do(tc.req)
			if r.Status != tc.status || r.Code() != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
		})
	}
	if s := v.status(id); s != "confirmed" {
		t.Fatalf("the appointment is %s after refused requests", s)
	}
}

// The no-show job: nothing before the slot's end plus the grace period,
// then exactly one mark however often it runs; the slot stays booked (its
// time is spent), a late arrival after the mark is refused, and a paid
// appointment stays charged (the event says how much).
func TestVisitNoShow(t *testing.T) {
	t.Parallel()
	v := startVisitClinic(t)
	ctx := context.Background()
	open := v.openToday(v.doctorID)
	free := v.book("pat", open[0].ID)
	freeID := free["appointment_id"].(string)

	// A prepaid appointment, paid by the patient online.
	paidDoc := v.seedPricedDoctorAllDay(v.clinicID, 4500, "EUR")
	v.materialize(v.clinicID, bookingtest.Date(-1), bookingtest.Date(3))
	hold := v.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + v.clinicID + "/appointments", Token: v.guest("payer"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "payer", "slot_id": v.openToday(paidDoc)[0].ID}})
	if hold.Status != http.StatusCreated {
		t.Fatalf("hold: %d %s", hold.Status, hold.Body)
	}
	paidID := hold.JSON()["appointment_id"].(string)
	if r := v.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + v.clinicID + "/appointments/" + paidID + "/confirm",
		Token: v.guest("payer"), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": v.PayHold(hold)}}); r.Status != http.StatusOK {
		t.Fatalf("confirm: %d %s", r.Status, r.Body)
	}

	grace := 20 * time.Minute
	opts := postgres.VisitNoShowOptions{Grace: grace}
	if n, err := v.Clinics.MarkNoShows(ctx, time.Now(), opts); err != nil || n != 0 {
		t.Fatalf("before the slots ended: marked %d (%v)", n, err)
	}
	ends, _ := time.Parse(time.RFC3339, free["ends_at"].(string))
	if n, err := v.Clinics.MarkNoShows(ctx, ends.Add(grace-time.Second), opts); err != nil || n != 0 {
		t.Fatalf("within the grace period: marked %d (%v)", n, err)
	}
	later := time.Now().Add(24 * time.Hour)
	if n, err := v.Clinics.MarkNoShows(ctx, later, opts); err != nil || n != 2 {
		t.Fatalf("after: marked %d (%v), want 2", n, err)
	}
	if n, err := v.Clinics.MarkNoShows(ctx, later, opts); err != nil || n != 0 {
		t.Fatalf("second run: marked %d (%v)", n, err)
	}
	for _, id := range []string{freeID, paidID} {
		if s := v.status(id); s != "no_show" {
			t.Fatalf("%s is %s", id, s)
		}
		wantConflict(t, "a late arrival after the no-show", v.desk("arrive", id, bookingtest.NewKey()))
	}
	charge := func(id string) appointment.NoShowCharge {
		var data []byte
		if err := dbtest.SQL(v.DB).QueryRow(ctx, `SELECT payload FROM outbox WHERE aggregate_id = $1 AND event_type = 'appointment.no_show'`,
			id).Scan(&data); err != nil {
			t.Fatalf("no-show event of %s: %v", id, err)
		}
		var e appointment.NoShowEvent
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatal(err)
		}
		if e.ID != id || e.Status != appointment.StatusNoShow {
			t.Fatalf("no-show event carries %+v", e.Appointment)
		}
		return e.Charge
	}
	if c := charge(freeID); c.Charged || c.AmountCents != 0 {
		t.Fatalf("an appointment without prepayment was charged: %+v", c)
	}
	if c := charge(paidID); !c.Charged || c.AmountCents != 4500 || c.Currency != "EUR" || c.PaymentRef == "" {
		t.Fatalf("a paid no-show: %+v, want the price kept", c)
	}
	if n := v.queryInt(`SELECT count(*) FROM outbox WHERE event_type = 'refund_requested'`); n != 0 {
		t.Fatalf("%d refunds requested for a no-show", n)
	}
	for _, s := range v.slots(v.clinicID, v.doctorID, time.Now().In(v.loc).Format(time.DateOnly)) {
		if s.ID == open[0].ID && s.Status != "booked" {
			t.Fatalf("a no-show's slot shows %s: it went back to sale", s.Status)
		}
	}
	v.checkSlotInvariant(v.clinicID)
}

// seedPricedDoctorAllDay is a prepaid doctor with a price, seeing patients
// every five minutes all day.
func (e *clinicEnv) seedPricedDoctorAllDay(clinicID string, price int64, currency string) string {
	e.T.Helper()
	r := e.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/doctors", Token: e.Admin(),
		Body: map[string]any{"name": "Dr. Prepaid", "slot_minutes": 5, "prepay_required": true,
			"price_cents": price, "currency": currency, "weekly": allWeek("00:00", "24:00")}})
	if r.Status != http.StatusCreated {
		e.T.Fatalf("create doctor: %d %s", r.Status, r.Body)
	}
	return r.JSON()["doctor_id"].(string)
}

// A late arrival racing the no-show job, against the real database: the
// reception marks patients arrived (three clerks) while three booking
// services run the job at once, at an instant past every slot's grace
// period. Each appointment ends in exactly one outcome — arrived if and
// only if its arrival was answered 200, no_show otherwise — with one
// event for it, and the slots stay as the audit wants them.
func TestVisitArrivalRacesNoShow(t *testing.T) {
	t.Parallel()
	v := startVisitClinic(t)
	ctx := context.Background()
	open := v.openToday(v.doctorID)
	const patients = 24
	if len(open) < patients {
		t.Fatalf("only %d slots left today in %s", len(open), v.loc) // daytimeZone leaves six hours
	}
	ids := make([]string, patients)
	for i := range ids {
		ids[i] = v.book(fmt.Sprintf("p%02d", i), open[i].ID)["appointment_id"].(string)
	}
	// The job walks the appointments by slot end; the clerks take them from
	// the other end, so the two meet in the middle and race there.
	queue := make(chan string, patients)
	for i := range ids {
		queue <- ids[patients-1-i]
	}
	close(queue)
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		arrived = map[string]bool{}
		marked  int
		jobErr  error
	)
	start := make(chan struct{})
	staff := v.Token("desk-1", "staff", v.clinicID)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for id := range queue {
				r, err := v.Try(ctx, bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + v.clinicID + "/appointments/" + id + "/arrive",
					Token: staff, IdemKey: bookingtest.NewKey()})
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("arrive: %v", err)
				case r.Status == http.StatusOK:
					arrived[id] = true
				case r.Status != http.StatusConflict || r.Code() != "invalid_state":
					t.Errorf("arrive: %d %s", r.Status, r.Body)
				}
				mu.Unlock()
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			n, err := v.Clinics.MarkNoShows(ctx, time.Now().Add(24*time.Hour), postgres.VisitNoShowOptions{Grace: time.Minute})
			mu.Lock()
			marked += n
			if err != nil {
				jobErr = err
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if jobErr != nil {
		t.Fatal(jobErr)
	}
	if len(arrived)+marked != patients {
		t.Fatalf("%d arrived + %d marked no-show = %d, want %d", len(arrived), marked, len(arrived)+marked, patients)
	}
	for _, id := range ids {
		want := map[bool]string{true: "arrived", false: "no_show"}[arrived[id]]
		if s := v.status(id); s != want {
			t.Errorf("appointment %s is %s, the answers said %s", id, s, want)
		}
		arrivedEvents := v.queryInt(`SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND event_type = 'appointment.arrived'`, id)
		noShowEvents := v.queryInt(`SELECT count(*) FROM outbox WHERE aggregate_id = $1 AND event_type = 'appointment.no_show'`, id)
		if arrivedEvents+noShowEvents != 1 || (arrivedEvents == 1) != arrived[id] {
			t.Errorf("appointment %s: %d arrived and %d no-show events", id, arrivedEvents, noShowEvents)
		}
	}
	t.Logf("%d arrived, %d no-shows", len(arrived), marked)
	v.checkSlotInvariant(v.clinicID)
}

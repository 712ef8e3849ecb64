package httpapi_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/google/uuid"
)

// The warm-up plans what an appointment hold sends (ADR 0025): a named
// slot won, then refused by its transaction and by a read (ADR 0011), a
// replay of the winner's key, a window won, and a window refused by a read
// and by its transaction. A new statement on that path fails this test
// until postgres.AppointmentHoldStatements names it.
func TestWarmCoversTheAppointmentHoldPath(t *testing.T) {
	rec := &dbtest.TripRecorder{}
	e, clinic, doctor, slots := startDayOf24With(t, bookingtest.Options{DB: postgres.Options{Tracer: rec}})
	path := "/v1/clinics/" + clinic + "/appointments"
	hold := func(guest, key string, body map[string]any, want int) {
		t.Helper()
		body["guest_id"] = guest
		if r := e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: key, Body: body}); r.Status != want {
			t.Fatalf("hold %v: %d %s, want %d", body, r.Status, r.Body, want)
		}
	}
	named := func(i int) map[string]any { return map[string]any{"slot_id": slots[i].ID} }
	inWindow := func(from, to int) map[string]any {
		return map[string]any{"doctor_id": doctor, "window_start": slots[from].StartsAt, "window_end": slots[to].EndsAt}
	}
	trips := rec.Record(func() {
		key := bookingtest.NewKey()
		hold("g1", key, named(0), http.StatusCreated)
		hold("g2", bookingtest.NewKey(), named(0), http.StatusConflict) // its transaction refuses it
		hold("g3", bookingtest.NewKey(), named(0), http.StatusConflict) // a read refuses it
		hold("g1", key, named(0), http.StatusCreated)                   // a replay
		hold("g4", bookingtest.NewKey(), inWindow(1, 2), http.StatusCreated)
		hold("g5", bookingtest.NewKey(), inWindow(1, 2), http.StatusCreated)
		hold("g6", bookingtest.NewKey(), inWindow(0, 2), http.StatusConflict) // a full window: its transaction refuses it
		hold("g7", bookingtest.NewKey(), inWindow(0, 2), http.StatusConflict) // and now a read (ADR 0011)
		hold("g4", bookingtest.NewKey(), inWindow(3, 5), http.StatusConflict) // g4 has the doctor that day: its transaction refuses it
	})
	sent, warm := dbtest.Statements(trips), postgres.AppointmentHoldStatements()
	for _, sql := range sent {
		if !slices.Contains(warm, sql) {
			t.Errorf("an appointment hold sent a statement the warm-up does not plan (add it to postgres.AppointmentHoldStatements):\n%s", sql)
		}
	}
	for _, sql := range warm {
		if !slices.Contains(sent, sql) {
			t.Errorf("the warm-up plans a statement these holds never sent (a branch not exercised, or one gone from the path):\n%s", sql)
		}
	}
}

// TestAppointmentHoldRoundTrips counts the round trips to the database of
// the answers an opening gives most (ADR 0011): a hold of a slot that wins
// is three — the fence, the key claim and the slot's read; the guest's
// checks with the take; the new rows with the COMMIT — and a hold of a
// slot found taken a moment ago, refused by a read, is one; a window hold
// that wins is three, one refused by a read one.
func TestAppointmentHoldRoundTrips(t *testing.T) {
	rec := &dbtest.TripRecorder{}
	e, clinic, doctor, slots := startDayOf24With(t, bookingtest.Options{DB: postgres.Options{Tracer: rec}})
	path := "/v1/clinics/" + clinic + "/appointments"
	hold := func(guest string, body map[string]any, want int) [][]string {
		t.Helper()
		body["guest_id"] = guest
		var r bookingtest.Response
		trips := rec.Record(func() {
			r = e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: bookingtest.NewKey(), Body: body})
		})
		if r.Status != want {
			t.Fatalf("hold by %s: %d %s, want %d", guest, r.Status, r.Body, want)
		}
		return trips
	}
	named := func() map[string]any { return map[string]any{"slot_id": slots[0].ID} }
	if trips := hold("g1", named(), http.StatusCreated); len(trips) != 3 {
		t.Errorf("a winning hold of a slot took %d round trips, want 3:\n%s", len(trips), dbtest.Describe(trips))
	}
	hold("g2", named(), http.StatusConflict) // its transaction finds the slot taken
	if trips := hold("g3", named(), http.StatusConflict); len(trips) != 1 {
		t.Errorf("a hold of a slot found taken a moment ago took %d round trips, want 1 (a read):\n%s", len(trips), dbtest.Describe(trips))
	}
	// A window hold that wins is three: the fence, the key claim and the
	// doctor's read; the guest's checks with the take; the new rows with
	// the COMMIT. One of a window found full a moment ago is one read.
	window := func() map[string]any {
		return map[string]any{"doctor_id": doctor, "window_start": slots[1].StartsAt, "window_end": slots[1].EndsAt}
	}
	if trips := hold("g4", window(), http.StatusCreated); len(trips) != 3 {
		t.Errorf("a winning window hold took %d round trips, want 3:\n%s", len(trips), dbtest.Describe(trips))
	}
	hold("g5", window(), http.StatusConflict) // its transaction finds the window full
	if trips := hold("g6", window(), http.StatusConflict); len(trips) != 1 {
		t.Errorf("a window hold of a window found full a moment ago took %d round trips, want 1 (a read):\n%s", len(trips), dbtest.Describe(trips))
	}
}

// TestUnknownSlotIsNotFound: the slot's read travels in the transaction's
// first round trip; a hold of a slot that does not exist is still 404
// not_found, and, as before, a 404 keeps nothing with its key (it is no
// outcome of the hold: the transaction rolls back), so a retry asks again.
func TestUnknownSlotIsNotFound(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Madrid")
	req := bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinic + "/appointments", Token: e.guest("g1"),
		IdemKey: bookingtest.NewKey(), Body: map[string]any{"guest_id": "g1", "slot_id": uuid.NewString()}}
	for i := range 2 {
		if r := e.Do(req); r.Status != http.StatusNotFound || r.Code() != "not_found" || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("hold %d of an unknown slot: %d %s (Idempotent-Replayed %q), want 404 not_found, not replayed",
				i+1, r.Status, r.Body, r.Header.Get("Idempotent-Replayed"))
		}
	}
	if n := e.queryInt(`SELECT count(*) FROM idempotency_keys WHERE partition_id = $1 AND idem_key = $2`, clinic, req.IdemKey); n != 0 {
		t.Errorf("%d keys stored for a 404, want none", n)
	}
}

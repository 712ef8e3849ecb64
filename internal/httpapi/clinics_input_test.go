package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/google/uuid"
)

// TestClinicBadInput: malformed or unknown input gets a 4xx problem+json
// naming the bad field, never a 500, and changes nothing in the database.
func TestClinicBadInput(t *testing.T) {
	e := startClinics(t, 0)
	clinic := e.seedClinic("Europe/Berlin")
	doctor := e.seedDoctor(clinic, 30, true, allWeek("08:00", "12:00"))
	day := bookingtest.Date(7)
	e.materialize(clinic, day, bookingtest.Date(8))
	slots := e.slots(clinic, doctor, day)
	r, _ := e.hold(context.Background(), clinic, "gina", map[string]any{"slot_id": slots[0].ID})
	if r.Status != http.StatusCreated {
		t.Fatalf("seed hold: %d %s", r.Status, r.Body)
	}
	appt := r.JSON()["appointment_id"].(string)
	admin, gina := e.Admin(), e.guest("gina")
	base := "/v1/clinics/" + clinic
	ws := slots[0].StartsAt.Format(time.RFC3339)
	unknown := uuid.NewString()

	snapshot := func() string {
		var b strings.Builder
		for _, q := range []string{
			`SELECT count(*) FROM clinics`, `SELECT count(*) FROM doctors`, `SELECT count(*) FROM slots`,
			`SELECT count(*) FROM slots WHERE status <> 'open'`, `SELECT count(*) FROM appointments`,
			`SELECT count(*) FROM appointments WHERE status <> 'held'`, `SELECT count(*) FROM idempotency_keys`,
			`SELECT count(*) FROM outbox`, `SELECT count(*) FROM slot_audit`, `SELECT COALESCE(sum(version), 0) FROM slots`,
		} {
			b.WriteString(strings.TrimSpace(q) + "=" + strconv.Itoa(e.queryInt(q)) + ";")
		}
		return b.String()
	}
	before := snapshot()

	type tc struct {
		name, method, path, token string
		noKey                     bool
		body                      any
		contentType               string
		status                    int
		code, field               string
	}
	hold := func(body map[string]any) map[string]any { body["guest_id"] = "gina"; return body }
	doc := func(minutes int, w ...window) map[string]any {
		return map[string]any{"name": "Dr. X", "slot_minutes": minutes, "prepay_required": false, "weekly": w}
	}
	cases := []tc{
		{"unknown slot", "POST", base + "/appointments", gina, false, hold(map[string]any{"slot_id": unknown}), "", 404, "not_found", ""},
		{"slot id not a uuid", "POST", base + "/appointments", gina, false, hold(map[string]any{"slot_id": "slot-1"}), "", 404, "not_found", ""},
		{"unknown clinic", "POST", "/v1/clinics/" + unknown + "/appointments", gina, false, hold(map[string]any{"slot_id": slots[1].ID}), "", 404, "not_found", ""},
		{"clinic id not a uuid", "POST", "/v1/clinics/clinic-1/appointments", gina, false, hold(map[string]any{"slot_id": slots[1].ID}), "", 404, "not_found", ""},
		{"window hold, clinic id not a uuid", "POST", "/v1/clinics/clinic-1/appointments", gina, false,
			hold(map[string]any{"doctor_id": doctor, "window_start": ws, "window_end": slots[7].EndsAt.Format(time.RFC3339)}), "", 404, "not_found", ""},
		{"unknown doctor in window", "POST", base + "/appointments", gina, false,
			hold(map[string]any{"doctor_id": unknown, "window_start": ws, "window_end": slots[7].EndsAt.Format(time.RFC3339)}), "", 404, "not_found", ""},
		{"window end before start", "POST", base + "/appointments", gina, false,
			hold(map[string]any{"doctor_id": doctor, "window_start": ws, "window_end": slots[0].StartsAt.Add(-time.Hour).Format(time.RFC3339)}), "", 400, "invalid_request", "window_end"},
		{"window too long", "POST", base + "/appointments", gina, false,
			hold(map[string]any{"doctor_id": doctor, "window_start": ws, "window_end": slots[0].StartsAt.AddDate(0, 2, 0).Format(time.RFC3339)}), "", 400, "invalid_request", "window_end"},
		{"window start not an instant", "POST", base + "/appointments", gina, false,
			hold(map[string]any{"doctor_id": doctor, "window_start": "tomorrow", "window_end": ws}), "", 400, "invalid_request", "window_start"},
		{"slot and window both", "POST", base + "/appointments", gina, false,
			hold(map[string]any{"slot_id": slots[1].ID, "doctor_id": doctor}), "", 400, "invalid_request", "slot_id"},
		{"neither slot nor window", "POST", base + "/appointments", gina, false, hold(map[string]any{}), "", 400, "invalid_request", "slot_id"},
		{"unknown field", "POST", base + "/appointments", gina, false, hold(map[string]any{"slot_id": slots[1].ID, "seat": 3}), "", 400, "invalid_request", "seat"},
		{"malformed json", "POST", base + "/appointments", gina, false, `{"guest_id": "gina", "slot_id": `, "", 400, "invalid_request", "body"},
		{"guest_id missing", "POST", base + "/appointments", admin, false, map[string]any{"slot_id": slots[1].ID}, "", 400, "invalid_request", "guest_id"},
		{"channel unknown", "POST", base + "/appointments", gina, false, hold(map[string]any{"slot_id": slots[1].ID, "channel": "fax"}), "", 400, "invalid_request", "channel"},
		{"guest_id wrong type", "POST", base + "/appointments", gina, false, map[string]any{"guest_id": 7, "slot_id": slots[1].ID}, "", 400, "invalid_request", "guest_id"},
		{"no idempotency key", "POST", base + "/appointments", gina, true, hold(map[string]any{"slot_id": slots[1].ID}), "", 400, "idempotency_key_required", ""},
		{"no token", "POST", base + "/appointments", "", false, hold(map[string]any{"slot_id": slots[1].ID}), "", 401, "unauthorized", ""},
		{"text body", "POST", base + "/appointments", gina, false, "slot please", "text/plain", 400, "invalid_request", "Content-Type"},
		{"doctor weekday 8", "POST", base + "/doctors", admin, true, doc(30, window{"weekday": 8, "start": "08:00", "end": "12:00"}), "", 400, "invalid_request", "weekly[0].weekday"},
		{"doctor start 25:00", "POST", base + "/doctors", admin, true, doc(30, window{"weekday": 1, "start": "25:00", "end": "26:00"}), "", 400, "invalid_request", "weekly[0].start"},
		{"doctor slot_minutes 0", "POST", base + "/doctors", admin, true, doc(0, window{"weekday": 1, "start": "08:00", "end": "12:00"}), "", 400, "invalid_request", "slot_minutes"},
		{"doctor end before start", "POST", base + "/doctors", admin, true, doc(30, window{"weekday": 2, "start": "12:00", "end": "08:00"}), "", 400, "invalid_request", "weekly[0].end"},
		{"doctor weekday a string", "POST", base + "/doctors", admin, true, doc(30, window{"weekday": "Mon", "start": "08:00", "end": "12:00"}), "", 400, "invalid_request", "weekly.weekday"},
		{"doctor by a guest", "POST", base + "/doctors", gina, true, doc(30, window{"weekday": 1, "start": "08:00", "end": "12:00"}), "", 403, "forbidden", ""},
		{"doctor of unknown clinic", "POST", "/v1/clinics/" + unknown + "/doctors", admin, true, doc(30, window{"weekday": 1, "start": "08:00", "end": "12:00"}), "", 404, "not_found", ""},
		{"clinic bad time zone", "POST", "/v1/clinics", admin, true, map[string]any{"name": "C", "timezone": "Mars/Olympus", "home_region": "us-east"}, "", 400, "invalid_request", "timezone"},
		{"clinic bad region", "POST", "/v1/clinics", admin, true, map[string]any{"name": "C", "timezone": "UTC", "home_region": "moon"}, "", 400, "invalid_request", "home_region"},
		{"materialize to before from", "POST", base + "/slots/materialize", admin, true, map[string]any{"from": bookingtest.Date(9), "to": bookingtest.Date(8)}, "", 400, "invalid_request", "to"},
		{"materialize bad date", "POST", base + "/slots/materialize", admin, true, map[string]any{"from": "2027-02-30", "to": bookingtest.Date(8)}, "", 400, "invalid_request", "from"},
		{"slots without date", "GET", base + "/doctors/" + doctor + "/slots", "", true, nil, "", 400, "invalid_request", "date"},
		{"slots bad date", "GET", base + "/doctors/" + doctor + "/slots?date=31.12.2027", "", true, nil, "", 400, "invalid_request", "date"},
		{"slots unknown doctor", "GET", base + "/doctors/" + unknown + "/slots?date=" + day, "", true, nil, "", 404, "not_found", ""},
		{"confirm without payment_ref", "POST", base + "/appointments/" + appt + "/confirm", gina, false, map[string]any{}, "", 400, "invalid_request", "payment_ref"},
		{"confirm unknown appointment", "POST", base + "/appointments/" + unknown + "/confirm", gina, false, map[string]any{"payment_ref": "p"}, "", 404, "not_found", ""},
		{"reschedule to unknown slot", "POST", base + "/appointments/" + appt + "/reschedule", gina, false, map[string]any{"slot_id": unknown}, "", 404, "not_found", ""},
		{"reschedule without slot", "POST", base + "/appointments/" + appt + "/reschedule", gina, false, map[string]any{}, "", 400, "invalid_request", "slot_id"},
		{"cancel with a body field", "POST", base + "/appointments/" + appt + "/cancel", gina, false, map[string]any{"why": "x"}, "", 400, "invalid_request", "why"},
		{"audit of unknown slot", "GET", base + "/slots/" + unknown + "/audit", admin, true, nil, "", 404, "not_found", ""},
		{"block unknown slot", "POST", base + "/slots/" + unknown + "/block", admin, true, nil, "", 404, "not_found", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := bookingtest.Request{Method: c.method, Path: c.path, Token: c.token, Body: c.body, ContentType: c.contentType}
			if !c.noKey {
				req.IdemKey = bookingtest.NewKey()
			}
			r := e.Do(req)
			if r.Status != c.status || r.Code() != c.code {
				t.Fatalf("got %d %s, want %d %s: %s", r.Status, r.Code(), c.status, c.code, r.Body)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if c.field != "" {
				errs, _ := r.JSON()["errors"].([]any)
				found := false
				for _, fe := range errs {
					if fe.(map[string]any)["field"] == c.field {
						found = true
					}
				}
				if !found {
					t.Fatalf("errors do not name %s: %s", c.field, r.Body)
				}
			}
		})
	}
	if after := snapshot(); after != before {
		t.Fatalf("bad input changed the database:\nbefore %s\nafter  %s", before, after)
	}
}

package view

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/events"
)

func TestFromEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)
	hotel := `{"reservation_id":"r1","hotel_id":"h1","guest_id":"g1","check_in":"2027-04-10","check_out":"2027-04-13","quantity":2,"status":"confirmed","version":2,"updated_at":"2027-03-01T12:00:00Z","contact_email":"g@x.test"}`
	clinic := `{"appointment_id":"a1","clinic_id":"c1","guest_id":"g1","starts_at":"2027-04-10T08:00:00+02:00","ends_at":"2027-04-10T08:30:00+02:00","status":"held","version":1,"updated_at":"2027-03-01T12:00:00Z"}`
	tests := []struct {
		name, kind, typ, data string
		wantOK                bool
		wantErr               bool
		want                  Item
	}{
		{"hotel confirmed", "hotel", "reservation.confirmed", hotel, true, false, Item{Kind: "hotel", PartitionID: "h1", ID: "r1", GuestID: "g1",
			Status: "confirmed", Start: "2027-04-10", End: "2027-04-13", Title: "Hotel stay: 3 nights, 2 rooms", Version: 2}},
		{"hotel with the guest's push token", "hotel", "reservation.confirmed", strings.Replace(hotel, `}`, `,"contact_push_token":"fcm:t-1"}`, 1), true, false,
			Item{Kind: "hotel", PartitionID: "h1", ID: "r1", GuestID: "g1", Status: "confirmed", Start: "2027-04-10", End: "2027-04-13",
				Title: "Hotel stay: 3 nights, 2 rooms", Version: 2, ContactPushToken: "fcm:t-1"}},
		{"refund wraps the reservation", "hotel", "refund_requested", `{"reservation":` + hotel + `,"payment_ref":"p","amount_cents":100}`, true, false,
			Item{Kind: "hotel", PartitionID: "h1", ID: "r1", GuestID: "g1", Status: "confirmed", Start: "2027-04-10", End: "2027-04-13", Title: "Hotel stay: 3 nights, 2 rooms", Version: 2}},
		{"hotel checked in", "hotel", "reservation.checked_in", strings.Replace(hotel, `"confirmed"`, `"checked_in"`, 1), true, false,
			Item{Kind: "hotel", PartitionID: "h1", ID: "r1", GuestID: "g1", Status: "checked_in", Start: "2027-04-10", End: "2027-04-13", Title: "Hotel stay: 3 nights, 2 rooms", Version: 2}},
		{"hotel checked out", "hotel", "reservation.checked_out", strings.Replace(hotel, `"confirmed"`, `"checked_out"`, 1), true, false,
			Item{Kind: "hotel", PartitionID: "h1", ID: "r1", GuestID: "g1", Status: "checked_out", Start: "2027-04-10", End: "2027-04-13", Title: "Hotel stay: 3 nights, 2 rooms", Version: 2}},
		{"no-show wraps the reservation beside the charge", "hotel", "reservation.no_show",
			`{"reservation":` + strings.Replace(hotel, `"confirmed"`, `"no_show"`, 1) + `,"amount_cents":100,"currency":"EUR","reason":"no_show"}`, true, false,
			Item{Kind: "hotel", PartitionID: "h1", ID: "r1", GuestID: "g1", Status: "no_show", Start: "2027-04-10", End: "2027-04-13", Title: "Hotel stay: 3 nights, 2 rooms", Version: 2}},
		{"a waitlist offer wraps its held reservation beside the entry", "hotel", "waitlist.offered",
			`{"entry":{"entry_id":"e1","status":"offered"},"reservation":` + strings.Replace(hotel, `"confirmed"`, `"held"`, 1) + `}`, true, false,
			Item{Kind: "hotel", PartitionID: "h1", ID: "r1", GuestID: "g1", Status: "held", Start: "2027-04-10", End: "2027-04-13", Title: "Hotel stay: 3 nights, 2 rooms", Version: 2}},
		{"clinic held, times in UTC", "clinic", "appointment.held", clinic, true, false, Item{Kind: "clinic", PartitionID: "c1", ID: "a1", GuestID: "g1",
			Status: "held", Start: "2027-04-10T06:00:00Z", End: "2027-04-10T06:30:00Z", Title: "Clinic appointment: 30 min", Version: 1}},
		{"clinic arrived", "clinic", "appointment.arrived", strings.Replace(clinic, `"held"`, `"arrived"`, 1), true, false, Item{Kind: "clinic", PartitionID: "c1", ID: "a1", GuestID: "g1",
			Status: "arrived", Start: "2027-04-10T06:00:00Z", End: "2027-04-10T06:30:00Z", Title: "Clinic appointment: 30 min", Version: 1}},
		{"clinic completed", "clinic", "appointment.completed", strings.Replace(clinic, `"held"`, `"completed"`, 1), true, false, Item{Kind: "clinic", PartitionID: "c1", ID: "a1", GuestID: "g1",
			Status: "completed", Start: "2027-04-10T06:00:00Z", End: "2027-04-10T06:30:00Z", Title: "Clinic appointment: 30 min", Version: 1}},
		{"clinic no-show: the appointment flat, the charge beside it", "clinic", "appointment.no_show", clinicNoShow(t), true, false, Item{Kind: "clinic", PartitionID: "c1", ID: "a1", GuestID: "g1",
			Status: "no_show", Start: "2027-04-10T06:00:00Z", End: "2027-04-10T06:30:00Z", Title: "Clinic appointment: 30 min", Version: 3}},
		{"a clinic waitlist offer wraps its held appointment beside the entry", "clinic", "clinic_waitlist.offered",
			`{"entry":{"entry_id":"e1","status":"offered"},"appointment":` + clinic + `}`, true, false, Item{Kind: "clinic", PartitionID: "c1", ID: "a1", GuestID: "g1",
				Status: "held", Start: "2027-04-10T06:00:00Z", End: "2027-04-10T06:30:00Z", Title: "Clinic appointment: 30 min", Version: 1}},
		{"ignored type", "hotel", "placement.moved", `{}`, false, false, Item{}},
		{"poison payload", "hotel", "reservation.held", `{"reservation_id": 12}`, false, true, Item{}},
		{"missing guest", "hotel", "reservation.held", `{"reservation_id":"r","hotel_id":"h","check_in":"2027-01-01","check_out":"2027-01-02","status":"held"}`, false, true, Item{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := events.Envelope{SpecVersion: "1.0", ID: "e1", Source: "s", Type: tc.typ, Kind: tc.kind, PartitionID: "p", Time: at,
				Data: json.RawMessage(tc.data), AggregateVersion: 9}
			got, ok, err := FromEvent(e)
			if (err != nil) != tc.wantErr || ok != tc.wantOK {
				t.Fatalf("ok=%v err=%v, want ok=%v err=%v", ok, err, tc.wantOK, tc.wantErr)
			}
			// The one-pass read of the whole message projects it the same,
			// whatever type the subject names.
			msg, merr := json.Marshal(e)
			if merr != nil {
				t.Fatal(merr)
			}
			for _, subject := range [][2]string{{tc.kind, tc.typ}, {"hotel", "placement.moved"}, {"clinic", "appointment.held"}, {"", ""}} {
				pe, perr := Project(subject[0], subject[1], msg)
				if (perr != nil) != tc.wantErr || (pe.Item != nil) != tc.wantOK {
					t.Fatalf("Project as %s: item %v err %v, want item %v err %v", subject, pe.Item != nil, perr, tc.wantOK, tc.wantErr)
				}
				if perr == nil && (pe.ID != "e1" || pe.Type != tc.typ || !pe.Time.Equal(at)) {
					t.Fatalf("Project as %s: %+v", subject, pe)
				}
				if pe.Item != nil && *pe.Item != got {
					t.Fatalf("Project as %s: %+v\nFromEvent: %+v", subject, *pe.Item, got)
				}
			}
			if !ok {
				return
			}
			got.SortAt, got.UpdatedAt, got.EventTime, got.ContactEmail = time.Time{}, time.Time{}, time.Time{}, ""
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// clinicNoShow is the data of an appointment.no_show event as the store
// writes it (appointment.NoShowEvent).
func clinicNoShow(t *testing.T) string {
	t.Helper()
	loc := time.FixedZone("+02", 2*3600)
	price := int64(4500)
	a := appointment.Appointment{ID: "a1", ClinicID: "c1", GuestID: "g1", Status: appointment.StatusNoShow, Version: 3,
		StartsAt: time.Date(2027, 4, 10, 8, 0, 0, 0, loc), EndsAt: time.Date(2027, 4, 10, 8, 30, 0, 0, loc),
		PaymentRef: "pi_1", PriceCents: &price, Currency: "EUR"}
	b, err := json.Marshal(appointment.NoShowEvent{Appointment: a, Charge: appointment.ChargeOnNoShow(a)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Project checks the envelope as events.Decode does, for the events the
// view ignores too (their data is skipped, whatever it is).
func TestProjectChecksTheEnvelope(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, msg string
		wantErr   bool
	}{
		{"ignored type, any data", `{"specversion":"1.0","id":"e","source":"s","type":"placement.moved","kind":"hotel","data":[1,{"a":null}]}`, false},
		{"ignored type, no data", `{"specversion":"1.0","id":"e","source":"s","type":"placement.moved","kind":"hotel"}`, false},
		{"wrong specversion", `{"specversion":"0.3","id":"e","source":"s","type":"placement.moved","kind":"hotel","data":{}}`, true},
		{"no id", `{"specversion":"1.0","source":"s","type":"reservation.held","kind":"hotel","data":{}}`, true},
		{"unknown kind", `{"specversion":"1.0","id":"e","source":"s","type":"reservation.held","kind":"boat","data":{}}`, true},
		{"not JSON", `{"specversion":"1.0",`, true},
		{"mapped type without its nested item", `{"specversion":"1.0","id":"e","source":"s","type":"refund_requested","kind":"hotel","data":{"reservation":null}}`, true},
	} {
		for _, subject := range [][2]string{{"hotel", "placement.moved"}, {"hotel", "reservation.held"}, {"hotel", "refund_requested"}} {
			_, err := Project(subject[0], subject[1], []byte(tc.msg))
			if (err != nil) != tc.wantErr {
				t.Errorf("%s, subject %s: err %v, want error %v", tc.name, subject, err, tc.wantErr)
			}
			_, derr := events.Decode([]byte(tc.msg))
			if tc.wantErr != (derr != nil) && !strings.Contains(tc.name, "nested") {
				t.Errorf("%s: events.Decode says %v", tc.name, derr)
			}
		}
	}
}

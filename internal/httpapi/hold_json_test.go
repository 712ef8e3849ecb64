package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/reservation"
)

// TestHoldRequestFastTakesTheClientsShapes: the bodies clients send (Go's
// encoding of a struct or a map, a hand-written one with spaces) are read
// by hand, as encoding/json reads them — so FuzzHoldRequestFast compares
// something — and the fingerprint is json.Marshal's.
func TestHoldRequestFastTakesTheClientsShapes(t *testing.T) {
	for _, body := range []string{
		`{"guest_id":"g-1","room_type_id":"7d3c8f5e-0000-4000-8000-000000000000","check_in":"2027-01-10","check_out":"2027-01-12","quantity":1}`,
		`{"check_in":"2027-01-10","check_out":"2027-01-12","contact_email":"a@example.com","contact_phone":"+33 1 23","contact_push_token":"tok:1","guest_id":"g","quantity":12,"room_type_id":"x"}`,
		"\n{ \"guest_id\" : \"g\",\r\n\t\"quantity\": 3 }\n",
		`{}`,
	} {
		var fast, slow holdRequest
		if !fast.readFast([]byte(body)) {
			t.Fatalf("not read by hand: %s", body)
		}
		if err := DecodeBytes([]byte(body), &slow); err != nil || fast != slow {
			t.Fatalf("%s: by hand %+v, encoding/json %+v (%v)", body, fast, slow, err)
		}
		want, _ := json.Marshal(fast)
		if got := fast.appendJSON(nil); string(got) != string(want) {
			t.Fatalf("fingerprint body %s, json.Marshal %s", got, want)
		}
		if holdHash("h", "s", fast) != RequestHash("hold:h", "s", fast) {
			t.Fatalf("holdHash differs from RequestHash")
		}
	}
}

// FuzzHoldRequestFast: a hold body read by hand is read exactly as the
// strict decoder reads it (which must accept it), and the request's
// fingerprint bytes are json.Marshal's whatever its strings hold.
func FuzzHoldRequestFast(f *testing.F) {
	for _, seed := range []string{
		`{"guest_id":"g","room_type_id":"7d3c8f5e-0000-4000-8000-000000000000","check_in":"2027-01-10","check_out":"2027-01-12","quantity":1}`,
		`{"guest_id":"g","guest_id":"h"}`, `{"Guest_ID":"g"}`, `{"guest_id":null}`, `{"quantity":01}`, `{"quantity":-1}`,
		`{"quantity":1.0}`, `{"quantity":1e2}`, `{"quantity":9999999999}`, `{"guest_id":"a\u0041"}`, `{"guest_id":"<&>"}`,
		`{"guest_id":"g"} {}`, `{"guest_id":"g",}`, `{"x":1}`, "{\"guest_id\":\"\x7f\"}", `{"contact_email":""}`, "\v{}",
	} {
		f.Add([]byte(seed), "", "")
	}
	f.Add([]byte(`{}`), "Zoë \u2028 <b>", "\xff")
	f.Fuzz(func(t *testing.T, body []byte, s1, s2 string) {
		var fast, slow holdRequest
		if fast.readFast(body) {
			if err := DecodeBytes(body, &slow); err != nil || fast != slow {
				t.Fatalf("%q: by hand %+v, encoding/json %+v (%v)", body, fast, slow, err)
			}
		}
		// Any strings, any quantity: the fingerprint is json.Marshal's.
		for _, req := range []holdRequest{fast, {GuestID: s1, RoomTypeID: s2, CheckIn: s1 + s2, Quantity: len(s1) - len(s2),
			ContactEmail: s2, ContactPushToken: strings.ToUpper(s1)}} {
			want, _ := json.Marshal(req)
			if got := req.appendJSON(nil); string(got) != string(want) {
				t.Fatalf("%+v: appendJSON %s, json.Marshal %s", req, got, want)
			}
		}
	})
}

// FuzzReservationJSON: a hold's answer encoded by hand is json.Marshal's,
// byte for byte (stored with the Idempotency-Key and replayed), and the
// answers a hold gives take the hand way.
func FuzzReservationJSON(f *testing.F) {
	f.Add("5b0f6f2e-3c1d-4d6e-9f70-8a9b0c1d2e3f", "guest-1", "EUR", "", int64(38700), int64(1800000000), int64(123456789), 0, 2, false)
	f.Add("r", "Zoë <&> \u2028 \"q\"", "", "a@example.com", int64(-1), int64(-62135596800), int64(0), 3600*5+1800, 0, true)
	f.Add("r", "g", "EUR", "\xff", int64(0), int64(253402300799), int64(999999999), -3600*23-59*60, 1, false)
	f.Add("r", "g", "EUR", "", int64(0), int64(253402300800), int64(0), 0, 1, false)
	f.Add("r", "g", "EUR", "", int64(0), int64(0), int64(0), 24*3600, 1, false)
	f.Fuzz(func(t *testing.T, id, guest, currency, contact string, price, unix, nanos int64, offset, quantity int, rooms bool) {
		at := time.Unix(unix, nanos).In(time.FixedZone("z", offset))
		in, _ := reservation.ParseDate("2027-03-01")
		out, _ := reservation.ParseDate("2027-03-04")
		r := reservation.Reservation{ID: id, HotelID: id, RoomTypeID: guest, GuestID: guest, CheckIn: in, CheckOut: out, Quantity: quantity,
			Status: reservation.Status(currency), HoldExpiresAt: at, TotalPriceCents: price, Currency: currency, ContactEmail: contact,
			PaymentRef: guest, WaitlistEntryID: contact, Version: price, CreatedAt: at.Add(time.Hour), UpdatedAt: at}
		if rooms {
			r.Rooms = []reservation.AssignedRoom{}
		}
		want, err := json.Marshal(r)
		got, ok := appendReservation(nil, r)
		if ok && (err != nil || string(got) != string(want)) {
			t.Fatalf("by hand %s (ok), json.Marshal %s (%v)", got, want, err)
		}
		if !ok && err == nil && at.Year() >= 0 && at.Year() <= 9999 && offset > -24*3600 && offset < 24*3600 {
			t.Fatalf("a plain hold's answer did not take the hand way: %s", want)
		}
	})
}

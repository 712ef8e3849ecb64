package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
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

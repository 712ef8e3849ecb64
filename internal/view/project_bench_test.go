package view

import (
	"fmt"
	"testing"
)

// heldMessage is a hold's event as the relay writes it: the envelope and a
// reservation with the members the view skips (nights, inventory, price),
// about the size of the platform's (≈ 900 bytes).
var heldMessage = []byte(fmt.Sprintf(`{"specversion":"1.0","id":"0193a5c2-7f11-7c3e-9d2a-4b1f0c8e6a21","source":"/berth/us-east/hotel/0193a5c2-7f11-7c3e-9d2a-4b1f0c8e6a22","type":"reservation.held","time":"2026-12-01T12:00:00.123456Z","datacontenttype":"application/json","kind":"hotel","partitionid":"0193a5c2-7f11-7c3e-9d2a-4b1f0c8e6a22","aggregateversion":1,"data":%s}`,
	`{"reservation_id":"0193a5c2-7f11-7c3e-9d2a-4b1f0c8e6a23","hotel_id":"0193a5c2-7f11-7c3e-9d2a-4b1f0c8e6a22","room_type_id":"0193a5c2-7f11-7c3e-9d2a-4b1f0c8e6a24","guest_id":"guest-000123","check_in":"2027-04-10","check_out":"2027-04-11","quantity":1,"guests":2,"status":"held","version":1,"hold_expires_at":"2026-12-01T12:15:00Z","created_at":"2026-12-01T12:00:00Z","updated_at":"2026-12-01T12:00:00Z","contact_email":"guest-000123@example.test","price":{"amount_cents":12900,"currency":"EUR"},"payment":{"intent_id":"pi_0193a5c27f117c3e","status":"requires_capture"},"inventory":{"room_type_id":"0193a5c2-7f11-7c3e-9d2a-4b1f0c8e6a24","nights":[{"night":"2027-04-10","delta":1,"reserved":37,"sell_limit":100000}]}}`))

// BenchmarkProjectHeld is the read model's decode of a hold's event, once
// per event of every region (view.Project, one pass).
func BenchmarkProjectHeld(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		e, err := Project("hotel", "reservation.held", heldMessage)
		if err != nil || e.Item == nil {
			b.Fatal(e, err)
		}
	}
}

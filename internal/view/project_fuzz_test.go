package view

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/berthhq/berth/internal/events"
)

// Project reads messages off the wire: whatever the bytes and whatever the
// subject claims, it never panics; and for every message events.Decode
// accepts, written out again as the relay writes it (no duplicate or
// unknown members, whose handling differs between a copied and a decoded
// data member), it projects what the two-pass path (events.Decode, then
// FromEvent) makes of it.
func FuzzProject(f *testing.F) {
	hotel := `{"reservation_id":"r1","hotel_id":"h1","guest_id":"g1","check_in":"2027-04-10","check_out":"2027-04-13","quantity":2,"status":"confirmed","version":2,"updated_at":"2027-03-01T12:00:00Z"}`
	env := `{"specversion":"1.0","id":"e1","source":"/berth/hotel/h1","type":"%s","time":"2027-03-01T12:00:00Z","kind":"hotel","partitionid":"h1","aggregateversion":2,"data":%s}`
	for _, seed := range []struct{ kind, typ, msg string }{
		{"hotel", "reservation.confirmed", fmt.Sprintf(env, "reservation.confirmed", hotel)},
		{"hotel", "refund_requested", fmt.Sprintf(env, "refund_requested", `{"reservation":`+hotel+`}`)},
		{"clinic", "appointment.held", fmt.Sprintf(env, "reservation.confirmed", hotel)},
		{"hotel", "placement.moved", fmt.Sprintf(env, "placement.moved", `[1,2]`)},
		{"hotel", "reservation.held", `{"specversion":"1.0","id":"x","type":"reservation.held","source":"s","kind":"hotel","data":{"reservation_id":42}}`},
		{"", "", `not json`},
	} {
		f.Add(seed.kind, seed.typ, []byte(seed.msg))
	}
	f.Fuzz(func(t *testing.T, kind, typ string, msg []byte) {
		_, _ = Project(kind, typ, msg)
		e, derr := events.Decode(msg)
		if derr != nil {
			return
		}
		canonical, merr := json.Marshal(e)
		if merr != nil {
			return // data that is not JSON the encoder takes back
		}
		got, err := Project(kind, typ, canonical)
		it, ok, ferr := FromEvent(e)
		if (ferr != nil) != (err != nil) {
			t.Fatalf("Project err %v, FromEvent err %v", err, ferr)
		}
		if err != nil {
			return
		}
		if got.ID != e.ID || got.Type != e.Type || !got.Time.Equal(e.Time) || (got.Item != nil) != ok {
			t.Fatalf("Project %+v, envelope %s %s %s, item %v", got, e.ID, e.Type, e.Time, ok)
		}
		if ok && *got.Item != it {
			t.Fatalf("Project %+v\nFromEvent %+v", *got.Item, it)
		}
	})
}

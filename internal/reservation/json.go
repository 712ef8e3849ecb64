package reservation

import (
	"encoding/json"
	"strconv"
	"time"
)

// Every winning hold encodes its reservation twice inside its transaction:
// the answer kept with the Idempotency-Key and the reservation.held event's
// payload (WithInventory). encoding/json's reflection for them was a tenth
// of the Go side's CPU per hold, so the shape a fresh hold has is written
// by hand here, byte for byte what json.Marshal writes (FuzzReservationJSON,
// FuzzWithInventoryJSON): the stored answer and the stored event are the
// same either way. Anything else is not ok, and the caller uses
// encoding/json.

// AppendJSON appends r as json.Marshal(r) encodes it; ok is false (and dst
// is to be ignored) for what a fresh hold never carries — released nights,
// rooms, a walk — and for a time json.Marshal would refuse.
func (r Reservation) AppendJSON(dst []byte) (out []byte, ok bool) {
	if dst, ok = r.appendMembers(append(dst, '{')); !ok {
		return dst, false
	}
	return append(dst, '}'), true
}

// AppendJSON appends w as json.Marshal(w) encodes it: the reservation's
// members, then its inventory (Reservation.AppendJSON says when it is not
// ok).
func (w WithInventory) AppendJSON(dst []byte) (out []byte, ok bool) {
	if dst, ok = w.Reservation.appendMembers(append(dst, '{')); !ok {
		return dst, false
	}
	if inv := w.Inventory; inv != nil { // omitempty
		dst = append(dst, `,"inventory":{"hotel_id":`...)
		dst = appendString(dst, inv.HotelID)
		dst = append(dst, `,"room_type_id":`...)
		dst = appendString(dst, inv.RoomTypeID)
		dst = append(dst, `,"nights":`...)
		if inv.Nights == nil {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, '[')
			for i, n := range inv.Nights {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"night":`...)
				dst = appendString(dst, n.Night)
				dst = append(dst, `,"available":`...)
				dst = strconv.AppendInt(dst, int64(n.Available), 10)
				dst = append(dst, `,"version":`...)
				dst = strconv.AppendInt(dst, n.Version, 10)
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), true
}

// appendMembers appends r's members in json.Marshal's order (the fields'),
// without the braces around them.
func (r Reservation) appendMembers(dst []byte) (out []byte, ok bool) {
	if r.ReleasedFrom != nil || len(r.Rooms) > 0 || r.Walk != nil || r.RelocatedFrom != nil {
		return dst, false
	}
	dst = append(dst, `"reservation_id":`...)
	dst = appendString(dst, r.ID)
	dst = append(dst, `,"hotel_id":`...)
	dst = appendString(dst, r.HotelID)
	dst = append(dst, `,"room_type_id":`...)
	dst = appendString(dst, r.RoomTypeID)
	dst = append(dst, `,"guest_id":`...)
	dst = appendString(dst, r.GuestID)
	dst = append(dst, `,"check_in":`...)
	dst = appendString(dst, r.CheckIn.String())
	dst = append(dst, `,"check_out":`...)
	dst = appendString(dst, r.CheckOut.String())
	dst = append(dst, `,"quantity":`...)
	dst = strconv.AppendInt(dst, int64(r.Quantity), 10)
	dst = append(dst, `,"status":`...)
	dst = appendString(dst, string(r.Status))
	dst = append(dst, `,"hold_expires_at":`...)
	if dst, ok = appendTime(dst, r.HoldExpiresAt); !ok {
		return dst, false
	}
	dst = append(dst, `,"total_price_cents":`...)
	dst = strconv.AppendInt(dst, r.TotalPriceCents, 10)
	dst = append(dst, `,"currency":`...)
	dst = appendString(dst, r.Currency)
	for _, m := range [...]struct{ name, v string }{ // omitempty
		{`,"payment_ref":`, r.PaymentRef}, {`,"contact_email":`, r.ContactEmail}, {`,"contact_phone":`, r.ContactPhone},
		{`,"contact_push_token":`, r.ContactPushToken}, {`,"waitlist_entry_id":`, r.WaitlistEntryID}, {`,"upgraded_from":`, r.UpgradedFrom},
	} {
		if m.v != "" {
			dst = append(dst, m.name...)
			dst = appendString(dst, m.v)
		}
	}
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, r.Version, 10)
	dst = append(dst, `,"created_at":`...)
	if dst, ok = appendTime(dst, r.CreatedAt); !ok {
		return dst, false
	}
	dst = append(dst, `,"updated_at":`...)
	return appendTime(dst, r.UpdatedAt)
}

// appendTime appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted); ok is false where MarshalJSON would fail (a year
// outside 0–9999, an offset of a day or more).
func appendTime(dst []byte, t time.Time) ([]byte, bool) {
	_, offset := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || offset <= -24*3600 || offset >= 24*3600 {
		return dst, false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}

// appendString appends s as encoding/json encodes a string: the plain case
// (printable ASCII with nothing to escape) by hand, any other through
// encoding/json itself. It is internal/jsonscan's AppendString, kept here
// because a domain package uses the standard library only
// (internal/deptest); FuzzReservationJSON and FuzzWithInventoryJSON hold
// both to json.Marshal.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(s) // a string always encodes
			return append(dst, quoted...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

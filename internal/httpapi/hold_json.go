package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/berthhq/berth/internal/jsonscan"
	"github.com/berthhq/berth/internal/reservation"
)

// The hold is the hottest write: its body is read and its fingerprint
// (RequestHash) written on every request, and encoding/json's reflection
// for both was about a tenth of the booking service's own CPU on the hold's
// path. readFast and appendJSON do the common shape by hand; whatever they
// cannot read goes to DecodeBytes, which decides (and words every refusal),
// and appendJSON gives exactly the bytes json.Marshal gives, so a key's
// fingerprint is the same before and after. FuzzHoldRequestFast ties both
// to encoding/json.

// readFast reads body into req when it is a JSON object of holdRequest's
// members with plain values: strings of printable ASCII without escapes,
// the quantity as an integer of at most 9 digits, each member at most once,
// JSON whitespace around tokens. ok is false for anything else (null, an
// escape, another member, a name in another case, a name given twice,
// trailing data); then req is unspecified and DecodeBytes must read body.
func (req *holdRequest) readFast(b []byte) (ok bool) {
	// One string for the body: the fields are slices of it.
	body := string(b)
	var seen [8]bool
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return skipSpace(body, i+1) == len(body)
	}
	for {
		name, next, ok := jsonscan.String(body, i)
		if !ok {
			return false
		}
		i = skipSpace(body, next)
		if i >= len(body) || body[i] != ':' {
			return false
		}
		i = skipSpace(body, i+1)
		var slot int
		var dst *string
		switch name {
		case "guest_id":
			slot, dst = 0, &req.GuestID
		case "room_type_id":
			slot, dst = 1, &req.RoomTypeID
		case "check_in":
			slot, dst = 2, &req.CheckIn
		case "check_out":
			slot, dst = 3, &req.CheckOut
		case "contact_email":
			slot, dst = 4, &req.ContactEmail
		case "contact_phone":
			slot, dst = 5, &req.ContactPhone
		case "contact_push_token":
			slot, dst = 6, &req.ContactPushToken
		case "quantity":
			slot = 7
		default:
			return false
		}
		if seen[slot] {
			return false
		}
		seen[slot] = true
		if dst != nil {
			*dst, next, ok = jsonscan.String(body, i)
		} else {
			var q int64
			q, next, ok = jsonscan.Int(body, i, 9)
			req.Quantity = int(q)
		}
		if !ok {
			return false
		}
		i = skipSpace(body, next)
		switch {
		case i >= len(body):
			return false
		case body[i] == ',':
			i = skipSpace(body, i+1)
		case body[i] == '}':
			return skipSpace(body, i+1) == len(body)
		default:
			return false
		}
	}
}

func skipSpace(b string, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// appendJSON appends req as json.Marshal(req) encodes it.
func (req holdRequest) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"guest_id":`...)
	dst = appendJSONString(dst, req.GuestID)
	dst = append(dst, `,"room_type_id":`...)
	dst = appendJSONString(dst, req.RoomTypeID)
	dst = append(dst, `,"check_in":`...)
	dst = appendJSONString(dst, req.CheckIn)
	dst = append(dst, `,"check_out":`...)
	dst = appendJSONString(dst, req.CheckOut)
	dst = append(dst, `,"quantity":`...)
	dst = strconv.AppendInt(dst, int64(req.Quantity), 10)
	for _, m := range []struct{ name, v string }{
		{`,"contact_email":`, req.ContactEmail}, {`,"contact_phone":`, req.ContactPhone}, {`,"contact_push_token":`, req.ContactPushToken},
	} {
		if m.v != "" { // omitempty
			dst = append(dst, m.name...)
			dst = appendJSONString(dst, m.v)
		}
	}
	return append(dst, '}')
}

// holdHash is RequestHash("hold:"+hotelID, subject, req) without
// encoding/json.
func holdHash(hotelID, subject string, req holdRequest) string {
	var buf [512]byte
	return requestHash("hold:"+hotelID, subject, req.appendJSON(buf[:0]))
}

// requestHash is RequestHash of a request already encoded.
func requestHash(route, subject string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(route))
	h.Write([]byte{0})
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(body)
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// appendReservation appends r as json.Marshal(r) encodes it, for the
// answer every hold renders inside its transaction; ok is false (and
// render uses encoding/json) for what a fresh hold never carries — released
// nights, rooms, a walk — and for a time json.Marshal would refuse.
func appendReservation(dst []byte, r reservation.Reservation) (out []byte, ok bool) {
	if r.ReleasedFrom != nil || len(r.Rooms) > 0 || r.Walk != nil || r.RelocatedFrom != nil {
		return dst, false
	}
	dst = append(dst, `{"reservation_id":`...)
	dst = appendJSONString(dst, r.ID)
	dst = append(dst, `,"hotel_id":`...)
	dst = appendJSONString(dst, r.HotelID)
	dst = append(dst, `,"room_type_id":`...)
	dst = appendJSONString(dst, r.RoomTypeID)
	dst = append(dst, `,"guest_id":`...)
	dst = appendJSONString(dst, r.GuestID)
	dst = append(dst, `,"check_in":`...)
	dst = appendJSONString(dst, r.CheckIn.String())
	dst = append(dst, `,"check_out":`...)
	dst = appendJSONString(dst, r.CheckOut.String())
	dst = append(dst, `,"quantity":`...)
	dst = strconv.AppendInt(dst, int64(r.Quantity), 10)
	dst = append(dst, `,"status":`...)
	dst = appendJSONString(dst, string(r.Status))
	dst = append(dst, `,"hold_expires_at":`...)
	if dst, ok = appendJSONTime(dst, r.HoldExpiresAt); !ok {
		return dst, false
	}
	dst = append(dst, `,"total_price_cents":`...)
	dst = strconv.AppendInt(dst, r.TotalPriceCents, 10)
	dst = append(dst, `,"currency":`...)
	dst = appendJSONString(dst, r.Currency)
	for _, m := range []struct{ name, v string }{ // omitempty
		{`,"payment_ref":`, r.PaymentRef}, {`,"contact_email":`, r.ContactEmail}, {`,"contact_phone":`, r.ContactPhone},
		{`,"contact_push_token":`, r.ContactPushToken}, {`,"waitlist_entry_id":`, r.WaitlistEntryID}, {`,"upgraded_from":`, r.UpgradedFrom},
	} {
		if m.v != "" {
			dst = append(dst, m.name...)
			dst = appendJSONString(dst, m.v)
		}
	}
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, r.Version, 10)
	dst = append(dst, `,"created_at":`...)
	if dst, ok = appendJSONTime(dst, r.CreatedAt); !ok {
		return dst, false
	}
	dst = append(dst, `,"updated_at":`...)
	if dst, ok = appendJSONTime(dst, r.UpdatedAt); !ok {
		return dst, false
	}
	return append(dst, '}'), true
}

// appendJSONTime appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted); ok is false where MarshalJSON would fail (a year
// outside 0–9999, an offset of a day or more).
func appendJSONTime(dst []byte, t time.Time) ([]byte, bool) {
	_, offset := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || offset <= -24*3600 || offset >= 24*3600 {
		return dst, false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}

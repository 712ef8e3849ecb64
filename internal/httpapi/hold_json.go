package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/berthhq/berth/internal/jsonscan"
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
	dst = jsonscan.AppendString(dst, req.GuestID)
	dst = append(dst, `,"room_type_id":`...)
	dst = jsonscan.AppendString(dst, req.RoomTypeID)
	dst = append(dst, `,"check_in":`...)
	dst = jsonscan.AppendString(dst, req.CheckIn)
	dst = append(dst, `,"check_out":`...)
	dst = jsonscan.AppendString(dst, req.CheckOut)
	dst = append(dst, `,"quantity":`...)
	dst = strconv.AppendInt(dst, int64(req.Quantity), 10)
	for _, m := range []struct{ name, v string }{
		{`,"contact_email":`, req.ContactEmail}, {`,"contact_phone":`, req.ContactPhone}, {`,"contact_push_token":`, req.ContactPushToken},
	} {
		if m.v != "" { // omitempty
			dst = append(dst, m.name...)
			dst = jsonscan.AppendString(dst, m.v)
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

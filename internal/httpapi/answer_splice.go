package httpapi

import (
	"bytes"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/berthhq/berth/internal/jsonscan"
)

// A prepaid hold's answer is the stored answer of the hold (the JSON the
// store kept with the Idempotency-Key) plus a `payment` member. It used to be
// built by decoding that answer twice (into a struct, then into a map of raw
// members) and encoding the map again: about a third of the booking
// service's own CPU on a hold's request path (docs/PERFORMANCE.md, "CPU per
// hold, by process"). The answer is JSON this service wrote itself with
// encoding/json, so the members can be read off it directly. The bytes must
// stay exactly what the map re-encoding gave — members sorted by name,
// compact, HTML-escaped — because a replay of a hold answered before this
// change must be byte-identical to its first answer: objectMembers accepts
// only the shape that re-encoding leaves unchanged (compact,
// lower-case names, nothing to escape) and the callers fall back to
// encoding/json for anything else. FuzzPaymentSplice ties the two together.

// maxMembers bounds the members objectMembers reads (sortedOrder indexes
// them with a byte); the answers have about twenty.
const maxMembers = 200

// member is one member of a JSON object: its name and its raw value.
type member struct {
	name, value []byte
}

// objectMembers splits a compact JSON object into its members, in their
// order. ok is false for anything else, and also for what encoding/json
// would not give back byte for byte after decoding into a map of raw
// messages and encoding that map: whitespace between tokens, a control
// character, a character it escapes (<, >, &, U+2028, U+2029), a name with
// a character other than a-z, 0-9 and _ (struct fields match names
// case-insensitively, so "Status" would be read as "status"), and a name
// given twice. Other bytes are copied as they are, as encoding/json copies
// them.
func objectMembers(b []byte, into []member) (members []member, ok bool) {
	members = into[:0]
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, false
	}
	for i, c := range b {
		switch {
		case c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&':
			return nil, false
		case c == 0xe2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xa8 || b[i+2] == 0xa9):
			return nil, false // U+2028, U+2029: escaped by encoding/json
		}
	}
	i := 1
	if b[i] == '}' {
		return members, i == len(b)-1
	}
	for {
		if b[i] != '"' {
			return nil, false
		}
		j := i + 1
		for j < len(b) && b[j] != '"' {
			c := b[j]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
				return nil, false
			}
			j++
		}
		if j+1 >= len(b) || b[j+1] != ':' {
			return nil, false
		}
		name := b[i+1 : j]
		for _, m := range members {
			if bytes.Equal(m.name, name) {
				return nil, false
			}
		}
		end, ok := skipValue(b, j+2)
		if !ok {
			return nil, false
		}
		if len(members) == maxMembers {
			return nil, false
		}
		members = append(members, member{name: name, value: b[j+2 : end]})
		switch {
		case end >= len(b):
			return nil, false
		case b[end] == ',':
			i = end + 1
		case b[end] == '}' && end == len(b)-1:
			return members, true
		default:
			return nil, false
		}
	}
}

// skipValue returns the index just past the compact JSON value at b[i:].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		close := byte('}')
		if c == '[' {
			close = ']'
		}
		i++
		if i < len(b) && b[i] == close {
			return i + 1, true
		}
		for {
			if c == '{' {
				var ok bool
				if i >= len(b) || b[i] != '"' {
					return i, false
				}
				if i, ok = skipString(b, i); !ok || i >= len(b) || b[i] != ':' {
					return i, false
				}
				i++
			}
			var ok bool
			if i, ok = skipValue(b, i); !ok || i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i++
			case close:
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return skipNumber(b, i)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return i, false
}

// skipString returns the index just past the JSON string at b[i:] (which
// starts with a quote). Control characters were refused before.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

// skipNumber returns the index just past the JSON number at b[i:]
// (RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?).
func skipNumber(b []byte, i int) (int, bool) {
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return i, false
		}
	}
	return i, true
}

// find returns the raw value of the member named name.
func find(members []member, name string) ([]byte, bool) {
	for _, m := range members {
		if string(m.name) == name {
			return m.value, true
		}
	}
	return nil, false
}

// plainString reads a member that must be a string, as decoding it into a
// string field would: absent is "". ok is false for anything the callers
// leave to encoding/json (an escape, a byte outside ASCII, null, another
// type).
func plainString(members []member, name string) (string, bool) {
	v, found := find(members, name)
	if !found {
		return "", true
	}
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		// Not an escape nor a byte outside ASCII: encoding/json decodes
		// those (invalid UTF-8 becomes U+FFFD).
		if c == '\\' || c > 0x7e {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}

// plainInt reads a member that must be an integer, as decoding it into an
// *int64 field would: absent is nil. ok is false for anything else (null,
// a fraction, an exponent, out of range, another type).
func plainInt(members []member, name string) (*int64, bool) {
	v, found := find(members, name)
	if !found {
		return nil, true
	}
	n, err := strconv.ParseInt(string(v), 10, 64) // the grammar was checked by skipNumber
	if err != nil {
		return nil, false
	}
	return &n, true
}

// withMember returns the object of members plus one more, encoded as
// encoding/json encodes a map[string]json.RawMessage of them: members sorted
// by name, no space. The members come from objectMembers, so their values
// need no compacting or escaping.
func withMember(members []member, name string, value []byte) []byte {
	members = append(members, member{name: []byte(name), value: value})
	order := sortedOrder(members)
	n := 2
	for _, m := range members {
		n += len(m.name) + len(m.value) + 4
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, k := range order {
		if i > 0 {
			out = append(out, ',')
		}
		m := members[k]
		out = append(out, '"')
		out = append(out, m.name...)
		out = append(out, '"', ':')
		out = append(out, m.value...)
	}
	return append(out, '}')
}

// lastOrder is the order sortedOrder found last. Answers of one kind have
// the same members in the same order, so it is nearly always the order of
// the next answer too, which takes one pass to confirm instead of a sort.
var lastOrder atomic.Pointer[[]uint8]

// sortedOrder returns the indexes of members in ascending order of name
// (names are distinct: objectMembers refuses a name given twice).
func sortedOrder(members []member) []uint8 {
	if p := lastOrder.Load(); p != nil && len(*p) == len(members) && ascending(members, *p) {
		return *p
	}
	order := make([]uint8, len(members))
	for i := range order {
		order[i] = uint8(i)
	}
	slices.SortFunc(order, func(a, b uint8) int { return bytes.Compare(members[a].name, members[b].name) })
	lastOrder.Store(&order)
	return order
}

func ascending(members []member, order []uint8) bool {
	for i := 1; i < len(order); i++ {
		if bytes.Compare(members[order[i-1]].name, members[order[i]].name) >= 0 {
			return false
		}
	}
	return true
}

// appendJSON appends v as json.Marshal(v) encodes it.
func (v paymentView) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"intent_id":`...)
	dst = jsonscan.AppendString(dst, v.IntentID)
	dst = append(dst, `,"amount_cents":`...)
	dst = strconv.AppendInt(dst, v.AmountCents, 10)
	dst = append(dst, `,"currency":`...)
	dst = jsonscan.AppendString(dst, v.Currency)
	dst = append(dst, `,"client_secret":`...)
	dst = jsonscan.AppendString(dst, v.ClientSecret)
	return append(dst, '}')
}

package postgres

import (
	"regexp"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// The hot statements pass their arrays of ids as Go strings. pgx encodes a
// []string parameter typed UUID[] only after a failed try: it plans the
// binary format first, finds no plan for a string element, builds an error
// that formats the whole array, and then sends it as text — measured as
// about a tenth of a hold group's client CPU. So those parameters are typed
// TEXT[] and cast to UUID[] in the server ($1::TEXT[]::UUID[]), which pgx
// encodes at once. This test keeps a new statement of the hold paths (rooms
// and appointments) and the relay's mark from typing one UUID[], and fails
// when pgx learns the plan (then the casts may go).
func TestHotStatementsTypeNoUUIDArrayParameter(t *testing.T) {
	uuidArray := regexp.MustCompile(`\$\d+::UUID\[\]`)
	for _, sql := range slices.Concat(HoldStatements(), AppointmentHoldStatements(), []string{markSentSQL}) {
		if uuidArray.MatchString(sql) {
			t.Errorf("a parameter typed UUID[] (type it $n::TEXT[]::UUID[]):\n%s", sql)
		}
	}
	m := pgtype.NewMap()
	ids := []string{"c36ebd91-95bb-422c-b033-b21af8333e27"}
	if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, nil); err == nil {
		t.Error("pgx encodes a []string as a binary UUID[] now: the TEXT[] casts of the hot statements are not needed")
	}
	if _, err := m.Encode(pgtype.TextArrayOID, pgtype.BinaryFormatCode, ids, nil); err != nil {
		t.Errorf("a []string as a binary TEXT[]: %v", err)
	}
}

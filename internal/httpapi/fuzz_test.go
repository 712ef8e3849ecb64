package httpapi

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
)

// FuzzDecodeHoldRequest feeds arbitrary bodies through the strict decoder
// and the hold validation: it must never panic, and every rejection must be
// an invalid_request problem.
func FuzzDecodeHoldRequest(f *testing.F) {
	for _, seed := range []string{
		`{"guest_id":"g","room_type_id":"7d3c8f5e-0000-4000-8000-000000000000","check_in":"2027-01-10","check_out":"2027-01-12","quantity":1}`,
		`{"quantity":1e400}`, `{"quantity":-0}`, `{"check_in":"2027-02-29"}`, `[]`, `{}`, `null`, `{"a":1}{"b":2}`,
		`{"guest_id":"\u0000"}`, `{"guest_id":` + strings.Repeat("[", 1000), "\xff\xfe", `{"quantity":"1"}`,
	} {
		f.Add([]byte(seed))
	}
	s := &Server{cfg: Config{Now: func() time.Time { return time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) }}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req holdRequest
		err := DecodeBytes(body, &req)
		if err != nil {
			var be *berth.Error
			if !errors.As(err, &be) || be.Code != berth.CodeInvalidRequest {
				t.Fatalf("decode error %v is not invalid_request", err)
			}
			return
		}
		var f Fields
		text(&f, "guest_id", req.GuestID, 128)
		stay := s.parseStay(&f, req.CheckIn, req.CheckOut)
		if len(f) == 0 {
			if stay.Nights() < 1 || stay.Nights() > reservation.MaxStayNights {
				t.Fatalf("accepted a stay of %d nights", stay.Nights())
			}
		}
		if err := f.Err(); err != nil && berth.ErrorCode(err) != berth.CodeInvalidRequest {
			t.Fatalf("validation error %v is not invalid_request", err)
		}
		status, doc := Problem(berth.Invalid(f...))
		if status != 400 || len(doc) == 0 {
			t.Fatalf("problem rendering failed: %d", status)
		}
	})
}

// FuzzIdempotencyKey checks the header parser never panics and accepts only
// 1–64 visible ASCII characters.
func FuzzIdempotencyKey(f *testing.F) {
	for _, seed := range []string{"7d3c8f5e-0000-4000-8000-000000000000", "", " ", strings.Repeat("k", 65), "a\x00b", "ключ"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Idempotency-Key", key)
		got, err := IdempotencyKey(r)
		if err != nil {
			return
		}
		if len(got) == 0 || len(got) > MaxIdempotencyKeyLen {
			t.Fatalf("accepted key of length %d", len(got))
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x21 || got[i] > 0x7e {
				t.Fatalf("accepted byte %#x", got[i])
			}
		}
	})
}

// FuzzParseDate checks the date parser round-trips what it accepts.
func FuzzParseDate(f *testing.F) {
	for _, seed := range []string{"2027-01-31", "2027-02-29", "0000-00-00", "9999-12-31", "2027-1-1", "２０２７-01-01"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := reservation.ParseDate(s)
		if err != nil {
			return
		}
		if d.String() != s {
			t.Fatalf("ParseDate(%q) round-trips to %q", s, d.String())
		}
	})
}

package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/reservation"
)

// queryStub answers availability for any hotel; fuzzing exercises the
// parsing and validation in front of it, not the database.
type queryStub struct{ HotelStore }

func (queryStub) Availability(_ context.Context, hotelID string, stay reservation.Stay, roomTypeID string) (reservation.Availability, error) {
	return reservation.Availability{HotelID: hotelID, CheckIn: stay.CheckIn, CheckOut: stay.CheckOut}, nil
}

// FuzzAvailabilityQuery sends arbitrary query strings to the availability
// route: never a panic or a 5xx; every answer is 200 or a 4xx problem, and a
// 200 is only given for a valid stay.
func FuzzAvailabilityQuery(f *testing.F) {
	for _, q := range []string{
		"check_in=2027-01-10&check_out=2027-01-12", "check_in=2027-01-10", "check_in=2027-01-12&check_out=2027-01-10",
		"check_in=2027-01-10&check_out=2027-01-12&room_type_id=x", "check_in=%zz", "check_in=2027-01-10&check_in=2027-01-11&check_out=2027-01-12",
		";;;&&&==", "x=1", "check_in=2027-02-29&check_out=2027-03-01",
	} {
		f.Add(q)
	}
	s := New(Config{Region: "us-east", Hotels: queryStub{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now: func() time.Time { return time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) }})
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/hotels/7d3c8f5e-0000-4000-8000-000000000000/availability", nil)
		r.URL.RawQuery = rawQuery
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		switch {
		case w.Code == http.StatusOK:
			var av reservation.Availability
			if err := json.Unmarshal(w.Body.Bytes(), &av); err != nil {
				t.Fatalf("200 with a bad body: %v", err)
			}
			st := reservation.Stay{CheckIn: av.CheckIn, CheckOut: av.CheckOut}
			if st.Nights() < 1 || st.Nights() > reservation.MaxStayNights {
				t.Fatalf("200 for a stay of %d nights (%q)", st.Nights(), rawQuery)
			}
		case w.Code >= 400 && w.Code < 500:
			if w.Header().Get("Content-Type") != ProblemContentType {
				t.Fatalf("%d without a problem document", w.Code)
			}
		default:
			t.Fatalf("query %q answered %d", rawQuery, w.Code)
		}
	})
}

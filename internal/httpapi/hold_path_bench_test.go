package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/telemetry"
)

// BenchmarkHoldPath is the booking service's own share of a hold — the
// request path around the store: the bearer token, the body, the
// idempotency fingerprint, the answer rendered and the payment intent
// spliced into it, and (instrumented) the telemetry middleware the binary
// wraps it in. The store and the payment provider answer at once (canned
// values, no database): this measures CPU and allocations per request of
// the HTTP layer alone, which `make cpu-per-hold` cannot separate from the
// database work. Every hold is a guest (and a token) of its own, as in the
// CPU-per-hold load. It claims nothing about correctness; the tests of
// this package do that against the real database.
func BenchmarkHoldPath(b *testing.B) {
	const secret = "0123456789abcdef0123456789abcdef-bench"
	tokens, err := auth.New(secret)
	if err != nil {
		b.Fatal(err)
	}
	const hotelID = "6f1c2a8e-3b7d-4e0f-9a51-2c4d6e8f0a1b"
	const roomTypeID = "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70"
	const n = 1024
	toks := make([]string, n)
	bodies := make([][]byte, n)
	for i := range n {
		guest := "bench-guest-" + strconv.Itoa(i)
		if toks[i], err = tokens.Mint(berth.Principal{Subject: guest, Role: berth.RoleGuest}, time.Hour); err != nil {
			b.Fatal(err)
		}
		bodies[i] = []byte(`{"guest_id":"` + guest + `","room_type_id":"` + roomTypeID +
			`","check_in":"2027-03-01","check_out":"2027-03-02","quantity":1}`)
	}
	api := httpapi.New(httpapi.Config{Region: "us-east", Hotels: cannedHotels{}, PaymentProvider: cannedProvider{},
		Tokens: tokens, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tel, shutdown, err := telemetry.Setup(context.Background(), "booking", "us-east", telemetry.WithoutGlobals())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = shutdown(context.Background()) })
	instrumented := tel.Middleware(tel.Outcomes(map[string]string{"POST /v1/hotels/{hotel_id}/reservations": "hotel.hold"}, api))
	for _, h := range []struct {
		name    string
		handler http.Handler
	}{{"handler", api}, {"instrumented", instrumented}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/hotels/"+hotelID+"/reservations", bytes.NewReader(bodies[i%n]))
				r.Header.Set("Authorization", "Bearer "+toks[i%n])
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", "bench-key-"+strconv.Itoa(i))
				w := &discardWriter{header: http.Header{}}
				h.handler.ServeHTTP(w, r)
				if w.status != http.StatusCreated {
					b.Fatalf("status %d", w.status)
				}
				i++
			}
		})
	}
}

// cannedHotels answers every hold with a held, prepaid reservation rendered
// by the request's own Render, as the store does inside its transaction.
type cannedHotels struct{ httpapi.HotelStore }

func (cannedHotels) Hold(_ context.Context, req reservation.HoldRequest, idem *berth.Idem) (berth.Response, error) {
	now := time.Date(2027, 2, 1, 10, 0, 0, 123456789, time.UTC)
	res := reservation.Reservation{ID: req.ReservationID, HotelID: req.HotelID, RoomTypeID: req.RoomTypeID, GuestID: req.GuestID,
		CheckIn: req.Stay.CheckIn, CheckOut: req.Stay.CheckOut, Quantity: req.Quantity, Status: reservation.StatusHeld,
		HoldExpiresAt: now.Add(10 * time.Minute), TotalPriceCents: 12900, Currency: "EUR", Version: 1, CreatedAt: now, UpdatedAt: now}
	status, body := idem.Render(res, nil)
	return berth.Response{Status: status, Body: body}, nil
}

// cannedProvider creates every intent at once.
type cannedProvider struct{ httpapi.PaymentProvider }

func (cannedProvider) CreateIntent(_ context.Context, req payments.IntentRequest) (payments.Intent, error) {
	return payments.Intent{ID: "pi_dev_" + req.ReservationID, ClientSecret: "pi_dev_" + req.ReservationID + "_secret_0123456789abcdef",
		AmountCents: req.AmountCents, Currency: req.Currency, Status: payments.IntentPending}, nil
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return len(p), nil
}

package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
)

// intentsFor is a payment provider answering every intent at once; it
// counts the intents asked for, and fails when fail is set.
type intentsFor struct {
	calls int
	fail  bool
}

func (p *intentsFor) CreateIntent(_ context.Context, req payments.IntentRequest) (payments.Intent, error) {
	p.calls++
	if p.fail {
		return payments.Intent{}, errors.New("provider down")
	}
	return payments.Intent{ID: "pi_" + req.ReservationID, ClientSecret: "pi_" + req.ReservationID + "_secret_<&>\u2028",
		AmountCents: req.AmountCents, Currency: req.Currency}, nil
}

func (p *intentsFor) GetIntent(context.Context, string) (payments.Intent, error) {
	return payments.Intent{}, payments.ErrIntentNotFound
}

// heldAnswers are answers of holds as the store renders them (render):
// a prepaid hotel hold, one with contact fields and characters JSON escapes
// for HTML, a prepaid clinic hold, a free one and a confirmed one.
func heldAnswers(t testing.TB) map[string][]byte {
	now := time.Date(2027, 2, 1, 10, 0, 0, 123456789, time.UTC)
	in, _ := reservation.ParseDate("2027-03-01")
	out, _ := reservation.ParseDate("2027-03-04")
	res := reservation.Reservation{ID: "5b0f6f2e-3c1d-4d6e-9f70-8a9b0c1d2e3f", HotelID: "6f1c2a8e-3b7d-4e0f-9a51-2c4d6e8f0a1b",
		RoomTypeID: "0d9e8f7a-6b5c-4d3e-8f1a-2b3c4d5e6f70", GuestID: "guest-1", CheckIn: in, CheckOut: out, Quantity: 2,
		Status: reservation.StatusHeld, HoldExpiresAt: now.Add(10 * time.Minute), TotalPriceCents: 38700, Currency: "EUR",
		Version: 1, CreatedAt: now, UpdatedAt: now}
	contact := res
	contact.GuestID, contact.ContactEmail, contact.ContactPhone = "Zoë <&> d'Arc", "zoe@example.com", "+33 1 23 45 67 89"
	free := res
	free.TotalPriceCents = 0
	confirmed := res
	confirmed.Status = reservation.StatusConfirmed
	price := int64(4500)
	appt := appointment.Appointment{ID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", ClinicID: "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
		DoctorID: "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e", SlotID: "3c4d5e6f-7a8b-4c9d-8e1f-2a3b4c5d6e7f", GuestID: "patient-1",
		StartsAt: now, EndsAt: now.Add(20 * time.Minute), Status: appointment.StatusHeld, HoldExpiresAt: &now,
		PriceCents: &price, Currency: "EUR", Version: 1, CreatedAt: now, UpdatedAt: now}
	answers := map[string][]byte{}
	for name, v := range map[string]any{"hotel": res, "hotel with contact": contact, "free": free, "confirmed": confirmed, "clinic": appt} {
		status, body := render(http.StatusCreated)(v, nil)
		if status != http.StatusCreated {
			t.Fatalf("%s: render %d %s", name, status, body)
		}
		answers[name] = body
	}
	return answers
}

var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// spliceBoth answers body the fast way and the encoding/json way.
func spliceBoth(kind berth.Kind, body []byte, fail bool) (fast, slow berth.Response, fastErr, slowErr error, fastCalls, slowCalls int) {
	pf, ps := &intentsFor{fail: fail}, &intentsFor{fail: fail}
	sf := &Server{cfg: Config{PaymentProvider: pf}, log: discardLog}
	ss := &Server{cfg: Config{PaymentProvider: ps}, log: discardLog}
	in := berth.Response{Status: http.StatusCreated, Body: bytes.Clone(body)}
	fast, fastErr = sf.withPaymentIntent(context.Background(), kind, "p", in)
	in.Body = bytes.Clone(body)
	slow, slowErr = ss.withPaymentIntentJSON(context.Background(), kind, "p", in)
	return fast, slow, fastErr, slowErr, pf.calls, ps.calls
}

// TestPaymentSpliceIsTheJSONAnswer: the answers the store renders take the
// fast way (so the fuzz target below compares something) and come out
// byte-identical to the encoding/json way, which is what replays of holds
// answered before it must match.
func TestPaymentSpliceIsTheJSONAnswer(t *testing.T) {
	// Twice over, in map order: the member order remembered from one shape
	// of answer must not leak into another's.
	answers := heldAnswers(t)
	for i, name := range append(slices.Collect(maps.Keys(answers)), slices.Collect(maps.Keys(answers))...) {
		body := answers[name]
		name := fmt.Sprintf("%s/%d", name, i)
		t.Run(name, func(t *testing.T) {
			if _, ok := objectMembers(body, nil); !ok {
				t.Fatalf("the store's answer does not take the fast way: %s", body)
			}
			kind := berth.KindHotel
			if strings.HasPrefix(name, "clinic/") {
				kind = berth.KindClinic
			}
			fast, slow, fastErr, slowErr, fastCalls, slowCalls := spliceBoth(kind, body, false)
			if fastErr != nil || slowErr != nil {
				t.Fatalf("errors: %v, %v", fastErr, slowErr)
			}
			if !bytes.Equal(fast.Body, slow.Body) || fastCalls != slowCalls {
				t.Fatalf("fast and JSON answers differ:\n%s\n%s", fast.Body, slow.Body)
			}
			base, _, _ := strings.Cut(name, "/")
			wantIntent := base == "hotel" || base == "hotel with contact" || base == "clinic"
			if got := bytes.Contains(fast.Body, []byte(`"payment":{"intent_id":"pi_`)); got != wantIntent || (fastCalls == 1) != wantIntent {
				t.Fatalf("payment member present %v, intents %d; want %v:\n%s", got, fastCalls, wantIntent, fast.Body)
			}
		})
	}
}

// TestPaymentSpliceProviderDown: an unreachable provider is the same 503
// either way, the hold standing.
func TestPaymentSpliceProviderDown(t *testing.T) {
	_, _, fastErr, slowErr, _, _ := spliceBoth(berth.KindHotel, heldAnswers(t)["hotel"], true)
	if berth.ErrorCode(fastErr) != berth.CodeUnavailable || fastErr.Error() != slowErr.Error() {
		t.Fatalf("fast %v, JSON %v", fastErr, slowErr)
	}
}

// FuzzPaymentSplice: whatever the stored answer, reading its members off
// the bytes gives what encoding/json gives — the same body byte for byte,
// the same error or none, the same intents asked for.
func FuzzPaymentSplice(f *testing.F) {
	for _, body := range heldAnswers(f) {
		f.Add(body, false)
		f.Add(body, true)
	}
	for _, seed := range []string{`{}`, `{"status":"held"}`, `{"status":"held","total_price_cents":1,"currency":"EUR"}`,
		`{"status":"held","total_price_cents":1.5,"currency":"EUR"}`, `{"status":"held","total_price_cents":1e3,"currency":"EUR"}`,
		`{"status":"held","total_price_cents":-0,"currency":"EUR"}`, `{"status":"held","total_price_cents":null,"currency":"EUR"}`,
		`{"Status":"held","total_price_cents":1,"currency":"EUR"}`, `{"status":"held","status":"confirmed","total_price_cents":1,"currency":"EUR"}`,
		`{"status":"he\u006cd","total_price_cents":1,"currency":"EUR"}`, `{"status":"held","total_price_cents":1,"currency":"EUR","x":[1,{"a":[]},"<"]}`,
		`{"status":"held", "total_price_cents":1,"currency":"EUR"}`, `{"status":"held","total_price_cents":9223372036854775808,"currency":"EUR"}`,
		`{"status":"held","total_price_cents":1,"currency":"EUR","appointment_id":7}`, `{"a":01}`, `{"a":tru}`, `[]`, `{"a":"\x"}`,
	} {
		f.Add([]byte(seed), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, clinic bool) {
		kind := berth.KindHotel
		if clinic {
			kind = berth.KindClinic
		}
		fast, slow, fastErr, slowErr, fastCalls, slowCalls := spliceBoth(kind, body, false)
		if (fastErr == nil) != (slowErr == nil) || fastCalls != slowCalls {
			t.Fatalf("fast: %v, %d intents; JSON: %v, %d intents", fastErr, fastCalls, slowErr, slowCalls)
		}
		if fastErr == nil && (!bytes.Equal(fast.Body, slow.Body) || fast.Status != slow.Status) {
			t.Fatalf("answers differ:\n%s\n%s", fast.Body, slow.Body)
		}
		if fastErr == nil && fastCalls == 1 && !json.Valid(fast.Body) {
			t.Fatalf("not JSON: %s", fast.Body)
		}
	})
}

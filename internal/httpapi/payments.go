package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
)

// PaymentStore is what the payment webhook (API.md, Payments) needs: the
// secret the provider signs with and the effects of a payment outcome.
type PaymentStore interface {
	WebhookSecret() []byte
	PaymentEffects
}

// PaymentEffects applies payment outcomes (postgres.Store implements it).
// idem carries the webhook event id; it is stored in the same transaction
// as the effect, so a redelivered event changes nothing.
type PaymentEffects interface {
	PaymentSucceeded(ctx context.Context, kind berth.Kind, partitionID, reservationID string, pay payments.Payment, idem *berth.Idem) (berth.Response, error)
	PaymentFailed(ctx context.Context, kind berth.Kind, partitionID, reservationID string, idem *berth.Idem) (berth.Response, error)
}

// NewPaymentWebhook pairs the effects with the webhook secret.
func NewPaymentWebhook(secret string, effects PaymentEffects) PaymentStore {
	return paymentWebhook{secret: []byte(secret), PaymentEffects: effects}
}

type paymentWebhook struct {
	secret []byte
	PaymentEffects
}

func (p paymentWebhook) WebhookSecret() []byte { return p.secret }

// paymentRoutes registers the payment webhook (API.md, Payments).
func (s *Server) paymentRoutes() {
	s.mux.HandleFunc("POST /v1/payments/webhook", s.handle(s.paymentWebhook))
}

type paymentEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		Kind          string `json:"kind"`
		PartitionID   string `json:"partition_id"`
		ReservationID string `json:"reservation_id"`
		PaymentRef    string `json:"payment_ref"`
		AmountCents   *int64 `json:"amount_cents"`
		Currency      string `json:"currency,omitempty"`
	} `json:"data"`
}

const maxWebhookBody = 64 << 10

func (s *Server) paymentWebhook(w http.ResponseWriter, r *http.Request) error {
	// The signature covers the raw bytes: read them before any decoding.
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		return berth.Errorf(berth.CodeInvalidRequest, "the body is unreadable or too large")
	}
	if err := payments.Verify(s.cfg.Payments.WebhookSecret(), r.Header.Get("Berth-Signature"), raw, s.cfg.Now()); err != nil {
		return berth.Errorf(berth.CodeUnauthorized, "the Berth-Signature header is missing, invalid or stale")
	}
	// The same strict decoding as every other body: an event id with a NUL
	// or another control character is a 400, never a 500 from the store.
	var ev paymentEvent
	if err := DecodeBytes(raw, &ev); err != nil {
		return err
	}
	var f Fields
	if ev.ID == "" || len(ev.ID) > 255 {
		f.Add("id", "want 1 to 255 characters")
	}
	if ev.Type != "payment.succeeded" && ev.Type != "payment.failed" {
		f.Add("type", "want payment.succeeded or payment.failed")
	}
	kind := berth.Kind(ev.Data.Kind)
	if !kind.Valid() {
		f.Add("data.kind", "want hotel or clinic")
	}
	if !ValidID(ev.Data.PartitionID) {
		f.Add("data.partition_id", "want a UUID")
	}
	if !ValidID(ev.Data.ReservationID) {
		f.Add("data.reservation_id", "want a UUID")
	}
	if ev.Type == "payment.succeeded" && (ev.Data.PaymentRef == "" || len(ev.Data.PaymentRef) > 200) {
		f.Add("data.payment_ref", "want 1 to 200 characters")
	}
	// What was paid is compared with what is due, so it must be stated
	// whole: an amount in minor units and its ISO 4217 currency.
	if a := ev.Data.AmountCents; (a == nil && ev.Type == "payment.succeeded") || (a != nil && *a < 0) {
		f.Add("data.amount_cents", "want the amount paid in minor units, 0 or more")
	}
	if (ev.Type == "payment.succeeded" || ev.Data.Currency != "") && !validCurrency(ev.Data.Currency) {
		f.Add("data.currency", "want an ISO 4217 code such as EUR")
	}
	if err := f.Err(); err != nil {
		return err
	}
	// The event id is deduplicated in the provider's own key space, never
	// among clients' Idempotency-Keys (which could otherwise squat it).
	idem := &berth.Idem{
		Key:     ev.ID,
		Hash:    RequestHash("POST /v1/payments/webhook", "payment-provider", ev),
		Render:  renderPayment(ev),
		Webhook: true,
	}
	var resp berth.Response
	if ev.Type == "payment.succeeded" {
		pay := payments.Payment{Ref: ev.Data.PaymentRef, Method: payments.MethodWebhook, AmountCents: *ev.Data.AmountCents,
			Currency: ev.Data.Currency, ActorSubject: "payment-provider", ActorRole: "system"}
		resp, err = s.cfg.Payments.PaymentSucceeded(r.Context(), kind, ev.Data.PartitionID, ev.Data.ReservationID, pay, idem)
	} else {
		resp, err = s.cfg.Payments.PaymentFailed(r.Context(), kind, ev.Data.PartitionID, ev.Data.ReservationID, idem)
	}
	if err != nil {
		return err
	}
	if resp.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeRaw(w, resp.Status, resp.Body)
	return nil
}

// renderPayment answers the provider. Every handled outcome is a 200 — a
// lapsed hold whose rooms were sold, a payment for a cancelled reservation,
// a payment of the wrong amount or currency is settled as far as the
// provider is concerned; the outcome says what happened (payment_mismatch
// for a wrong amount or currency) and refund_requested says the money goes
// back.
func renderPayment(ev paymentEvent) func(any, error) (int, []byte) {
	return func(value any, err error) (int, []byte) {
		out := map[string]any{"id": ev.ID, "type": ev.Type, "received": true}
		switch v := value.(type) {
		case reservation.Reservation:
			out["reservation_id"], out["status"] = v.ID, v.Status
		case appointment.Appointment:
			out["reservation_id"], out["status"] = v.ID, v.Status
		}
		out["outcome"] = "applied"
		var be *berth.Error
		switch {
		case err == nil:
		case errors.As(err, &be) && be.Code == berth.CodePaymentRequired:
			out["outcome"] = "payment_mismatch"
			out["reason"] = be.Extra["reason"]
		default:
			out["outcome"] = string(berth.ErrorCode(err))
		}
		if errors.As(err, &be) && (be.Extra["refund_requested"] == true || be.Code == berth.CodeHoldExpired) {
			out["refund_requested"] = true
		}
		body, _ := json.Marshal(out)
		return http.StatusOK, body
	}
}

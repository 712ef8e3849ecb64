package httpapi

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
)

// StripeEvents verifies a webhook body Stripe signed (Stripe-Signature)
// and returns the event's id, its type and the id of the object it is
// about (stripepay.Events implements it).
type StripeEvents interface {
	Verify(raw []byte, signature string) (id, typ, objectID string, err error)
}

// StripeWebhook serves POST /v1/payments/stripe/webhook: Stripe's own
// events, in Stripe's format, for a deployment whose provider is Stripe.
type StripeWebhook struct {
	Events StripeEvents
	// Effects applies an outcome exactly as the Berth-signed webhook does.
	Effects PaymentEffects
}

func (s *Server) stripeWebhookRoutes() {
	s.mux.HandleFunc("POST /v1/payments/stripe/webhook", s.handle(s.stripeWebhook))
}

// The events that may settle a payment; every other type is acknowledged
// and ignored (an endpoint subscribed to more than it needs must not make
// Stripe retry for days).
var stripePaymentEvents = map[string]bool{
	"payment_intent.succeeded":      true,
	"payment_intent.payment_failed": true,
	"payment_intent.canceled":       true,
}

// stripeWebhook takes nothing from the event but its id, its type and the
// PaymentIntent it names: what was paid, how much, in what currency and
// for which reservation or appointment is asked of Stripe itself (the
// provider's GetIntent), then applied through the same effects, the same
// amount and currency checks and the same key space of webhook events as
// POST /v1/payments/webhook. A signed event is still only a notice: an old
// snapshot, or an event sent for another account's intent, confirms nothing
// that Stripe does not report paid for exactly what is due.
func (s *Server) stripeWebhook(w http.ResponseWriter, r *http.Request) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		return berth.Errorf(berth.CodeInvalidRequest, "the body is unreadable or too large")
	}
	id, typ, intentID, err := s.cfg.StripeWebhook.Events.Verify(raw, r.Header.Get("Stripe-Signature"))
	if err != nil {
		return &berth.Error{Code: berth.CodeUnauthorized, Err: err,
			Detail: "the Stripe-Signature header is missing, invalid or stale, or the body is not a Stripe event"}
	}
	var f Fields
	if !stripeID(id) {
		f.Add("id", "want a Stripe event id")
	}
	if !stripeID(strings.ReplaceAll(typ, ".", "_")) {
		f.Add("type", "want a Stripe event type")
	}
	if err := f.Err(); err != nil {
		return err
	}
	ack := map[string]any{"id": id, "type": typ, "received": true}
	if !stripePaymentEvents[typ] {
		ack["outcome"] = "ignored"
		WriteJSON(w, http.StatusOK, ack)
		return nil
	}
	if !stripeID(intentID) {
		return berth.Invalid(berth.FieldError{Field: "data.object.id", Message: "want a PaymentIntent id"})
	}
	in, err := s.cfg.PaymentProvider.GetIntent(r.Context(), intentID)
	switch {
	case errors.Is(err, payments.ErrIntentNotFound):
		ack["outcome"] = string(berth.CodeNotFound)
		WriteJSON(w, http.StatusOK, ack)
		return nil
	case err != nil:
		// Stripe retries a failed delivery: the outcome is decided when
		// Stripe can be asked.
		return &berth.Error{Code: berth.CodeUnavailable, RetryAfter: 5, Err: err,
			Detail: "the payment provider could not be asked about this payment; deliver the event again"}
	}
	kind := berth.Kind(in.Kind)
	if !kind.Valid() || !ValidID(in.PartitionID) || !ValidID(in.ReservationID) {
		// Not an intent Berth created: nothing of ours is paid by it.
		ack["outcome"], ack["reason"] = string(berth.CodeNotFound), "not_a_berth_payment"
		WriteJSON(w, http.StatusOK, ack)
		return nil
	}
	if in.Status != payments.IntentSucceeded && in.Status != payments.IntentFailed {
		// A failed attempt leaves the intent open (the guest may pay
		// again); nothing is decided until it succeeds or is cancelled.
		ack["outcome"], ack["reservation_id"] = "pending", in.ReservationID
		WriteJSON(w, http.StatusOK, ack)
		return nil
	}
	var ev paymentEvent
	ev.ID, ev.Type = id, typ
	ev.Data.Kind, ev.Data.PartitionID, ev.Data.ReservationID = in.Kind, in.PartitionID, in.ReservationID
	ev.Data.PaymentRef, ev.Data.AmountCents, ev.Data.Currency = in.ID, &in.AmountCents, in.Currency
	idem := &berth.Idem{
		Key: id,
		// What Stripe says of the intent may change between deliveries
		// (a refund later); the event it answers does not.
		Hash:    RequestHash("POST /v1/payments/stripe/webhook", "payment-provider", []string{id, typ, intentID}),
		Render:  renderPayment(ev),
		Webhook: true,
	}
	var resp berth.Response
	if in.Status == payments.IntentSucceeded {
		pay := payments.Payment{Ref: in.ID, Method: payments.MethodWebhook, AmountCents: in.AmountCents,
			Currency: in.Currency, ActorSubject: "stripe", ActorRole: "system"}
		resp, err = s.cfg.StripeWebhook.Effects.PaymentSucceeded(r.Context(), kind, in.PartitionID, in.ReservationID, pay, idem)
	} else {
		resp, err = s.cfg.StripeWebhook.Effects.PaymentFailed(r.Context(), kind, in.PartitionID, in.ReservationID, idem)
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

// stripeID reports whether s has the shape of a Stripe id: 1–255 letters,
// digits and underscores (evt_…, pi_…).
func stripeID(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

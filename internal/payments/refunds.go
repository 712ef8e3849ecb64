package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/berthhq/berth/internal/events"
)

// RefundRequest asks the provider to give money back. IdempotencyKey is the
// refund_requested event id: a provider that sees a key twice refunds once.
type RefundRequest struct {
	IdempotencyKey string
	Kind           string
	PartitionID    string
	ReservationID  string
	PaymentRef     string
	AmountCents    int64
	Currency       string
}

// Refund is the provider's answer.
type Refund struct {
	ID string
	// Duplicate is set when the key was seen before (nothing new happened).
	Duplicate bool
}

// Provider is the payment provider as the refunds consumer needs it.
//
// Refund returns an error wrapping berth.ErrDependency when the provider
// could not be reached or could not answer (a timeout, a 5xx, a 429): the
// refunds consumer then retries the event while that lasts and never
// dead-letters it for it. Any other error is the request's own.
type Provider interface {
	Refund(ctx context.Context, req RefundRequest) (Refund, error)
}

// RefundsConsumer is the durable consumer name of refunds.
const RefundsConsumer = "refunds"

// Refunder turns refund_requested events into provider refunds. It is
// idempotent per event through the provider's idempotency key, so a
// redelivery (or a crash between refund and ack) never refunds twice.
type Refunder struct {
	Provider Provider
	Log      *slog.Logger
}

type refundData struct {
	Reservation *struct {
		ID      string `json:"reservation_id"`
		HotelID string `json:"hotel_id"`
	} `json:"reservation"`
	Appointment *struct {
		ID       string `json:"appointment_id"`
		ClinicID string `json:"clinic_id"`
	} `json:"appointment"`
	PaymentRef  string `json:"payment_ref"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// Apply handles one event; only refund_requested does anything.
func (r *Refunder) Apply(ctx context.Context, e events.Envelope) error {
	m := struct{ Event events.Envelope }{e}
	if m.Event.Type != "refund_requested" {
		return nil
	}
	var d refundData
	if err := json.Unmarshal(m.Event.Data, &d); err != nil {
		return fmt.Errorf("refund %s: %w", m.Event.ID, err)
	}
	req := RefundRequest{IdempotencyKey: m.Event.ID, Kind: m.Event.Kind, PartitionID: m.Event.PartitionID,
		PaymentRef: d.PaymentRef, AmountCents: d.AmountCents, Currency: d.Currency}
	switch {
	case d.Reservation != nil:
		req.ReservationID = d.Reservation.ID
	case d.Appointment != nil:
		req.ReservationID = d.Appointment.ID
	default:
		req.ReservationID = m.Event.Subject
	}
	if req.ReservationID == "" || req.AmountCents < 0 {
		return fmt.Errorf("refund %s: no reservation or a negative amount", m.Event.ID)
	}
	res, err := r.Provider.Refund(ctx, req)
	if err != nil {
		return fmt.Errorf("refund %s: %w", m.Event.ID, err)
	}
	if r.Log != nil && !res.Duplicate {
		r.Log.Info("refunded", "event_id", m.Event.ID, "reservation_id", req.ReservationID, "amount_cents", req.AmountCents, "refund_id", res.ID)
	}
	return nil
}

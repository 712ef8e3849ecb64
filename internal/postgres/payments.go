package postgres

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/appointment"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// anyGuest authorizes the payment provider: a verified webhook may act on
// any guest's reservation.
func anyGuest(string) error { return nil }

// PaymentSucceeded confirms a reservation paid for, exactly as /confirm
// does (a lapsed hold re-takes its nights or requests a refund). The
// webhook's event id travels in idem and is stored in the same transaction.
func (s *Store) PaymentSucceeded(ctx context.Context, kind berth.Kind, partitionID, reservationID, paymentRef string, idem *berth.Idem) (berth.Response, error) {
	if kind != berth.KindHotel {
		return berth.Response{}, berth.Errorf(berth.CodeNotFound, "%s payments are not handled by this service yet", kind)
	}
	return s.Confirm(ctx, partitionID, reservationID, paymentRef, anyGuest, idem)
}

// PaymentFailed releases a hold whose payment failed: a held reservation is
// cancelled and its nights return to inventory. Any other status is left as
// it is (a confirmed booking is not undone by a late failure notice).
func (s *Store) PaymentFailed(ctx context.Context, kind berth.Kind, partitionID, reservationID string, idem *berth.Idem) (berth.Response, error) {
	if kind != berth.KindHotel {
		return berth.Response{}, berth.Errorf(berth.CodeNotFound, "%s payments are not handled by this service yet", kind)
	}
	return s.write(ctx, berth.KindHotel, partitionID, idem, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		r, err := lockReservation(ctx, tx, partitionID, reservationID)
		if err != nil {
			return nil, err
		}
		if !reservation.CancelOnPaymentFailure(r.Status) {
			return r, nil
		}
		if err := releaseStay(ctx, tx, r); err != nil {
			return nil, err
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		setStatus(b, &r, reservation.StatusCancelled, now)
		return r, queueEvents(ctx, b, s.region, reservationEvent(reservation.EventCancelled, r))
	})
}

// PaymentEffects applies payment outcomes to the partition the webhook
// names: hotels through Store, clinics through ClinicStore (nil when the
// service runs without clinics).
type PaymentEffects struct {
	Hotels  *Store
	Clinics *ClinicStore
}

// paymentActor is who the audit trail names for a change a payment made.
var paymentActor = appointment.Actor{Subject: "payment-provider", Role: "system"}

// PaymentSucceeded confirms the reservation or appointment paid for.
func (p PaymentEffects) PaymentSucceeded(ctx context.Context, kind berth.Kind, partitionID, reservationID, paymentRef string, idem *berth.Idem) (berth.Response, error) {
	if kind == berth.KindClinic && p.Clinics != nil {
		return p.Clinics.Confirm(ctx, partitionID, reservationID, paymentRef, anyGuest, paymentActor, "", idem)
	}
	return p.Hotels.PaymentSucceeded(ctx, kind, partitionID, reservationID, paymentRef, idem)
}

// PaymentFailed releases the hold whose payment failed; anything else is
// left as it is.
func (p PaymentEffects) PaymentFailed(ctx context.Context, kind berth.Kind, partitionID, reservationID string, idem *berth.Idem) (berth.Response, error) {
	if kind == berth.KindClinic && p.Clinics != nil {
		return p.Clinics.cancel(ctx, partitionID, reservationID, anyGuest, paymentActor, "", idem, true)
	}
	return p.Hotels.PaymentFailed(ctx, kind, partitionID, reservationID, idem)
}

// DevPaymentProvider is the development payment provider: it records
// refunds in payment_refunds, once per idempotency key.
type DevPaymentProvider struct{ db *DB }

var _ payments.Provider = (*DevPaymentProvider)(nil)

// NewDevPaymentProvider returns the development provider.
func NewDevPaymentProvider(db *DB) *DevPaymentProvider { return &DevPaymentProvider{db: db} }

// Refund records a refund unless one with the same key exists.
func (p *DevPaymentProvider) Refund(ctx context.Context, req payments.RefundRequest) (payments.Refund, error) {
	id := uuid.NewString()
	tag, err := p.db.pool.Exec(ctx, `INSERT INTO payment_refunds (idempotency_key, refund_id, kind, partition_id, reservation_id,
		payment_ref, amount_cents, currency) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (idempotency_key) DO NOTHING`,
		req.IdempotencyKey, id, req.Kind, req.PartitionID, req.ReservationID, req.PaymentRef, req.AmountCents, req.Currency)
	if err != nil {
		return payments.Refund{}, fmt.Errorf("record refund: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return payments.Refund{ID: id}, nil
	}
	err = p.db.pool.QueryRow(ctx, `SELECT refund_id::TEXT FROM payment_refunds WHERE idempotency_key = $1`, req.IdempotencyKey).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return payments.Refund{}, fmt.Errorf("record refund: key vanished")
	}
	if err != nil {
		return payments.Refund{}, fmt.Errorf("read refund: %w", err)
	}
	return payments.Refund{ID: id, Duplicate: true}, nil
}

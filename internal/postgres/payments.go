package postgres

import (
	"context"
	"errors"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// anyGuest authorizes the payment provider: a verified webhook may act on
// any guest's reservation.
func anyGuest(string) error { return nil }

// PaymentSucceeded confirms a reservation paid for, exactly as /confirm
// does (a lapsed hold re-takes its nights or requests a refund); a payment
// of another amount or currency confirms nothing and is refunded. The
// webhook's event id travels in idem and is stored in the same transaction.
func (s *Store) PaymentSucceeded(ctx context.Context, kind berth.Kind, partitionID, reservationID string, pay payments.Payment, idem *berth.Idem) (berth.Response, error) {
	if kind != berth.KindHotel {
		return berth.Response{}, berth.Errorf(berth.CodeNotFound, "%s payments are not handled by this service yet", kind)
	}
	return s.Confirm(ctx, partitionID, reservationID, pay, anyGuest, idem)
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
		counts, err := releaseStay(ctx, tx, r)
		if err != nil {
			return nil, err
		}
		queueReleaseGuestHold(b, r) // a held reservation: it counted as a hold

		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		setStatus(b, &r, reservation.StatusCancelled, now)
		return r, queueEvents(ctx, b, s.region, reservationInventoryEvent(reservation.EventCancelled, r, counts))
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
func (p PaymentEffects) PaymentSucceeded(ctx context.Context, kind berth.Kind, partitionID, reservationID string, pay payments.Payment, idem *berth.Idem) (berth.Response, error) {
	if kind == berth.KindClinic && p.Clinics != nil {
		return p.Clinics.Confirm(ctx, partitionID, reservationID, pay, anyGuest, paymentActor, "", idem)
	}
	return p.Hotels.PaymentSucceeded(ctx, kind, partitionID, reservationID, pay, idem)
}

// PaymentFailed releases the hold whose payment failed; anything else is
// left as it is.
func (p PaymentEffects) PaymentFailed(ctx context.Context, kind berth.Kind, partitionID, reservationID string, idem *berth.Idem) (berth.Response, error) {
	if kind == berth.KindClinic && p.Clinics != nil {
		return p.Clinics.cancel(ctx, partitionID, reservationID, anyGuest, paymentActor, "", idem, true)
	}
	return p.Hotels.PaymentFailed(ctx, kind, partitionID, reservationID, idem)
}

// refundEvent is a refund_requested event: give amount back for the
// reservation or appointment (subjectKey names which, subject is its value).
func refundEvent(kind berth.Kind, partitionID, aggregateID string, version int64, subjectKey string, subject any,
	paymentRef string, amountCents int64, currency, reason string) event {
	return event{kind: kind, partitionID: partitionID, typ: reservation.EventRefundRequested, aggregateID: aggregateID,
		version: version, data: map[string]any{subjectKey: subject, "payment_ref": paymentRef, "amount_cents": amountCents,
			"currency": currency, "reason": reason}}
}

// refunded marks an outcome whose money goes back, for the webhook's answer.
var refunded = map[string]any{"refund_requested": true}

// unappliedPayment answers a payment for something already confirmed. The
// provider's payment under another reference is money taken twice: it is
// refunded, and the outcome says so. Anything else is the plain replay of a
// confirmation (nil).
func unappliedPayment(pay payments.Payment, confirmedRef string, refund func(reason string) error) error {
	if !pay.RefundsOnMismatch() || pay.Ref == confirmedRef || pay.AmountCents <= 0 {
		return nil
	}
	if err := refund("already_confirmed"); err != nil {
		return err
	}
	return &berth.Error{Code: berth.CodeInvalidState, Extra: refunded,
		Detail: "already confirmed with another payment; this payment is refunded"}
}

// refusedPayment answers a payment for something that can no longer be
// confirmed (cancelled, expired for good): invalid_state, and the
// provider's money goes back.
func refusedPayment(pay payments.Payment, refund func(reason string) error, detail string) error {
	e := &berth.Error{Code: berth.CodeInvalidState, Detail: detail}
	if pay.RefundsOnMismatch() && pay.AmountCents > 0 {
		if err := refund("not_confirmable"); err != nil {
			return err
		}
		e.Extra, e.Detail = refunded, detail+"; the payment is refunded"
	}
	return e
}

// mismatchedPayment answers a payment that does not settle what is due:
// 402 payment_required naming why; a provider's payment is refunded.
func mismatchedPayment(pay payments.Payment, mismatch error, refund func(reason string) error) error {
	e := &berth.Error{Code: berth.CodePaymentRequired, Detail: "the payment does not settle what is due: " + mismatch.Error(),
		Extra: map[string]any{}}
	var m *payments.Mismatch
	if errors.As(mismatch, &m) {
		e.Extra["reason"] = m.Reason
	}
	if pay.RefundsOnMismatch() && pay.AmountCents > 0 {
		if err := refund("payment_mismatch"); err != nil {
			return err
		}
		e.Extra["refund_requested"] = true
	}
	return e
}

// queuePaymentAudit writes the audit row of a confirmation: how it was paid
// for, the amount compared, who confirmed, when (database time).
func queuePaymentAudit(b *pgx.Batch, region string, due payments.Due, pay payments.Payment) {
	amount, currency := pay.AmountCents, pay.Currency
	if !pay.Verified() || pay.Method == payments.MethodNone {
		// The desk took what was due (its word, audited); nothing was due.
		amount, currency = max(due.AmountCents, 0), due.Currency
	}
	b.Queue(`INSERT INTO payment_confirmations (partition_id, reservation_id, home_region, kind, method, payment_ref,
			amount_cents, currency, actor_subject, actor_role)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		due.PartitionID, due.ReservationID, region, due.Kind, string(pay.Method), pay.Ref, amount, currency,
		pay.ActorSubject, pay.ActorRole)
}

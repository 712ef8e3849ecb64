package payments

import (
	"errors"
	"fmt"
)

// IntentStatus is where a payment intent stands, in the provider's words
// mapped to the few Berth acts on.
type IntentStatus string

// The statuses Berth tells apart. Anything a provider reports that is not
// succeeded or failed is pending: no money has arrived yet.
const (
	IntentPending   IntentStatus = "requires_payment"
	IntentSucceeded IntentStatus = "succeeded"
	IntentFailed    IntentStatus = "failed"
)

// IntentRequest asks the provider for a payment intent: amount and currency
// of one reservation or appointment. IdempotencyKey makes a retried request
// (a replayed hold) return the same intent instead of a second one.
type IntentRequest struct {
	Kind           string // hotel or clinic
	PartitionID    string
	ReservationID  string // the appointment id for clinics
	AmountCents    int64
	Currency       string // ISO 4217, upper case
	IdempotencyKey string
}

// Intent is a payment intent as the provider reports it. Kind, PartitionID
// and ReservationID come from the metadata written when it was created:
// they bind the intent to the one reservation it pays for.
type Intent struct {
	ID            string       `json:"intent_id"`
	ClientSecret  string       `json:"client_secret,omitempty"`
	AmountCents   int64        `json:"amount_cents"`
	Currency      string       `json:"currency"`
	Status        IntentStatus `json:"status"`
	Kind          string       `json:"-"`
	PartitionID   string       `json:"-"`
	ReservationID string       `json:"-"`
}

// ErrIntentNotFound is a payment_ref the provider does not know.
var ErrIntentNotFound = errors.New("payment intent not found")

// Due is what a reservation costs: what a payment must match exactly.
type Due struct {
	Kind          string
	PartitionID   string
	ReservationID string
	AmountCents   int64
	Currency      string
}

// Mismatch is why a payment does not settle a Due.
type Mismatch struct {
	Reason string // not_succeeded, other_reservation, amount, currency
	Detail string
}

func (m *Mismatch) Error() string { return m.Detail }

// Check reports whether the intent settles d: the provider says it
// succeeded, it was made for this very reservation, and it is for exactly
// the amount and currency due. A paid intent of another reservation (even
// of the same price) does not settle this one.
func (d Due) Check(in Intent) error {
	switch {
	case in.Status != IntentSucceeded:
		return &Mismatch{Reason: "not_succeeded", Detail: fmt.Sprintf("payment %s has not succeeded (%s)", in.ID, in.Status)}
	case in.Kind != d.Kind || in.PartitionID != d.PartitionID || in.ReservationID != d.ReservationID:
		return &Mismatch{Reason: "other_reservation", Detail: fmt.Sprintf("payment %s was not made for this %s", in.ID, noun(d.Kind))}
	}
	return d.Covers(in.AmountCents, in.Currency)
}

// Covers reports whether amount and currency are exactly what is due.
func (d Due) Covers(amountCents int64, currency string) error {
	if currency != d.Currency {
		return &Mismatch{Reason: "currency", Detail: fmt.Sprintf("paid in %q, due in %q", currency, d.Currency)}
	}
	if amountCents != d.AmountCents {
		return &Mismatch{Reason: "amount", Detail: fmt.Sprintf("paid %d, due %d (minor units of %s)", amountCents, d.AmountCents, d.Currency)}
	}
	return nil
}

func noun(kind string) string {
	if kind == "clinic" {
		return "appointment"
	}
	return "reservation"
}

// Method is how a confirmation was paid for; the audit row names it.
type Method string

const (
	// MethodOnline is a guest's /confirm with a payment the provider
	// reported as succeeded for this reservation.
	MethodOnline Method = "online"
	// MethodWebhook is the provider's signed payment.succeeded event.
	MethodWebhook Method = "webhook"
	// MethodDesk is staff or an admin confirming a payment taken outside
	// the provider (at the desk); no provider is asked.
	MethodDesk Method = "desk"
	// MethodNone is a confirmation of something that costs nothing.
	MethodNone Method = "none"
)

// Payment is the evidence a confirmation carries into the store. For
// online and webhook payments AmountCents and Currency are what the
// provider reports as paid; the store compares them with the row it has
// locked, so the decision and the state change are one transaction.
type Payment struct {
	Ref         string
	Method      Method
	AmountCents int64
	Currency    string
	// ActorSubject and ActorRole name who confirmed (the audit row).
	ActorSubject string
	ActorRole    string
}

// Verified reports whether the method needs the amount to match: every
// method but the desk (where staff took the money themselves).
func (p Payment) Verified() bool { return p.Method != MethodDesk }

// Settles decides whether p pays for d. Desk payments settle by the word
// of the staff member (audited); a free reservation needs no payment; a
// provider's payment must match exactly; anything else settles nothing.
func (p Payment) Settles(d Due) error {
	switch p.Method {
	case MethodDesk:
		return nil
	case MethodNone:
		if d.AmountCents == 0 {
			return nil
		}
		return &Mismatch{Reason: "amount", Detail: fmt.Sprintf("%d minor units of %s are due", d.AmountCents, d.Currency)}
	case MethodOnline, MethodWebhook:
		return d.Covers(p.AmountCents, p.Currency)
	}
	return &Mismatch{Reason: "method", Detail: fmt.Sprintf("no payment method %q", p.Method)}
}

// TookMoney reports whether the provider holds money for this payment
// (which a lapsed hold must give back); desk money is the desk's to return.
func (p Payment) TookMoney() bool { return p.Method == MethodOnline || p.Method == MethodWebhook }

// RefundsOnMismatch reports whether money that arrived and cannot be
// applied goes back: a provider event is money already taken; a guest's
// refused /confirm took none.
func (p Payment) RefundsOnMismatch() bool { return p.Method == MethodWebhook }

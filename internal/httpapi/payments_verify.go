package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
)

// PaymentProvider is what the booking edge needs from the payment provider
// (internal/stripepay for Stripe, postgres.DevPaymentProvider for
// development): an intent for every prepaid hold, and the provider's own
// word on a payment_ref before a guest's confirmation. Refunds go through
// payments.Provider, from the refunds consumer.
type PaymentProvider interface {
	CreateIntent(ctx context.Context, req payments.IntentRequest) (payments.Intent, error)
	GetIntent(ctx context.Context, id string) (payments.Intent, error)
}

// paymentView is the new `payment` member of a prepaid hold's answer: what
// the client needs to pay (API.md, "Paying for a hold").
type paymentView struct {
	IntentID     string `json:"intent_id"`
	AmountCents  int64  `json:"amount_cents"`
	Currency     string `json:"currency"`
	ClientSecret string `json:"client_secret"`
}

// withPaymentIntent adds the payment intent of a fresh or replayed prepaid
// hold to its answer. The hold has committed when this runs (no network
// call inside a transaction); the intent is created under a key derived from
// the reservation, so a replay of the hold gets the same intent. When the
// provider cannot be reached the answer is 503 with Retry-After: the hold
// stands, and the client's retry with the same Idempotency-Key replays it
// and asks the provider again.
func (s *Server) withPaymentIntent(ctx context.Context, kind berth.Kind, partitionID string, resp berth.Response) (berth.Response, error) {
	if s.cfg.PaymentProvider == nil || resp.Status != http.StatusCreated {
		return resp, nil
	}
	// The answer's members are read off the stored bytes (answer_splice.go);
	// anything not in the shape this service writes goes through
	// encoding/json, with the same outcome.
	var buf [32]member
	members, ok := objectMembers(resp.Body, buf[:])
	// Every member the JSON way decodes is read, so that one it would refuse
	// (a price that is not an integer, say) takes it there.
	resID, ok1 := plainString(members, "reservation_id")
	apptID, ok2 := plainString(members, "appointment_id")
	status, ok3 := plainString(members, "status")
	total, ok4 := plainInt(members, "total_price_cents")
	price, ok5 := plainInt(members, "price_cents")
	currency, ok6 := plainString(members, "currency")
	if !ok || !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return s.withPaymentIntentJSON(ctx, kind, partitionID, resp)
	}
	id, amount := resID, total
	if kind == berth.KindClinic {
		id, amount = apptID, price
	}
	if status != "held" || amount == nil || *amount <= 0 || currency == "" {
		// Confirmed at once, free, or paid at the desk: nothing to pay online.
		return resp, nil
	}
	view, err := s.paymentIntent(ctx, kind, partitionID, id, *amount, currency)
	if err != nil {
		return resp, heldStands(err)
	}
	resp.Body = withMember(members, "payment", view.appendJSON(nil))
	return resp, nil
}

// heldStands tells the client of a hold whose intent could not be created
// that the hold stands.
func heldStands(err error) error {
	var be *berth.Error
	if errors.As(err, &be) {
		be.Detail = "the payment provider is unavailable; the hold stands: retry with the same Idempotency-Key"
	}
	return err
}

// withPaymentIntentJSON is withPaymentIntent through encoding/json: for
// answers not in the shape objectMembers reads, and the reference the fast
// way is tested against (FuzzPaymentSplice).
func (s *Server) withPaymentIntentJSON(ctx context.Context, kind berth.Kind, partitionID string, resp berth.Response) (berth.Response, error) {
	var held struct {
		ReservationID string `json:"reservation_id"`
		AppointmentID string `json:"appointment_id"`
		Status        string `json:"status"`
		Total         *int64 `json:"total_price_cents"`
		Price         *int64 `json:"price_cents"`
		Currency      string `json:"currency"`
	}
	if err := json.Unmarshal(resp.Body, &held); err != nil {
		return resp, err
	}
	id, amount := held.ReservationID, held.Total
	if kind == berth.KindClinic {
		id, amount = held.AppointmentID, held.Price
	}
	if held.Status != "held" || amount == nil || *amount <= 0 || held.Currency == "" {
		return resp, nil
	}
	view, err := s.paymentIntent(ctx, kind, partitionID, id, *amount, held.Currency)
	if err != nil {
		return resp, heldStands(err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return resp, err
	}
	raw, err := json.Marshal(view)
	if err != nil {
		return resp, err
	}
	body["payment"] = raw
	if resp.Body, err = json.Marshal(body); err != nil {
		return resp, err
	}
	return resp, nil
}

// paymentIntent creates (or, under the same key, finds again) the payment
// intent of a held reservation or appointment id for amount in currency: a
// fresh hold's, and a waitlist offer's, which the guest asks for when they
// read their entry. An unreachable provider is 503 with Retry-After.
func (s *Server) paymentIntent(ctx context.Context, kind berth.Kind, partitionID, id string, amount int64, currency string) (paymentView, error) {
	in, err := s.cfg.PaymentProvider.CreateIntent(ctx, payments.IntentRequest{
		Kind: string(kind), PartitionID: partitionID, ReservationID: id, AmountCents: amount, Currency: currency,
		IdempotencyKey: "berth-" + string(kind) + "-" + id,
	})
	if err != nil {
		s.log.ErrorContext(ctx, "create payment intent", "kind", kind, "reservation_id", id, "err", err)
		return paymentView{}, &berth.Error{Code: berth.CodeUnavailable, RetryAfter: 2, Err: err,
			Detail: "the payment provider is unavailable; the hold stands: retry"}
	}
	return paymentView{IntentID: in.ID, AmountCents: in.AmountCents, Currency: in.Currency, ClientSecret: in.ClientSecret}, nil
}

// guestPayment verifies a guest's payment_ref with the provider before the
// confirming transaction (the network call stays outside it): the intent
// must have succeeded, have been made for this reservation, and be for
// exactly what is due. The store then checks amount and currency again
// against the locked row. Nothing due (a free stay) needs no payment.
func (s *Server) guestPayment(ctx context.Context, p berth.Principal, ref string, due payments.Due, priced bool) (payments.Payment, error) {
	pay := payments.Payment{Ref: ref, ActorSubject: p.Subject, ActorRole: string(p.Role)}
	if !priced {
		return pay, berth.Errorf(berth.CodePaymentRequired, "this %s has no online price: it is paid at the desk", nounOf(due.Kind))
	}
	if due.AmountCents == 0 {
		pay.Method = payments.MethodNone
		return pay, nil
	}
	if s.cfg.PaymentProvider == nil {
		return pay, berth.Errorf(berth.CodePaymentRequired, "online payment is not available; pay at the desk")
	}
	in, err := s.cfg.PaymentProvider.GetIntent(ctx, ref)
	if errors.Is(err, payments.ErrIntentNotFound) {
		return pay, berth.Errorf(berth.CodePaymentRequired, "payment_ref names no payment")
	}
	if err != nil {
		s.log.ErrorContext(ctx, "verify payment", "payment_ref", truncate(ref, 64), "err", err)
		return pay, &berth.Error{Code: berth.CodeUnavailable, RetryAfter: 2, Err: err,
			Detail: "the payment provider is unavailable; nothing changed"}
	}
	if err := due.Check(in); err != nil {
		var m *payments.Mismatch
		e := berth.Errorf(berth.CodePaymentRequired, "%s", err.Error())
		if errors.As(err, &m) {
			e.Extra = map[string]any{"reason": m.Reason}
		}
		return pay, e
	}
	pay.Method, pay.AmountCents, pay.Currency = payments.MethodOnline, in.AmountCents, in.Currency
	return pay, nil
}

// deskPayment is a confirmation by staff or an admin of money taken at the
// desk: the provider is not asked, and the audit row names who and when.
func deskPayment(p berth.Principal, ref string) payments.Payment {
	return payments.Payment{Ref: ref, Method: payments.MethodDesk, ActorSubject: p.Subject, ActorRole: string(p.Role)}
}

func nounOf(kind string) string {
	if kind == string(berth.KindClinic) {
		return "appointment"
	}
	return "reservation"
}

package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DevPaymentProvider is the development payment provider. It behaves as a
// real provider does: an intent is created once per idempotency key (the
// same request gives the same intent), it succeeds only when someone pays
// it (Pay, the development-only endpoint) with its client secret, a key
// pays one intent only, and a refund is made once per key.
//
// Creating an intent writes nothing (ADR 0027): an intent is a
// self-describing token signed with a key the deployment's booking
// services share (payments.DevIntents, BERTH_DEV_INTENT_SECRET), as cheap
// as a real provider's intent is to Berth's database. The provider stores
// an intent in dev_payment_intents once something happens to it (paid or
// failed), so every booking service of a deployment (and every test) sees
// the same state; an intent never stored is waiting for payment. Intents
// with random ids — written before ADR 0027, or whose token would not fit
// in a payment_ref — are stored at once and read and paid from their row.
type DevPaymentProvider struct {
	DevRefunds
	intents *payments.DevIntents
}

var _ payments.Provider = (*DevPaymentProvider)(nil)

// NewDevPaymentProvider returns the development provider, its intents
// signed under secret (at least payments.MinDevIntentSecretLen bytes).
func NewDevPaymentProvider(db *DB, secret string) (*DevPaymentProvider, error) {
	intents, err := payments.NewDevIntents(secret)
	if err != nil {
		return nil, fmt.Errorf("development payment intents: %w", err)
	}
	return &DevPaymentProvider{DevRefunds: DevRefunds{db: db}, intents: intents}, nil
}

const devIntentColumns = `intent_id, client_secret, kind, partition_id, reservation_id, amount_cents, currency, status`

func scanDevIntent(row pgx.Row) (payments.Intent, error) {
	var (
		in     payments.Intent
		status string
	)
	err := row.Scan(&in.ID, &in.ClientSecret, &in.Kind, &in.PartitionID, &in.ReservationID, &in.AmountCents, &in.Currency, &status)
	in.Status = payments.IntentStatus(status)
	return in, err
}

// CreateIntent returns the intent of req: the same one every time the same
// request is made (a replayed hold asks again). It asks nothing of the
// database; a key reused for another payment gives another intent, of
// which the key lets only one ever be paid (Pay).
func (p *DevPaymentProvider) CreateIntent(ctx context.Context, req payments.IntentRequest) (payments.Intent, error) {
	in, err := p.intents.Mint(req)
	if errors.Is(err, payments.ErrDevIntentTooLong) {
		// Ids of partitions or reservations far longer than Berth's UUIDs
		// do not fit in a payment_ref: such an intent is stored at once,
		// under a random id, as before ADR 0027.
		return p.createStored(ctx, req)
	}
	return in, err
}

// createStoredIntentSQL records a new intent, or returns nothing when its
// idempotency key has one already.
const createStoredIntentSQL = `INSERT INTO dev_payment_intents (intent_id, idempotency_key, client_secret, kind, partition_id,
			reservation_id, amount_cents, currency, status)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'requires_payment') ON CONFLICT (idempotency_key) DO NOTHING
		RETURNING ` + devIntentColumns

// createStored records an intent with a random id and secret, or returns
// the one already made under the same idempotency key.
func (p *DevPaymentProvider) createStored(ctx context.Context, req payments.IntentRequest) (payments.Intent, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return payments.Intent{}, fmt.Errorf("create intent: %w", err)
	}
	id := payments.DevIntentPrefix + uuid.NewString()
	in, err := scanDevIntent(p.db.pool.QueryRow(ctx, createStoredIntentSQL,
		id, req.IdempotencyKey, id+"_secret_"+hex.EncodeToString(secret), req.Kind, req.PartitionID, req.ReservationID,
		req.AmountCents, req.Currency))
	if errors.Is(err, pgx.ErrNoRows) {
		in, err = scanDevIntent(p.db.pool.QueryRow(ctx,
			`SELECT `+devIntentColumns+` FROM dev_payment_intents WHERE idempotency_key = $1`, req.IdempotencyKey))
		if err != nil {
			return payments.Intent{}, fmt.Errorf("read intent: %w", err)
		}
	} else if err != nil {
		return payments.Intent{}, fmt.Errorf("create intent: %w", err)
	}
	if in.AmountCents != req.AmountCents || in.Currency != req.Currency || in.ReservationID != req.ReservationID {
		// A real provider refuses an idempotency key reused with other parameters.
		return payments.Intent{}, fmt.Errorf("create intent: key %s was used for another payment", req.IdempotencyKey)
	}
	return in, nil
}

// readDevIntentSQL reads an intent the provider stored: the one of this id
// or, for an intent never stored, another intent already stored under the
// same idempotency key (which makes this one unpayable: not found).
const readDevIntentSQL = `SELECT ` + devIntentColumns + ` FROM dev_payment_intents WHERE intent_id = $1 OR idempotency_key = $2`

// GetIntent reads an intent as the provider knows it: stored once paid or
// failed, else waiting for payment as its id says. An id the provider did
// not make (forged, altered, or signed under another key) is not found.
func (p *DevPaymentProvider) GetIntent(ctx context.Context, id string) (payments.Intent, error) {
	t, authentic := p.intents.Open(id)
	if !authentic {
		return p.storedIntent(ctx, id)
	}
	in, err := scanDevIntent(p.db.pool.QueryRow(ctx, readDevIntentSQL, id, t.KeyDigest))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return t.Intent(id), nil
	case err != nil:
		return payments.Intent{}, fmt.Errorf("read intent: %w", err)
	case in.ID != id:
		return payments.Intent{}, payments.ErrIntentNotFound
	}
	in.ClientSecret = ""
	return in, nil
}

// storedIntent reads an intent that is not a token of this deployment's
// key: one stored before ADR 0027, or nothing.
func (p *DevPaymentProvider) storedIntent(ctx context.Context, id string) (payments.Intent, error) {
	in, err := scanDevIntent(p.db.pool.QueryRow(ctx, `SELECT `+devIntentColumns+` FROM dev_payment_intents WHERE intent_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return in, payments.ErrIntentNotFound
	}
	if err != nil {
		return in, fmt.Errorf("read intent: %w", err)
	}
	in.ClientSecret = ""
	return in, nil
}

// Pay settles an intent, as a guest paying on the provider's page with the
// intent's client secret would: succeeded (or failed), once — an intent
// already settled stays as it is and is returned with settled false. An
// unknown intent, a wrong secret, and an intent whose idempotency key
// already paid another one are not_found, alike.
func (p *DevPaymentProvider) Pay(ctx context.Context, id, clientSecret string, outcome payments.IntentStatus) (in payments.Intent, settled bool, err error) {
	if outcome != payments.IntentSucceeded && outcome != payments.IntentFailed {
		return in, false, fmt.Errorf("pay intent: outcome %q", outcome)
	}
	t, authentic := p.intents.Open(id)
	if !authentic {
		return p.payStored(ctx, id, clientSecret, outcome)
	}
	notFound := berth.Errorf(berth.CodeNotFound, "no payment intent %q with this client secret", truncate(id, 64))
	if !p.intents.SecretMatches(id, clientSecret) {
		return in, false, notFound
	}
	// The first thing that happens to an intent stores it, with its key's
	// digest: the key's unique index lets one intent per key be paid, as a
	// real provider refuses a key reused for another payment.
	in, err = scanDevIntent(p.db.pool.QueryRow(ctx, `INSERT INTO dev_payment_intents (intent_id, idempotency_key, client_secret,
			kind, partition_id, reservation_id, amount_cents, currency, status)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING RETURNING `+devIntentColumns,
		id, t.KeyDigest, clientSecret, t.Kind, t.PartitionID, t.ReservationID, t.AmountCents, t.Currency, string(outcome)))
	if err == nil {
		in.ClientSecret = ""
		return in, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return in, false, fmt.Errorf("pay intent: %w", err)
	}
	in, err = p.storedIntent(ctx, id)
	if errors.Is(err, payments.ErrIntentNotFound) {
		// Another intent of the same key was stored first.
		notFound.Detail = fmt.Sprintf("payment intent %q was refused: its idempotency key was used for another payment", truncate(id, 64))
		return in, false, notFound
	}
	return in, false, err
}

// payStored settles an intent stored before ADR 0027 (a random id whose
// secret is in its row).
func (p *DevPaymentProvider) payStored(ctx context.Context, id, clientSecret string, outcome payments.IntentStatus) (in payments.Intent, settled bool, err error) {
	in, err = scanDevIntent(p.db.pool.QueryRow(ctx, `UPDATE dev_payment_intents SET status = $3, updated_at = now()
		WHERE intent_id = $1 AND client_secret = $2 AND status = 'requires_payment' RETURNING `+devIntentColumns,
		id, clientSecret, string(outcome)))
	if err == nil {
		in.ClientSecret = ""
		return in, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return in, false, fmt.Errorf("pay intent: %w", err)
	}
	in, err = scanDevIntent(p.db.pool.QueryRow(ctx, `SELECT `+devIntentColumns+` FROM dev_payment_intents
		WHERE intent_id = $1 AND client_secret = $2`, id, clientSecret))
	if errors.Is(err, pgx.ErrNoRows) {
		return in, false, berth.Errorf(berth.CodeNotFound, "no payment intent %q with this client secret", truncate(id, 64))
	}
	if err != nil {
		return in, false, fmt.Errorf("read intent: %w", err)
	}
	in.ClientSecret = ""
	return in, false, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// DevRefunds is the development provider's refunds, all the read model's
// refunds consumer needs of it: recorded in payment_refunds, once per key.
type DevRefunds struct{ db *DB }

var _ payments.Provider = DevRefunds{}

// NewDevRefunds returns the development provider's refunds.
func NewDevRefunds(db *DB) DevRefunds { return DevRefunds{db: db} }

// Refund records a refund unless one with the same key exists.
func (p DevRefunds) Refund(ctx context.Context, req payments.RefundRequest) (payments.Refund, error) {
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

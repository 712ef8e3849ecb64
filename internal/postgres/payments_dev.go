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

// DevPaymentProvider is the development payment provider. It keeps its
// intents in dev_payment_intents and its refunds in payment_refunds, so
// every booking service of a local deployment (and every test) sees the
// same state, and it behaves as a real provider does: an intent is created
// once per idempotency key, it succeeds only when someone pays it (Pay, the
// development-only endpoint), and a refund is made once per key.
type DevPaymentProvider struct{ db *DB }

var _ payments.Provider = (*DevPaymentProvider)(nil)

// NewDevPaymentProvider returns the development provider.
func NewDevPaymentProvider(db *DB) *DevPaymentProvider { return &DevPaymentProvider{db: db} }

const devIntentColumns = `intent_id, client_secret, kind, partition_id, reservation_id, amount_cents, currency, status`

// createDevIntentSQL records a new intent, or returns nothing when its
// idempotency key has one already.
const createDevIntentSQL = `INSERT INTO dev_payment_intents (intent_id, idempotency_key, client_secret, kind, partition_id,
			reservation_id, amount_cents, currency, status)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'requires_payment') ON CONFLICT (idempotency_key) DO NOTHING
		RETURNING ` + devIntentColumns

// DevPaymentStatements returns the statement every prepaid hold sends to
// this provider (its intent), to warm a pool with (Options.Warm).
func DevPaymentStatements() []string { return []string{createDevIntentSQL} }

func scanDevIntent(row pgx.Row) (payments.Intent, error) {
	var (
		in     payments.Intent
		status string
	)
	err := row.Scan(&in.ID, &in.ClientSecret, &in.Kind, &in.PartitionID, &in.ReservationID, &in.AmountCents, &in.Currency, &status)
	in.Status = payments.IntentStatus(status)
	return in, err
}

// CreateIntent records an intent, or returns the one already made under the
// same idempotency key (a replayed hold asks again).
func (p *DevPaymentProvider) CreateIntent(ctx context.Context, req payments.IntentRequest) (payments.Intent, error) {
	if req.AmountCents <= 0 || req.IdempotencyKey == "" {
		return payments.Intent{}, fmt.Errorf("create intent: want a positive amount and an idempotency key")
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return payments.Intent{}, fmt.Errorf("create intent: %w", err)
	}
	id := "pi_dev_" + uuid.NewString()
	// A new key returns its row from the INSERT (one round trip for every
	// first hold: this provider runs on every prepaid hold of `make up`); a
	// key used before returns nothing there and is read back.
	in, err := scanDevIntent(p.db.pool.QueryRow(ctx, createDevIntentSQL,
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

// GetIntent reads an intent as the provider knows it.
func (p *DevPaymentProvider) GetIntent(ctx context.Context, id string) (payments.Intent, error) {
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
// unknown intent or a wrong secret is not_found, alike.
func (p *DevPaymentProvider) Pay(ctx context.Context, id, clientSecret string, outcome payments.IntentStatus) (in payments.Intent, settled bool, err error) {
	if outcome != payments.IntentSucceeded && outcome != payments.IntentFailed {
		return in, false, fmt.Errorf("pay intent: outcome %q", outcome)
	}
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

package readmodel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Partner is a holder of an API key.
type Partner struct {
	ID        string     `json:"partner_id"`
	Name      string     `json:"name"`
	KeyPrefix string     `json:"key_prefix"`
	Scope     string     `json:"scope"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// ScopeGuestReservations lets a key read any guest's reservations.
const ScopeGuestReservations = "guests.reservations:read"

const keyPrefix = "bpk_"

// hashKey is what is stored of a key. A key has 256 random bits, so a plain
// SHA-256 (no salt, no stretching) cannot be brute-forced, and it lets the
// lookup be an index probe.
func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// CreatePartner creates a partner and returns its key; the key is not
// stored and cannot be shown again.
func (s *Store) CreatePartner(ctx context.Context, name string) (Partner, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return Partner{}, "", errors.New("a partner needs a name of 1 to 200 characters")
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Partner{}, "", fmt.Errorf("generate key: %w", err)
	}
	key := keyPrefix + base64.RawURLEncoding.EncodeToString(raw)
	p := Partner{ID: uuid.NewString(), Name: name, KeyPrefix: key[:len(keyPrefix)+6], Scope: ScopeGuestReservations}
	err := s.db.Pool.QueryRow(ctx,
		`INSERT INTO rm_partners (partner_id, name, key_hash, key_prefix, scope) VALUES ($1, $2, $3, $4, $5) RETURNING created_at`,
		p.ID, p.Name, hashKey(key), p.KeyPrefix, p.Scope).Scan(&p.CreatedAt)
	if err != nil {
		return Partner{}, "", fmt.Errorf("create partner: %w", err)
	}
	return p, key, nil
}

// ListPartners lists every partner, revoked ones included.
func (s *Store) ListPartners(ctx context.Context) ([]Partner, error) {
	rows, err := s.db.Pool.Query(ctx,
		`SELECT partner_id::TEXT, name, key_prefix, scope, created_at, revoked_at FROM rm_partners ORDER BY created_at, partner_id`)
	if err != nil {
		return nil, fmt.Errorf("list partners: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partner, error) {
		var p Partner
		err := r.Scan(&p.ID, &p.Name, &p.KeyPrefix, &p.Scope, &p.CreatedAt, &p.RevokedAt)
		return p, err
	})
}

// RevokePartner revokes the keys of partners matching idOrName (an id or an
// exact name) and reports how many it revoked.
func (s *Store) RevokePartner(ctx context.Context, idOrName string) (int, error) {
	q := `UPDATE rm_partners SET revoked_at = now() WHERE revoked_at IS NULL AND name = $1`
	args := []any{idOrName}
	if _, err := uuid.Parse(idOrName); err == nil {
		q = `UPDATE rm_partners SET revoked_at = now() WHERE revoked_at IS NULL AND (name = $1 OR partner_id = $2)`
		args = append(args, idOrName)
	}
	tag, err := s.db.Pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("revoke partner: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// PartnerByKey returns the live partner holding key.
func (s *Store) PartnerByKey(ctx context.Context, key string) (Partner, error) {
	var p Partner
	if !strings.HasPrefix(key, keyPrefix) || len(key) > 100 {
		return p, ErrNotFound
	}
	err := s.db.Pool.QueryRow(ctx,
		`SELECT partner_id::TEXT, name, key_prefix, scope, created_at FROM rm_partners WHERE key_hash = $1 AND revoked_at IS NULL`,
		hashKey(key)).Scan(&p.ID, &p.Name, &p.KeyPrefix, &p.Scope, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("look up partner: %w", err)
	}
	return p, nil
}

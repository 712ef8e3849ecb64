package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/berthhq/berth/internal/view"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// CreatePartner creates a partner and returns its key; the key is not
// stored and cannot be shown again.
func (s *ReadModel) CreatePartner(ctx context.Context, name string) (view.Partner, string, error) {
	p, key, err := view.NewPartner(name)
	if err != nil {
		return view.Partner{}, "", err
	}
	err = s.db.pool.QueryRow(ctx,
		`INSERT INTO rm_partners (partner_id, name, key_hash, key_prefix, scope) VALUES ($1, $2, $3, $4, $5) RETURNING created_at`,
		p.ID, p.Name, view.HashKey(key), p.KeyPrefix, p.Scope).Scan(&p.CreatedAt)
	if err != nil {
		return view.Partner{}, "", fmt.Errorf("create partner: %w", err)
	}
	return p, key, nil
}

// ListPartners lists every partner, revoked ones included.
func (s *ReadModel) ListPartners(ctx context.Context) ([]view.Partner, error) {
	rows, err := s.db.pool.Query(ctx,
		`SELECT partner_id::TEXT, name, key_prefix, scope, created_at, revoked_at FROM rm_partners ORDER BY created_at, partner_id`)
	if err != nil {
		return nil, fmt.Errorf("list partners: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (view.Partner, error) {
		var p view.Partner
		err := r.Scan(&p.ID, &p.Name, &p.KeyPrefix, &p.Scope, &p.CreatedAt, &p.RevokedAt)
		return p, err
	})
}

// RevokePartner revokes the keys of partners matching idOrName (an id or an
// exact name) and reports how many it revoked.
func (s *ReadModel) RevokePartner(ctx context.Context, idOrName string) (int, error) {
	q := `UPDATE rm_partners SET revoked_at = now() WHERE revoked_at IS NULL AND name = $1`
	args := []any{idOrName}
	if _, err := uuid.Parse(idOrName); err == nil {
		q = `UPDATE rm_partners SET revoked_at = now() WHERE revoked_at IS NULL AND (name = $1 OR partner_id = $2)`
		args = append(args, idOrName)
	}
	tag, err := s.db.pool.Exec(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("revoke partner: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// PartnerByKey returns the live partner holding key.
func (s *ReadModel) PartnerByKey(ctx context.Context, key string) (view.Partner, error) {
	var p view.Partner
	if !view.LooksLikeKey(key) {
		return p, view.ErrNotFound
	}
	err := s.db.pool.QueryRow(ctx,
		`SELECT partner_id::TEXT, name, key_prefix, scope, created_at FROM rm_partners WHERE key_hash = $1 AND revoked_at IS NULL`,
		view.HashKey(key)).Scan(&p.ID, &p.Name, &p.KeyPrefix, &p.Scope, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, view.ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("look up partner: %w", err)
	}
	return p, nil
}

package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/berthhq/berth/internal/view"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The guests' grants to partners (rm_partner_grants): a partner key reads a
// guest's reservations only while the guest's grant to that partner stands.

// GrantPartner lets partnerID read guestID's reservations. Granting again
// keeps the first grant. An unknown or revoked partner is view.ErrNotFound.
func (s *ReadModel) GrantPartner(ctx context.Context, guestID, partnerID string) (view.Grant, error) {
	g := view.Grant{GuestID: guestID, PartnerID: partnerID}
	if _, err := uuid.Parse(partnerID); err != nil {
		return g, view.ErrNotFound
	}
	// One statement: the grant is written only if the partner is live; a
	// second grant locks the first and answers with its time.
	err := s.db.pool.QueryRow(ctx, `
		WITH p AS (SELECT partner_id, name FROM rm_partners WHERE partner_id = $2 AND revoked_at IS NULL),
		ins AS (
			INSERT INTO rm_partner_grants (guest_id, partner_id) SELECT $1, partner_id FROM p
			ON CONFLICT (guest_id, partner_id) DO UPDATE SET granted_at = rm_partner_grants.granted_at
			RETURNING granted_at)
		SELECT p.name, ins.granted_at FROM p, ins`, guestID, partnerID).Scan(&g.PartnerName, &g.GrantedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return g, view.ErrNotFound
	}
	if err != nil {
		return g, fmt.Errorf("grant partner: %w", err)
	}
	g.GrantedAt = g.GrantedAt.UTC()
	return g, nil
}

// RevokeGrant withdraws partnerID's access to guestID's reservations; it
// reports whether there was a grant to withdraw.
func (s *ReadModel) RevokeGrant(ctx context.Context, guestID, partnerID string) (bool, error) {
	if _, err := uuid.Parse(partnerID); err != nil {
		return false, nil
	}
	tag, err := s.db.pool.Exec(ctx, `DELETE FROM rm_partner_grants WHERE guest_id = $1 AND partner_id = $2`, guestID, partnerID)
	if err != nil {
		return false, fmt.Errorf("revoke grant: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Grants lists the partners guestID granted, oldest grant first. Grants to
// partners whose key was revoked since are listed too (they read nothing).
func (s *ReadModel) Grants(ctx context.Context, guestID string) ([]view.Grant, error) {
	rows, err := s.db.pool.Query(ctx, `
		SELECT g.guest_id, g.partner_id::TEXT, p.name, g.granted_at FROM rm_partner_grants g
		JOIN rm_partners p ON p.partner_id = g.partner_id
		WHERE g.guest_id = $1 ORDER BY g.granted_at, g.partner_id`, guestID)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (view.Grant, error) {
		var g view.Grant
		err := r.Scan(&g.GuestID, &g.PartnerID, &g.PartnerName, &g.GrantedAt)
		g.GrantedAt = g.GrantedAt.UTC()
		return g, err
	})
}

// Granted reports whether guestID granted partnerID.
func (s *ReadModel) Granted(ctx context.Context, guestID, partnerID string) (bool, error) {
	var ok bool
	err := s.db.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM rm_partner_grants WHERE guest_id = $1 AND partner_id = $2)`, guestID, partnerID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read grant: %w", err)
	}
	return ok, nil
}

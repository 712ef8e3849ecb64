// Package readmodel serves the per-guest view of every reservation and
// appointment across all partitions and regions: the projection of booking
// events into it (each event applied once, never an older version over a
// newer one) and the partner API that reads it. The view's values are in
// package view; the store that keeps them is postgres.ReadModel.
package readmodel

import (
	"context"

	"github.com/berthhq/berth/internal/view"
)

// Store is what the projector and the partner API need of the view's
// store (postgres.ReadModel).
type Store interface {
	// Apply applies one projected event once (it == nil: an event the view
	// ignores, still recorded as processed). fresh is false for a
	// duplicate, which changes nothing.
	Apply(ctx context.Context, consumer, eventID string, it *view.Item) (fresh, changed bool, err error)
	// ApplyAll applies many events in one statement, all or nothing; cs
	// names each event id and each view row at most once, and the result
	// is in its order.
	ApplyAll(ctx context.Context, consumer string, cs []view.Change) ([]view.Applied, error)
	// List returns up to q.Limit items after q.After, and whether more follow.
	List(ctx context.Context, q view.Query) ([]view.Item, bool, error)
	// PartnerByKey returns the live partner holding key, or view.ErrNotFound.
	PartnerByKey(ctx context.Context, key string) (view.Partner, error)
	// Granted reports whether guestID granted partnerID access.
	Granted(ctx context.Context, guestID, partnerID string) (bool, error)
	// GrantPartner records a guest's grant (view.ErrNotFound: no live partner).
	GrantPartner(ctx context.Context, guestID, partnerID string) (view.Grant, error)
	// RevokeGrant withdraws a grant and reports whether there was one.
	RevokeGrant(ctx context.Context, guestID, partnerID string) (bool, error)
	// Grants lists a guest's grants, oldest first.
	Grants(ctx context.Context, guestID string) ([]view.Grant, error)
}

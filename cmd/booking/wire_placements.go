package main

import (
	"context"

	"github.com/berthhq/berth/internal/postgres"
)

// wirePlacements wires the placements part of the service: the operators'
// GET /v1/placements and POST /v1/placements/{kind}/{id}/move. Any region's
// booking service may move any partition (the directory is global), so
// these routes are not fenced.
func wirePlacements(ctx context.Context, w *wiring) error {
	w.api.Placements = postgres.NewPlacements(w.db)
	return nil
}

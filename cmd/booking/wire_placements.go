package main

import "context"

// wirePlacements wires the placements part of the service.
func wirePlacements(ctx context.Context, w *wiring) error { return nil }

package main

import "context"

// wireEvents wires the events part of the service.
func wireEvents(ctx context.Context, w *wiring) error { return nil }

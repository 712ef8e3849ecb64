package main

import "context"

// wireClinics wires the clinics part of the service.
func wireClinics(ctx context.Context, w *wiring) error { return nil }

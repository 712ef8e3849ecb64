package config

import (
	"runtime/debug"
	"testing"
)

func TestServiceGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Setenv("GOGC", "")
	if got := ServiceGC(); got != ServiceGCPercent {
		t.Errorf("GOGC unset: ServiceGC() = %d, want %d", got, ServiceGCPercent)
	}
	if got := debug.SetGCPercent(100); got != ServiceGCPercent {
		t.Errorf("GOGC unset: the runtime's target is %d, want %d", got, ServiceGCPercent)
	}

	// An operator's GOGC is the runtime's own (read at start); ServiceGC
	// keeps whatever is in force.
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	if got := ServiceGC(); got != 150 {
		t.Errorf("GOGC=150: ServiceGC() = %d, want 150", got)
	}
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC=150: the runtime's target is %d, want 150 kept", got)
	}
}

package notify

import (
	"slices"
	"testing"
)

// The consumer's filters come from EventTypes: every event type that has a
// template, and only those (a hold sends nothing, so it is not asked for).
func TestEventTypesAreTheTemplates(t *testing.T) {
	t.Parallel()
	got := EventTypes()
	if len(got) != len(templates) || !slices.IsSorted(got) {
		t.Fatalf("EventTypes() = %v; want the %d template types, sorted", got, len(templates))
	}
	for _, typ := range got {
		if _, ok := templates[typ]; !ok {
			t.Errorf("%s has no template", typ)
		}
	}
	if slices.Contains(got, "reservation.held") || !slices.Contains(got, "reservation.confirmed") {
		t.Errorf("EventTypes() = %v; want confirmations and no holds", got)
	}
}

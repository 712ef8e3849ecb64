package notify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/view"
)

// The front desk's events of a stay — checked in, a no-show (the
// reservation beside its charge), walked (beside the compensation) — each
// have a template of their own, and their data projects to the guest's
// item the message is composed from.
func TestStayTemplates(t *testing.T) {
	t.Parallel()
	stay := `{"reservation_id":"r1","hotel_id":"h1","guest_id":"g1","check_in":"2027-04-10","check_out":"2027-04-12","quantity":1,
		"status":"%s","version":3,"updated_at":"2027-04-10T09:00:00Z","contact_email":"g@x.test"}`
	cases := []struct {
		typ, data, template, subject string
	}{
		{"reservation.checked_in", strings.Replace(stay, "%s", "checked_in", 1), "checked_in", "checked in"},
		{"reservation.no_show", `{"reservation":` + strings.Replace(stay, "%s", "no_show", 1) + `,"amount_cents":10000,"currency":"EUR"}`,
			"stay_no_show", "missed you"},
		{"reservation.walked", `{"reservation":` + strings.Replace(stay, "%s", "walked", 1) +
			`,"walk_id":"w1","compensation":{"amount_cents":24000,"currency":"EUR","payee_hotel_id":"h2"}}`, "walked", "sister hotel"},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			t.Parallel()
			if templates[c.typ] != c.template {
				t.Fatalf("template of %s = %q, want %q", c.typ, templates[c.typ], c.template)
			}
			it, ok, err := view.FromEvent(events.Envelope{ID: "e1", Type: c.typ, Kind: "hotel", PartitionID: "h1", Data: json.RawMessage(c.data)})
			if err != nil || !ok || it.ContactEmail != "g@x.test" {
				t.Fatalf("project %s: %+v, %v, %v", c.typ, it, ok, err)
			}
			subject, body := compose(c.template, it)
			if !strings.Contains(subject, c.subject) || !strings.Contains(body, "r1") {
				t.Fatalf("%s composes %q / %q", c.typ, subject, body)
			}
		})
	}
}

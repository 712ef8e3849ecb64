package httpapi_test

import (
	"testing"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/httpapi"
)

func TestPartitionPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path     string
		kind     berth.Kind
		id, rest string
	}{
		{"/v1/hotels/ABC/reservations", berth.KindHotel, "abc", "reservations"},
		{"/v1/hotels/abc", berth.KindHotel, "abc", ""},
		{"/v1/clinics/c1/waiting-room/tickets/t", berth.KindClinic, "c1", "waiting-room/tickets/t"},
		{"/v1/clinics//appointments", "", "", ""},
		{"/v1/hotels/", "", "", ""},
		{"/v1/hotels", "", "", ""},
		{"/v1/guests/g/reservations", "", "", ""},
		{"/healthz", "", "", ""},
	} {
		kind, id, rest := httpapi.PartitionPath(tc.path)
		if kind != tc.kind || id != tc.id || rest != tc.rest {
			t.Errorf("PartitionPath(%q) = %q, %q, %q; want %q, %q, %q", tc.path, kind, id, rest, tc.kind, tc.id, tc.rest)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/view"
	"github.com/google/uuid"
)

// A partner key reads only the guests who granted that partner, and
// everything else is a 404 that says nothing about the guest: a guest with
// bookings who did not grant it answers exactly like a guest who does not
// exist. The guest grants, lists and revokes with their own token only.
func TestPartnerReadsOnlyGuestsWhoGranted(t *testing.T) {
	s := newStack(t)
	s.startRelay("us-east", nil)
	s.startReadModel(nil)
	env := s.regions["us-east"]
	h := env.SeedHotel("", 5, 0, bookingTestFrom, bookingTestTo)
	hold(t, env, h, "ada", 3)
	hold(t, env, h, "bob", 4)
	store := postgres.NewReadModel(s.db)
	pa, keyA, err := store.CreatePartner(context.Background(), "partner-a")
	if err != nil {
		t.Fatal(err)
	}
	_, keyB, err := store.CreatePartner(context.Background(), "partner-b")
	if err != nil {
		t.Fatal(err)
	}
	read := func(guest, key string) (int, []byte) {
		st, _, body := s.get("/v1/guests/"+guest+"/reservations", map[string]string{"X-API-Key": key})
		return st, body
	}
	// Both bookings are in the view (read with the guests' own tokens).
	eventually(t, 20*time.Second, "both bookings in the view", func() bool {
		n := 0
		for _, g := range []string{"ada", "bob"} {
			_, _, body := s.get("/v1/guests/"+g+"/reservations", s.guestAuth(g))
			var p page
			if json.Unmarshal(body, &p) == nil {
				n += len(p.Items)
			}
		}
		return n == 2
	})

	unknownStatus, unknownBody := read("nobody-"+uuid.NewString(), keyA)
	if unknownStatus != http.StatusNotFound {
		t.Fatalf("partner reads an unknown guest: %d %s, want 404", unknownStatus, unknownBody)
	}
	notGranted := func(guest, key, what string) {
		t.Helper()
		st, body := read(guest, key)
		if st != unknownStatus || !bytes.Equal(body, unknownBody) {
			t.Errorf("%s: %d %s, want the unknown guest's answer %d %s", what, st, body, unknownStatus, unknownBody)
		}
	}
	notGranted("ada", keyA, "partner A reads ada before any grant")

	grantPath := "/v1/guests/ada/partners/" + pa.ID
	for _, c := range []struct {
		what string
		hdr  map[string]string
		want int
	}{
		{"no credentials", nil, http.StatusUnauthorized},
		{"the partner's own key", map[string]string{"X-API-Key": keyA}, http.StatusUnauthorized},
		{"another guest's token", s.guestAuth("bob"), http.StatusForbidden},
		{"an admin token", map[string]string{"Authorization": "Bearer " + env.Admin()}, http.StatusForbidden},
	} {
		if st, body := s.send(http.MethodPut, grantPath, c.hdr); st != c.want {
			t.Errorf("grant with %s: %d %s, want %d", c.what, st, body, c.want)
		}
	}
	notGranted("ada", keyA, "partner A reads ada after refused grants")
	for _, bad := range []string{uuid.NewString(), "not-a-uuid"} {
		if st, body := s.send(http.MethodPut, "/v1/guests/ada/partners/"+bad, s.guestAuth("ada")); st != http.StatusNotFound {
			t.Errorf("grant to unknown partner %q: %d %s, want 404", bad, st, body)
		}
	}

	// Ada grants A (twice: idempotent).
	for range 2 {
		st, body := s.send(http.MethodPut, grantPath, s.guestAuth("ada"))
		var g view.Grant
		if st != http.StatusOK || json.Unmarshal(body, &g) != nil || g.PartnerID != pa.ID || g.PartnerName != "partner-a" || g.GuestID != "ada" {
			t.Fatalf("ada grants A: %d %s", st, body)
		}
	}
	if st, body := read("ada", keyA); st != http.StatusOK || !bytes.Contains(body, []byte(`"items":[{`)) {
		t.Fatalf("partner A reads ada after her grant: %d %s", st, body)
	}
	notGranted("bob", keyA, "partner A reads bob, who granted nothing")
	notGranted("ada", keyB, "partner B reads ada, who granted only A")

	// The list: the guest's own token or an admin's; nobody else's.
	st, body := s.send(http.MethodGet, "/v1/guests/ada/partners", s.guestAuth("ada"))
	var list struct{ Partners []view.Grant }
	if st != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Partners) != 1 || list.Partners[0].PartnerID != pa.ID {
		t.Fatalf("ada lists her grants: %d %s", st, body)
	}
	if st, _ := s.send(http.MethodGet, "/v1/guests/ada/partners", map[string]string{"X-API-Key": keyA}); st != http.StatusUnauthorized {
		t.Errorf("a partner lists ada's grants: %d, want 401", st)
	}
	if st, _ := s.send(http.MethodGet, "/v1/guests/ada/partners", s.guestAuth("bob")); st != http.StatusForbidden {
		t.Errorf("bob lists ada's grants: %d, want 403", st)
	}

	// Revoking: only ada; then A reads nothing again.
	if st, _ := s.send(http.MethodDelete, grantPath, s.guestAuth("bob")); st != http.StatusForbidden {
		t.Errorf("bob revokes ada's grant: %d, want 403", st)
	}
	for range 2 {
		if st, body := s.send(http.MethodDelete, grantPath, s.guestAuth("ada")); st != http.StatusNoContent {
			t.Fatalf("ada revokes A: %d %s", st, body)
		}
	}
	notGranted("ada", keyA, "partner A reads ada after she revoked")
}

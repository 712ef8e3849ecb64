package berth

import "testing"

// The ownership rule of API.md, role by role and kind by kind.
func TestMayActForGuest(t *testing.T) {
	t.Parallel()
	const here, elsewhere = "p-here", "p-elsewhere"
	guest := Principal{Subject: "alice", Role: RoleGuest}
	staff := Principal{Subject: "desk-1", Role: RoleStaff, Partitions: []string{here}}
	for _, tc := range []struct {
		name string
		p    Principal
		kind Kind
		part string
		want bool
	}{
		{"guest, own, hotel", guest, KindHotel, here, true},
		{"guest, own, clinic", guest, KindClinic, here, true},
		{"staff of the clinic", staff, KindClinic, here, true},
		{"staff of another clinic", staff, KindClinic, elsewhere, false},
		// The contract gives hotel reservations to the guest or an admin only.
		{"staff naming the hotel", staff, KindHotel, here, false},
		{"staff of another hotel", staff, KindHotel, elsewhere, false},
		{"admin, hotel", Principal{Subject: "a", Role: RoleAdmin}, KindHotel, here, true},
		{"admin, clinic", Principal{Subject: "a", Role: RoleAdmin}, KindClinic, here, true},
		{"ops", Principal{Subject: "o", Role: RoleOps}, KindClinic, here, false},
		{"no role", Principal{Subject: "alice"}, KindHotel, here, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.p.MayActForGuest(tc.kind, tc.part, "alice"); got != tc.want {
				t.Fatalf("MayActForGuest(%s, %s, alice) = %v, want %v", tc.kind, tc.part, got, tc.want)
			}
		})
	}
	if (Principal{Subject: "bob", Role: RoleGuest}).MayActForGuest(KindHotel, here, "alice") {
		t.Fatal("a guest may act for another guest")
	}
}

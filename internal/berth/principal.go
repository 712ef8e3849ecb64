package berth

import "slices"

// Role is what a token allows.
type Role string

// The roles of the API contract.
const (
	RoleGuest Role = "guest"
	RoleStaff Role = "staff"
	RoleAdmin Role = "admin"
	RoleOps   Role = "ops"
)

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool {
	switch r {
	case RoleGuest, RoleStaff, RoleAdmin, RoleOps:
		return true
	}
	return false
}

// Principal is who makes a request, as proven by a verified token.
type Principal struct {
	Subject    string
	Role       Role
	Partitions []string // staff only: the partition ids they may act for
}

// StaffOf reports whether p is staff of the given partition.
func (p Principal) StaffOf(partitionID string) bool {
	return p.Role == RoleStaff && slices.Contains(p.Partitions, partitionID)
}

// MayActForGuest reports whether p may act on the reservations or
// appointments of guestID in a partition of the given kind, as API.md says:
// the guest themselves or an admin everywhere; staff only in a clinic their
// token names (the desk books, confirms, cancels and reschedules for
// patients). Hotel reservations belong to the guest or an admin: the contract
// gives hotel staff no role there, so a staff token never reads or changes
// one, even with the hotel among its partitions.
func (p Principal) MayActForGuest(kind Kind, partitionID, guestID string) bool {
	switch p.Role {
	case RoleGuest:
		return p.Subject == guestID
	case RoleStaff:
		return kind == KindClinic && p.StaffOf(partitionID)
	case RoleAdmin:
		return true
	}
	return false
}

// Kind is the kind of a partition.
type Kind string

// The kinds of partition.
const (
	KindHotel  Kind = "hotel"
	KindClinic Kind = "clinic"
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return k == KindHotel || k == KindClinic }

// regions are the regions Berth runs in, in their canonical order.
var regions = []string{"us-east", "eu-west", "ap-south"}

// Regions returns the regions Berth runs in, in their canonical order. It
// is a fresh slice each time: no caller can change the list for the others.
func Regions() []string { return slices.Clone(regions) }

// ValidRegion reports whether r is one of Regions.
func ValidRegion(r string) bool { return slices.Contains(regions, r) }

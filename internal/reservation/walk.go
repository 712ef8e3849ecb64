package reservation

// Walks: a confirmed guest arrives and no room of the booked type is free
// for the stay (overbooking hedged no-shows that did not happen). The desk
// either upgrades the guest, free of charge, to another room type of the
// hotel that is free for every night, or relocates the guest to another
// hotel of the same chain in the same city, at the hotel's cost. A
// relocation crosses partitions, so it is a saga of three steps, each a
// transaction of one partition, linked by outbox events
// (docs/adr/0012-walks.md):
//
//  1. the original hotel marks the stay walking and writes walk.requested;
//  2. the target hotel holds a stay under the walk id (its own
//     transaction, idempotent by that id) and writes walk.held, or records
//     the refusal and writes walk.refused;
//  3. the original hotel marks the stay walked, gives its nights back and
//     writes reservation.walked with the compensation it owes — or, on a
//     refusal, returns the stay to confirmed (reservation.walk_undone).

// The statuses of a walk.
const (
	// StatusWalking: the original hotel asked a sister hotel to take the
	// guest; the stay still holds its nights until the answer comes.
	StatusWalking Status = "walking"
	// StatusWalked: the guest was relocated to a sister hotel; the stay
	// holds no nights and names the stay that replaced it.
	StatusWalked Status = "walked"
)

// Event types of walks. The walk.* events are the saga's messages between
// the two hotels; the reservation.* ones tell the rest of the platform
// (read model, notifications) about the original stay.
const (
	EventWalkRequested = "walk.requested"
	EventWalkHeld      = "walk.held"
	EventWalkRefused   = "walk.refused"
	EventWalking       = "reservation.walking"
	EventWalked        = "reservation.walked"
	EventWalkUndone    = "reservation.walk_undone"
	// EventRelocated is the confirmed stay the target hotel held for a
	// walked guest (it carries relocated_from).
	EventRelocated = "reservation.relocated"
)

// StayRef names a reservation in another partition.
type StayRef struct {
	HotelID       string `json:"hotel_id"`
	ReservationID string `json:"reservation_id"`
}

// WalkRequest is the data of walk.requested: everything the target hotel
// needs to hold the stay without reading the original's partition.
type WalkRequest struct {
	WalkID string `json:"walk_id"`
	// ToHotelID is the sister hotel; RoomTypeID is the type the desk chose
	// there ("" lets the target pick the cheapest type, big enough, free
	// for every night).
	ToHotelID  string `json:"to_hotel_id"`
	RoomTypeID string `json:"room_type_id,omitempty"`
	// From is the original stay; the rest is a copy of what the new stay
	// needs.
	From         StayRef `json:"from"`
	GuestID      string  `json:"guest_id"`
	CheckIn      Date    `json:"check_in"`
	CheckOut     Date    `json:"check_out"`
	Quantity     int     `json:"quantity"`
	MinGuests    int     `json:"min_guests"`
	ContactEmail string  `json:"contact_email,omitempty"`
	ContactPhone string  `json:"contact_phone,omitempty"`
	// ContactPushToken follows the guest to the new stay, as the e-mail and
	// phone do (absent in requests from before it existed).
	ContactPushToken string `json:"contact_push_token,omitempty"`
}

// Stay returns the nights of the walk.
func (w WalkRequest) Stay() Stay { return Stay{w.CheckIn, w.CheckOut} }

// WalkOutcome is the data of walk.held and walk.refused: the target's
// answer, sent back to the original hotel.
type WalkOutcome struct {
	WalkID  string  `json:"walk_id"`
	From    StayRef `json:"from"`
	To      StayRef `json:"to"`
	Held    bool    `json:"held"`
	Reason  string  `json:"reason,omitempty"`
	Amount  int64   `json:"amount_cents"`
	Curr    string  `json:"currency"`
	GuestID string  `json:"guest_id"`
}

// Compensation is what the original hotel owes for a walked stay: the
// price of the stay the sister hotel gave the guest, paid to that hotel.
type Compensation struct {
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	PayeeHotel  string `json:"payee_hotel_id"`
	Reason      string `json:"reason"`
}

// WalkOptions are what the desk may do for a guest no room of the booked
// type is free for: the 409 no_room_free answer carries them.
type WalkOptions struct {
	Upgrades    []UpgradeOption    `json:"upgrades"`
	Relocations []RelocationOption `json:"relocations"`
}

// UpgradeOption is another room type of the hotel free for every night
// of the stay: enough rooms in inventory and physically free.
type UpgradeOption struct {
	RoomTypeID string `json:"room_type_id"`
	Name       string `json:"name"`
	MaxGuests  int    `json:"max_guests"`
	Available  int    `json:"available"`
}

// RelocationOption is a room type of a sister hotel (same chain, same city)
// with rooms on every night of the stay, by the committed state there.
type RelocationOption struct {
	HotelID    string `json:"hotel_id"`
	HotelName  string `json:"hotel_name"`
	RoomTypeID string `json:"room_type_id"`
	Name       string `json:"name"`
	MaxGuests  int    `json:"max_guests"`
	Available  int    `json:"available"`
	PriceCents int64  `json:"price_cents"`
	Currency   string `json:"currency"`
}

// WalkAction is what a walk request (upgrade or relocation) does to a
// reservation.
type WalkAction int

// The outcomes of a walk request.
const (
	// WalkNow: the stay may be walked.
	WalkNow WalkAction = iota
	// WalkRefuse: the status does not allow it (only a confirmed stay that
	// has not been checked in is walked).
	WalkRefuse
	// WalkTooEarly: the arrival day has not come at the hotel.
	WalkTooEarly
	// WalkOver: the stay's last night has passed.
	WalkOver
)

// OnWalk decides an upgrade or a relocation of a reservation in status s
// for stay on the hotel's date today: the same window as a check-in, since
// a walk is what the desk does when the check-in finds no room.
func OnWalk(s Status, stay Stay, today Date) WalkAction {
	switch OnCheckIn(s, stay, today) {
	case CheckInRefuse:
		return WalkRefuse
	case CheckInTooEarly:
		return WalkTooEarly
	case CheckInOver:
		return WalkOver
	}
	return WalkNow
}

// WalkStep is what the original hotel does with the target's answer.
type WalkStep int

// The outcomes of a walk answer at the original hotel.
const (
	// WalkFinish: mark the stay walked (held) or confirmed again (refused).
	WalkFinish WalkStep = iota
	// WalkDone: this answer was applied already (a replay); change nothing.
	WalkDone
	// WalkStale: the answer is of another walk than the one the stay is in
	// (a replay of an earlier, undone walk): change nothing. The target
	// records one outcome per walk, so a walk's answers never disagree.
	WalkStale
)

// OnWalkAnswer decides what an answer for walkID does to a reservation in
// status s whose current walk is current ("" when none).
func OnWalkAnswer(s Status, current, walkID string, held bool) WalkStep {
	switch {
	case s == StatusWalking && current == walkID:
		return WalkFinish
	case s == StatusWalked && current == walkID && held:
		return WalkDone
	case s != StatusWalking && current == "" && !held:
		return WalkDone // undone already
	}
	return WalkStale
}

// WalkCharge is the amount a relocated stay is worth at the target: its
// room type's price for every night and room. The original hotel pays it.
func WalkCharge(priceCents int64, stay Stay, qty int) int64 {
	return priceCents * int64(stay.Nights()) * int64(qty)
}

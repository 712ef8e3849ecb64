package waitlist

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
)

// WakingEvents are the hotel event types that may give rooms back, and so
// wake the waitlists of their room type: a cancellation, an expired hold
// (an unconfirmed offer too: that is how it passes to the next waiter), an
// early check-out, and every inventory change — a no-show's released
// nights, inventory raised, a room back in order. A hold or a confirmation
// only takes rooms.
//
// A join wakes its waitlist too (EventJoined): a guest who joins while
// rooms of their stay are free is offered one at once rather than waiting
// for the next free; the line is served first come, first served as for
// any other wake.
var WakingEvents = []string{
	reservation.EventCancelled,
	reservation.EventExpired,
	reservation.EventCheckedOut,
	reservation.EventInventory,
	EventJoined,
}

// Free is what a waking event says came free: the nights of a room type
// that have rooms left after it.
type Free struct {
	HotelID    string
	RoomTypeID string
	Nights     []reservation.Date // ascending
}

// Freed reads a hotel event's data: for a waking event with nights that
// have rooms left, what came free (ok); otherwise nothing. data is a
// reservation with its inventory (reservation.WithInventory) or, for
// inventory.changed, the inventory change itself.
func Freed(eventType string, data []byte) (Free, bool, error) {
	if !slices.Contains(WakingEvents, eventType) {
		return Free{}, false, nil
	}
	if eventType == EventJoined {
		return joinedFree(data)
	}
	var inv *reservation.InventoryChange
	if eventType == reservation.EventInventory {
		inv = &reservation.InventoryChange{}
		if err := json.Unmarshal(data, inv); err != nil {
			return Free{}, false, fmt.Errorf("decode %s: %w", eventType, err)
		}
	} else {
		var w struct {
			Inventory *reservation.InventoryChange `json:"inventory"`
		}
		if err := json.Unmarshal(data, &w); err != nil {
			return Free{}, false, fmt.Errorf("decode %s: %w", eventType, err)
		}
		inv = w.Inventory
	}
	if inv == nil || inv.HotelID == "" || inv.RoomTypeID == "" {
		return Free{}, false, nil
	}
	f := Free{HotelID: inv.HotelID, RoomTypeID: inv.RoomTypeID}
	for _, n := range inv.Nights {
		if n.Available <= 0 {
			continue
		}
		d, err := reservation.ParseDate(n.Night)
		if err != nil {
			return Free{}, false, fmt.Errorf("decode %s: night %q: %w", eventType, n.Night, err)
		}
		f.Nights = append(f.Nights, d)
	}
	if len(f.Nights) == 0 {
		return Free{}, false, nil
	}
	slices.SortFunc(f.Nights, func(a, b reservation.Date) int { return a.Time().Compare(b.Time()) })
	return f, true, nil
}

// Waiter is a waiting entry as an offer sees it, in line order.
type Waiter struct {
	EntryID  string
	GuestID  string
	Stay     reservation.Stay
	Quantity int
}

// GuestCount is what a guest holds in the hotel (the guest_holds row).
type GuestCount struct {
	Holds, Rooms int
}

// Decision is what an offer transaction does: the waiters who get an offer
// and those passed over because a per-guest limit refused them the hold
// (they keep their place), as indexes into the waiters, in line order.
type Decision struct {
	Offer  []int
	Passed []int
}

// Allocate decides who gets the rooms that are free: free is what is left
// of each night by its date, YYYY-MM-DD (a night missing from it has nothing), waiters are the
// waiting entries in line order, guests what each guest holds already.
//
// First come, first served: each waiter in turn gets an offer when every
// night of their stay has their rooms left, taking them, and when their
// hold stays within the per-guest limits, counting the offers made before
// it. A waiter whose stay does not fit is skipped (a later waiter with a
// stay that fits is served; nothing a skipped waiter needs is free); one
// whose stay fits but whose guest is at a limit is passed over, and the
// rooms go on to the next waiter.
func Allocate(free map[string]int, waiters []Waiter, guests map[string]GuestCount, limits berth.GuestLimits) Decision {
	left := make(map[string]int, len(free))
	for d, n := range free {
		left[d] = n
	}
	counts := make(map[string]GuestCount, len(guests))
	for g, c := range guests {
		counts[g] = c
	}
	var d Decision
	for i, w := range waiters {
		if !fits(left, w) {
			continue
		}
		c := counts[w.GuestID]
		if limits.Which(c.Holds, c.Rooms, w.Quantity, true) != "" {
			d.Passed = append(d.Passed, i)
			continue
		}
		for _, n := range w.Stay.Dates() {
			left[n.String()] -= w.Quantity
		}
		c.Holds, c.Rooms = c.Holds+1, c.Rooms+w.Quantity
		counts[w.GuestID] = c
		d.Offer = append(d.Offer, i)
	}
	return d
}

func fits(left map[string]int, w Waiter) bool {
	if w.Quantity < 1 {
		return false
	}
	for _, n := range w.Stay.Dates() {
		if left[n.String()] < w.Quantity {
			return false
		}
	}
	return true
}

// joinedFree is what a join wakes: the nights of the entry's stay (whether
// they have rooms left the offer transaction reads under their locks).
func joinedFree(data []byte) (Free, bool, error) {
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return Free{}, false, fmt.Errorf("decode %s: %w", EventJoined, err)
	}
	if e.HotelID == "" || e.RoomTypeID == "" || !e.CheckIn.Before(e.CheckOut) {
		return Free{}, false, nil
	}
	return Free{HotelID: e.HotelID, RoomTypeID: e.RoomTypeID, Nights: e.Stay().Dates()}, true, nil
}

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Violation is one breach of an invariant found by Verify.
type Violation struct {
	Partition string `json:"partition"`
	Detail    string `json:"detail"`
}

// CheckResult is the outcome of one invariant check.
type CheckResult struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Skipped     string      `json:"skipped,omitempty"`
	Violations  []Violation `json:"violations"`
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Region limits the checks to partitions homed there ("" = all).
	Region string
	// Partitions limits the checks to these hotels and clinics (nil = all):
	// a test or a load run audits what it wrote, not a whole database.
	Partitions []string
	// StaleHoldAfter: a hotel hold still 'held' this long past its expiry
	// means the sweeper is not keeping up (sweep interval plus margin).
	StaleHoldAfter time.Duration
	// EventWindow: confirmed bookings updated within it must have their
	// confirmation event in the outbox (older sent rows may be pruned).
	EventWindow time.Duration
	// Limit bounds the violations listed per check.
	Limit int
}

// The invariant checks of Verify, by name. Tests and the loadtest pick
// them by these names.
const (
	CheckInventory          = "inventory_matches_reservations"
	CheckReservationNights  = "reservation_nights_exist"
	CheckStaleHolds         = "stale_hotel_holds"
	CheckReservationEvent   = "confirmed_reservation_has_event"
	CheckGuestHolds         = "guest_holds_match_reservations"
	CheckOneLivePerSlot     = "one_live_appointment_per_slot"
	CheckAppointmentOnSlot  = "live_appointment_matches_slot"
	CheckSlotHasAppointment = "occupied_slot_has_appointment"
	CheckAppointmentEvent   = "confirmed_appointment_has_event"
	CheckRoomNightOnce      = "room_night_single_use"
	CheckRoomAssignments    = "room_assignments_match_stays"
	CheckStaysHaveRooms     = "stays_have_rooms"
	CheckOutOfOrderCounted  = "out_of_order_counted"
	CheckWalkedReleased     = "walked_stay_released_and_linked"
	CheckRelocatedLinked    = "relocated_stay_links_one_walk"
	CheckOneStayPerWalk     = "one_relocated_stay_per_walk"
	CheckWaitlistOffers     = "waitlist_offer_holds"
	CheckWaitlistFIFO       = "waitlist_fifo"
	CheckClinicWaitlist     = "clinic_waitlist_offer_holds"
	CheckClinicWaitlistFIFO = "clinic_waitlist_fifo"
)

// ClinicInvariants are the checks that prove the clinic invariants — one
// live appointment per slot, slots and appointments pointing at each other,
// and the doctors' waitlists (every offer is one held appointment of its
// entry, in its day or window; first come, first served): the tests' audit
// and the loadtest's run these.
var ClinicInvariants = []string{CheckOneLivePerSlot, CheckAppointmentOnSlot, CheckSlotHasAppointment,
	CheckClinicWaitlist, CheckClinicWaitlistFIFO}

// HotelInvariants are the checks that prove the hotel invariants — the
// nights (reserved = what occupies them, within the limit), the rooms (a
// room is never used twice on a night; stays and their rooms agree) and the
// guests' hold counts (the per-guest limits), and the waitlists (every
// offer is one live hold of its entry; first come, first served): the
// tests' audit and the loadtest's run these.
var HotelInvariants = []string{CheckInventory, CheckReservationNights,
	CheckRoomNightOnce, CheckRoomAssignments, CheckStaysHaveRooms, CheckOutOfOrderCounted, CheckGuestHolds,
	CheckWalkedReleased, CheckRelocatedLinked, CheckOneStayPerWalk,
	CheckWaitlistOffers, CheckWaitlistFIFO}

// occupyingStatuses are the reservation statuses that count in the nights
// [check_in, COALESCE(released_from, check_out)) (reservation.Status.Occupies).
const occupyingStatuses = `('held', 'confirmed', 'checked_in', 'checked_out', 'no_show', 'walking')`

// verifyCheck is one check: a query listing (partition, detail) of each
// violation. Its arguments are $1 region ("" = all), $2 the limit, $3 the
// partitions (NULL = all) and, for a check with a window, $4 the window in
// microseconds.
type verifyCheck struct {
	name, desc string
	clinic     bool
	sql        string
	window     func(VerifyOptions) time.Duration
}

func eventWindow(o VerifyOptions) time.Duration { return o.EventWindow }

var verifyChecks = []verifyCheck{
	{CheckInventory, "every night: reserved = sum of the reservations occupying it, 0 ≤ reserved ≤ sell_limit", false, `
		SELECT i.hotel_id::TEXT, 'room type ' || i.room_type_id::TEXT || ' night ' || i.night::TEXT ||
		       ': reserved=' || i.reserved || ' live=' || COALESCE(SUM(r.quantity), 0) || ' limit=' || i.sell_limit
		FROM room_inventory i
		LEFT JOIN reservations r ON r.hotel_id = i.hotel_id AND r.room_type_id = i.room_type_id
		     AND r.status IN ` + occupyingStatuses + ` AND r.check_in <= i.night AND COALESCE(r.released_from, r.check_out) > i.night
		WHERE ($1 = '' OR i.home_region = $1) AND ($3::UUID[] IS NULL OR i.hotel_id = ANY($3::UUID[]))
		GROUP BY i.hotel_id, i.room_type_id, i.night, i.reserved, i.sell_limit
		HAVING i.reserved <> COALESCE(SUM(r.quantity), 0) OR i.reserved > i.sell_limit OR i.reserved < 0
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckReservationNights, "every night a reservation occupies exists in inventory", false, `
		SELECT r.hotel_id::TEXT, 'reservation ' || r.reservation_id::TEXT || ' covers ' ||
		       (COALESCE(r.released_from, r.check_out) - r.check_in) || ' nights but ' || count(i.night) || ' exist'
		FROM reservations r
		LEFT JOIN room_inventory i ON i.hotel_id = r.hotel_id AND i.room_type_id = r.room_type_id
		     AND i.night >= r.check_in AND i.night < COALESCE(r.released_from, r.check_out)
		WHERE r.status IN ` + occupyingStatuses + ` AND ($1 = '' OR r.home_region = $1)
		  AND ($3::UUID[] IS NULL OR r.hotel_id = ANY($3::UUID[]))
		GROUP BY r.hotel_id, r.reservation_id, r.check_in, r.check_out, r.released_from
		HAVING count(i.night) <> (COALESCE(r.released_from, r.check_out) - r.check_in)
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckRoomNightOnce, "a room is never assigned to two stays (or out of order and assigned) on one night", false, `
		SELECT hotel_id::TEXT, 'room ' || room_id::TEXT || ' night ' || night::TEXT || ' has ' || count(*) || ' uses'
		FROM room_nights
		WHERE ($1 = '' OR home_region = $1) AND ($3::UUID[] IS NULL OR hotel_id = ANY($3::UUID[]))
		GROUP BY hotel_id, room_id, night HAVING count(*) > 1
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckRoomAssignments, "every assigned room-night belongs to a checked-in or checked-out stay of the room's type that occupies the night", false, `
		SELECT n.hotel_id::TEXT, 'room ' || n.room_id::TEXT || ' night ' || n.night::TEXT || ' is assigned to ' ||
		       n.reservation_id::TEXT || ' (' || COALESCE(r.status, 'missing') || ')'
		FROM room_nights n
		LEFT JOIN rooms m ON m.hotel_id = n.hotel_id AND m.room_id = n.room_id
		LEFT JOIN reservations r ON r.hotel_id = n.hotel_id AND r.reservation_id = n.reservation_id
		WHERE n.reservation_id IS NOT NULL AND ($1 = '' OR n.home_region = $1)
		  AND ($3::UUID[] IS NULL OR n.hotel_id = ANY($3::UUID[]))
		  AND (r.reservation_id IS NULL OR m.room_id IS NULL OR r.status NOT IN ('checked_in', 'checked_out')
		       OR r.room_type_id <> n.room_type_id OR m.room_type_id <> n.room_type_id
		       OR n.night < r.check_in OR n.night >= COALESCE(r.released_from, r.check_out))
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckStaysHaveRooms, "every checked-in or checked-out stay has its quantity of rooms on every night it occupies", false, `
		SELECT r.hotel_id::TEXT, 'reservation ' || r.reservation_id::TEXT || ' (' || r.status || ') has ' || count(n.night) ||
		       ' room-nights on ' || count(DISTINCT n.night) || ' nights, want ' || r.quantity || ' rooms on ' ||
		       (COALESCE(r.released_from, r.check_out) - r.check_in) || ' nights'
		FROM reservations r
		LEFT JOIN room_nights n ON n.hotel_id = r.hotel_id AND n.reservation_id = r.reservation_id
		WHERE r.status IN ('checked_in', 'checked_out') AND ($1 = '' OR r.home_region = $1)
		  AND ($3::UUID[] IS NULL OR r.hotel_id = ANY($3::UUID[]))
		GROUP BY r.hotel_id, r.reservation_id, r.status, r.quantity, r.check_in, r.check_out, r.released_from
		HAVING count(n.night) <> r.quantity * (COALESCE(r.released_from, r.check_out) - r.check_in)
		    OR count(DISTINCT n.night) <> (COALESCE(r.released_from, r.check_out) - r.check_in)
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckOutOfOrderCounted, "every night's out_of_order equals its rooms out of order", false, `
		SELECT i.hotel_id::TEXT, 'room type ' || i.room_type_id::TEXT || ' night ' || i.night::TEXT ||
		       ': out_of_order=' || i.out_of_order || ' rooms out of order=' || count(n.room_id)
		FROM room_inventory i
		LEFT JOIN room_nights n ON n.hotel_id = i.hotel_id AND n.room_type_id = i.room_type_id AND n.night = i.night
		     AND n.out_of_order_reason IS NOT NULL
		WHERE ($1 = '' OR i.home_region = $1) AND ($3::UUID[] IS NULL OR i.hotel_id = ANY($3::UUID[]))
		GROUP BY i.hotel_id, i.room_type_id, i.night, i.out_of_order
		HAVING i.out_of_order <> count(n.room_id)
		ORDER BY 1, 2 LIMIT $2`, nil},
	// Walks (docs/adr/0012-walks.md): a walked stay gave its nights back
	// (the inventory check counts it no more) and its rooms, and names the
	// stay the sister hotel holds, which names it back; a relocated stay
	// belongs to exactly one walk, walking or walked.
	{CheckWalkedReleased, "every walked stay holds no room-nights and names a relocated stay that links back to it", false, `
		SELECT r.hotel_id::TEXT, 'reservation ' || r.reservation_id::TEXT || ' is walked but ' ||
		       CASE WHEN EXISTS (SELECT 1 FROM room_nights n WHERE n.hotel_id = r.hotel_id AND n.reservation_id = r.reservation_id)
		            THEN 'still holds room-nights'
		            WHEN r.walk_reservation_id IS NULL THEN 'names no relocated stay'
		            ELSE 'its relocated stay ' || r.walk_reservation_id::TEXT || ' does not link back' END
		FROM reservations r
		WHERE r.status = 'walked' AND ($1 = '' OR r.home_region = $1) AND ($3::UUID[] IS NULL OR r.hotel_id = ANY($3::UUID[]))
		  AND (EXISTS (SELECT 1 FROM room_nights n WHERE n.hotel_id = r.hotel_id AND n.reservation_id = r.reservation_id)
		       OR r.walk_reservation_id IS NULL
		       OR NOT EXISTS (SELECT 1 FROM reservations t WHERE t.hotel_id = r.walk_hotel_id AND t.reservation_id = r.walk_reservation_id
		                      AND t.relocated_from_hotel_id = r.hotel_id AND t.relocated_from_reservation_id = r.reservation_id))
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckRelocatedLinked, "every relocated stay links to exactly one walking or walked original that names it", false, `
		SELECT t.hotel_id::TEXT, 'relocated stay ' || t.reservation_id::TEXT || ' links to ' ||
		       COALESCE(o.reservation_id::TEXT || ' (' || o.status || ', walk ' || COALESCE(o.walk_reservation_id::TEXT, 'none') || ')', 'no reservation')
		FROM reservations t
		LEFT JOIN reservations o ON o.hotel_id = t.relocated_from_hotel_id AND o.reservation_id = t.relocated_from_reservation_id
		WHERE t.relocated_from_reservation_id IS NOT NULL AND ($1 = '' OR t.home_region = $1)
		  AND ($3::UUID[] IS NULL OR t.hotel_id = ANY($3::UUID[]))
		  AND (o.reservation_id IS NULL OR o.status NOT IN ('walking', 'walked')
		       OR o.walk_hotel_id IS DISTINCT FROM t.hotel_id OR o.walk_reservation_id IS DISTINCT FROM t.reservation_id)
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckOneStayPerWalk, "no original stay has more than one relocated stay", false, `
		SELECT relocated_from_hotel_id::TEXT, 'reservation ' || relocated_from_reservation_id::TEXT || ' has ' || count(*) || ' relocated stays'
		FROM reservations
		WHERE relocated_from_reservation_id IS NOT NULL AND ($1 = '' OR home_region = $1)
		  AND ($3::UUID[] IS NULL OR relocated_from_hotel_id = ANY($3::UUID[]) OR hotel_id = ANY($3::UUID[]))
		GROUP BY relocated_from_hotel_id, relocated_from_reservation_id HAVING count(*) > 1
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckStaleHolds, "no hotel hold stays 'held' long past its expiry (the sweeper runs)", false, `
		SELECT hotel_id::TEXT, 'reservation ' || reservation_id::TEXT || ' expired at ' || hold_expires_at::TEXT
		FROM reservations
		WHERE status = 'held' AND hold_expires_at < now() - $4 * INTERVAL '1 microsecond'
		  AND ($1 = '' OR home_region = $1) AND ($3::UUID[] IS NULL OR hotel_id = ANY($3::UUID[]))
		ORDER BY 1, 2 LIMIT $2`, func(o VerifyOptions) time.Duration { return o.StaleHoldAfter }},
	// A walked guest's stay at the sister hotel is confirmed from the start:
	// its event is reservation.relocated (docs/adr/0012-walks.md).
	{CheckReservationEvent, "every recently confirmed reservation has its reservation.confirmed (or, relocated, reservation.relocated) event", false, `
		SELECT r.hotel_id::TEXT, 'reservation ' || r.reservation_id::TEXT || ' confirmed at ' || r.updated_at::TEXT || ' has no event'
		FROM reservations r
		WHERE r.status = 'confirmed' AND r.updated_at > now() - $4 * INTERVAL '1 microsecond'
		  AND ($1 = '' OR r.home_region = $1) AND ($3::UUID[] IS NULL OR r.hotel_id = ANY($3::UUID[]))
		  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.partition_id = r.hotel_id AND o.aggregate_id = r.reservation_id
		                  AND o.event_type IN ('reservation.confirmed', 'reservation.relocated'))
		ORDER BY 1, 2 LIMIT $2`, eventWindow},
	// The per-guest limits count each guest's held reservations in a row of
	// guest_holds, kept in step by hold, confirm, cancel and the sweeper.
	{CheckGuestHolds, "every guest's counted holds and rooms (guest_holds) equal their held reservations", false, `
		SELECT COALESCE(g.hotel_id, r.hotel_id)::TEXT, 'guest ' || COALESCE(g.guest_id, r.guest_id) ||
		       ': counted ' || COALESCE(g.holds, 0) || ' holds/' || COALESCE(g.rooms, 0) || ' rooms, held ' ||
		       COALESCE(r.holds, 0) || '/' || COALESCE(r.rooms, 0)
		FROM (SELECT * FROM guest_holds WHERE ($1 = '' OR home_region = $1)
		        AND ($3::UUID[] IS NULL OR hotel_id = ANY($3::UUID[]))) g
		FULL JOIN (SELECT hotel_id, guest_id, count(*) AS holds, sum(quantity) AS rooms FROM reservations
		           WHERE status = 'held' AND ($1 = '' OR home_region = $1)
		             AND ($3::UUID[] IS NULL OR hotel_id = ANY($3::UUID[]))
		           GROUP BY hotel_id, guest_id) r
		     ON r.hotel_id = g.hotel_id AND r.guest_id = g.guest_id
		WHERE COALESCE(g.holds, 0) <> COALESCE(r.holds, 0) OR COALESCE(g.rooms, 0) <> COALESCE(r.rooms, 0)
		ORDER BY 1, 2 LIMIT $2`, nil},
	// A waitlist offer is a held reservation made for one entry: an offered
	// entry and its hold name each other and agree on guest, room type and
	// stay, and an entry is offered at most once (one reservation ever).
	// That no room is offered twice is the inventory check above: offers
	// are reservations and count in their nights.
	{CheckWaitlistOffers, "every offered waitlist entry has exactly one live hold, made for it, and no hold is offered twice", false, `
		SELECT e.hotel_id::TEXT, 'entry ' || e.entry_id::TEXT || ' is offered but its reservation ' ||
		       COALESCE(e.reservation_id::TEXT, 'none') || ' is ' || COALESCE(r.status, 'missing')
		FROM waitlist_entries e
		LEFT JOIN reservations r ON r.hotel_id = e.hotel_id AND r.reservation_id = e.reservation_id
		WHERE e.status = 'offered' AND ($1 = '' OR e.home_region = $1) AND ($3::UUID[] IS NULL OR e.hotel_id = ANY($3::UUID[]))
		  AND (r.reservation_id IS NULL OR r.status <> 'held' OR r.waitlist_entry_id IS DISTINCT FROM e.entry_id
		       OR r.guest_id <> e.guest_id OR r.room_type_id <> e.room_type_id OR r.check_in <> e.check_in
		       OR r.check_out <> e.check_out OR r.quantity <> e.quantity)
		UNION ALL
		SELECT r.hotel_id::TEXT, 'held offer ' || r.reservation_id::TEXT || ' names entry ' || r.waitlist_entry_id::TEXT ||
		       ', which is ' || COALESCE(e.status || ' with ' || COALESCE(e.reservation_id::TEXT, 'no reservation'), 'missing')
		FROM reservations r
		LEFT JOIN waitlist_entries e ON e.hotel_id = r.hotel_id AND e.entry_id = r.waitlist_entry_id
		WHERE r.waitlist_entry_id IS NOT NULL AND r.status = 'held' AND ($1 = '' OR r.home_region = $1)
		  AND ($3::UUID[] IS NULL OR r.hotel_id = ANY($3::UUID[]))
		  AND (e.entry_id IS NULL OR e.status <> 'offered' OR e.reservation_id IS DISTINCT FROM r.reservation_id)
		UNION ALL
		SELECT hotel_id::TEXT, 'entry ' || waitlist_entry_id::TEXT || ' was offered ' || count(*) || ' reservations'
		FROM reservations
		WHERE waitlist_entry_id IS NOT NULL AND ($1 = '' OR home_region = $1) AND ($3::UUID[] IS NULL OR hotel_id = ANY($3::UUID[]))
		GROUP BY hotel_id, waitlist_entry_id HAVING count(*) > 1
		ORDER BY 1, 2 LIMIT $2`, nil},
	// First come, first served: an offer goes to the first waiter whose
	// stay fits. So when an entry was offered, no entry ahead of it in the
	// same line whose stay lies within the offered one (its nights had the
	// room the offer took) may have been left waiting — unless that offer
	// passed it over for a per-guest limit (passed_at). An entry never
	// returns to waiting, so what still waits waited then.
	{CheckWaitlistFIFO, "no waitlist entry was offered while an earlier entry of its line, whose stay lies within the offered one, waited", false, `
		SELECT o.hotel_id::TEXT, 'entry ' || o.entry_id::TEXT || ' (seq ' || o.seq || ') was offered at ' || o.offered_at::TEXT ||
		       ' while entry ' || w.entry_id::TEXT || ' (seq ' || w.seq || ') waited'
		FROM waitlist_entries o
		JOIN waitlist_entries w ON w.hotel_id = o.hotel_id AND w.room_type_id = o.room_type_id AND w.seq < o.seq
		     AND w.status = 'waiting' AND w.check_in >= o.check_in AND w.check_out <= o.check_out AND w.quantity <= o.quantity
		     AND (w.passed_at IS NULL OR w.passed_at < o.offered_at)
		WHERE o.offered_at IS NOT NULL AND ($1 = '' OR o.home_region = $1) AND ($3::UUID[] IS NULL OR o.hotel_id = ANY($3::UUID[]))
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckOneLivePerSlot, "every slot is held or booked by at most one appointment", true, `
		SELECT a.clinic_id::TEXT, 'slot ' || a.slot_id::TEXT || ' has ' || count(*) || ' appointments on it'
		FROM appointments a
		WHERE ` + occupiesSQL + ` AND ($1 = '' OR a.home_region = $1)
		  AND ($3::UUID[] IS NULL OR a.clinic_id = ANY($3::UUID[]))
		GROUP BY a.clinic_id, a.slot_id HAVING count(*) > 1
		ORDER BY 1, 2 LIMIT $2`, nil},
	// A slot and its appointment point at each other: the slot names the
	// appointment and its guest, and is held for a held appointment, booked
	// for a confirmed one and for a visit that happened or was missed (its
	// time is spent: arrived, completed, no_show keep the slot booked).
	{CheckAppointmentOnSlot, "every live appointment (or visit) is the one its slot names, held or booked to match", true, `
		SELECT a.clinic_id::TEXT, 'appointment ' || a.appointment_id::TEXT || ' is ' || a.status ||
		       ' but its slot is ' || COALESCE(s.status || ' for ' || COALESCE(s.appointment_id::TEXT, 'nobody'), 'missing')
		FROM appointments a
		LEFT JOIN slots s ON s.clinic_id = a.clinic_id AND s.slot_id = a.slot_id
		WHERE ` + occupiesSQL + ` AND ($1 = '' OR a.home_region = $1)
		  AND ($3::UUID[] IS NULL OR a.clinic_id = ANY($3::UUID[]))
		  AND (s.slot_id IS NULL OR s.appointment_id IS DISTINCT FROM a.appointment_id
		       OR s.held_by IS DISTINCT FROM a.guest_id
		       OR s.status <> CASE a.status WHEN 'held' THEN 'held' ELSE 'booked' END)
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckSlotHasAppointment, "every held or booked slot names a live appointment (or a visit) on it", true, `
		SELECT s.clinic_id::TEXT, 'slot ' || s.slot_id::TEXT || ' is ' || s.status || ' for ' ||
		       COALESCE(a.appointment_id::TEXT || ' (' || a.status || ', on slot ' || a.slot_id::TEXT || ')', 'no appointment')
		FROM slots s
		LEFT JOIN appointments a ON a.clinic_id = s.clinic_id AND a.appointment_id = s.appointment_id
		WHERE s.status IN ('held', 'booked') AND ($1 = '' OR s.home_region = $1)
		  AND ($3::UUID[] IS NULL OR s.clinic_id = ANY($3::UUID[]))
		  AND (a.appointment_id IS NULL OR a.slot_id <> s.slot_id OR NOT ` + occupiesSQL + `)
		ORDER BY 1, 2 LIMIT $2`, nil},
	{CheckAppointmentEvent, "every recently confirmed appointment has its appointment.confirmed event", true, `
		SELECT a.clinic_id::TEXT, 'appointment ' || a.appointment_id::TEXT || ' has no confirmation event'
		FROM appointments a
		WHERE a.status = 'confirmed' AND a.updated_at > now() - $4 * INTERVAL '1 microsecond'
		  AND ($1 = '' OR a.home_region = $1) AND ($3::UUID[] IS NULL OR a.clinic_id = ANY($3::UUID[]))
		  AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.partition_id = a.clinic_id AND o.aggregate_id = a.appointment_id
		                  AND o.event_type = 'appointment.confirmed')
		ORDER BY 1, 2 LIMIT $2`, eventWindow},
	// A clinic waitlist offer and its held appointment name each other and
	// agree on patient, doctor and day, the slot starting in the entry's
	// span; an entry is offered at most one appointment ever. That no slot
	// is offered twice is one_live_appointment_per_slot: offers are
	// appointments on their slots.
	{CheckClinicWaitlist, "every offered clinic waitlist entry has exactly one held appointment, made for it, on a slot of its doctor in its day or window", true, `
		SELECT e.clinic_id::TEXT, 'entry ' || e.entry_id::TEXT || ' is offered but its appointment ' ||
		       COALESCE(e.appointment_id::TEXT, 'none') || ' is ' || COALESCE(a.status || ' at ' || a.starts_at::TEXT, 'missing')
		FROM clinic_waitlist_entries e
		LEFT JOIN appointments a ON a.clinic_id = e.clinic_id AND a.appointment_id = e.appointment_id
		WHERE e.status = 'offered' AND ($1 = '' OR e.home_region = $1) AND ($3::UUID[] IS NULL OR e.clinic_id = ANY($3::UUID[]))
		  AND (a.appointment_id IS NULL OR a.status <> 'held' OR a.waitlist_entry_id IS DISTINCT FROM e.entry_id
		       OR a.guest_id <> e.guest_id OR a.doctor_id <> e.doctor_id OR a.local_date <> e.local_date
		       OR a.starts_at < e.window_start OR a.starts_at >= e.window_end OR a.starts_at <> e.offered_starts)
		UNION ALL
		SELECT a.clinic_id::TEXT, 'held offer ' || a.appointment_id::TEXT || ' names entry ' || a.waitlist_entry_id::TEXT ||
		       ', which is ' || COALESCE(e.status || ' with ' || COALESCE(e.appointment_id::TEXT, 'no appointment'), 'missing')
		FROM appointments a
		LEFT JOIN clinic_waitlist_entries e ON e.clinic_id = a.clinic_id AND e.entry_id = a.waitlist_entry_id
		WHERE a.waitlist_entry_id IS NOT NULL AND a.status = 'held' AND ($1 = '' OR a.home_region = $1)
		  AND ($3::UUID[] IS NULL OR a.clinic_id = ANY($3::UUID[]))
		  AND (e.entry_id IS NULL OR e.status <> 'offered' OR e.appointment_id IS DISTINCT FROM a.appointment_id)
		UNION ALL
		SELECT clinic_id::TEXT, 'entry ' || waitlist_entry_id::TEXT || ' was offered ' || count(*) || ' appointments'
		FROM appointments
		WHERE waitlist_entry_id IS NOT NULL AND ($1 = '' OR home_region = $1) AND ($3::UUID[] IS NULL OR clinic_id = ANY($3::UUID[]))
		GROUP BY clinic_id, waitlist_entry_id HAVING count(*) > 1
		ORDER BY 1, 2 LIMIT $2`, nil},
	// First come, first served: when an entry was offered a slot, no entry
	// ahead of it in the doctor's line whose span holds that slot's start
	// may have been left waiting — unless that offer passed it over (a
	// per-patient limit, or a day the patient was busy with the doctor).
	{CheckClinicWaitlistFIFO, "no clinic waitlist entry was offered a slot while an earlier entry of its line, whose day or window holds that slot, waited", true, `
		SELECT o.clinic_id::TEXT, 'entry ' || o.entry_id::TEXT || ' (seq ' || o.seq || ') was offered ' || o.offered_starts::TEXT ||
		       ' while entry ' || w.entry_id::TEXT || ' (seq ' || w.seq || ') waited'
		FROM clinic_waitlist_entries o
		JOIN clinic_waitlist_entries w ON w.clinic_id = o.clinic_id AND w.doctor_id = o.doctor_id AND w.seq < o.seq
		     AND w.status = 'waiting' AND w.window_start <= o.offered_starts AND w.window_end > o.offered_starts
		     AND (w.passed_at IS NULL OR w.passed_at < o.offered_at)
		WHERE o.offered_at IS NOT NULL AND ($1 = '' OR o.home_region = $1) AND ($3::UUID[] IS NULL OR o.clinic_id = ANY($3::UUID[]))
		ORDER BY 1, 2 LIMIT $2`, nil},
}

// Verify checks the invariants straight from the database, read-only, in
// one snapshot (a read-only REPEATABLE READ transaction, so the checks
// agree with each other while traffic flows):
//   - every night's reserved equals the sum of the reservations occupying
//     it (held, confirmed, a stay, a no-show's first night) and stays within
//     [0, sell_limit], and every night a reservation occupies exists;
//   - no room is used twice on a night; every assigned room-night belongs to
//     a stay that occupies it, every stay has its rooms every night, and
//     every night's out-of-order count matches its rooms out of order;
//   - at most one appointment per slot, and a live appointment (or a visit:
//     arrived, completed, no_show) and its slot point at each other (the
//     slot names it and its guest, held or booked to match; every held or
//     booked slot names such an appointment);
//   - a walked stay holds no nights or rooms and names its relocated stay,
//     which names it back; a relocated stay belongs to exactly one walk;
//   - no hotel hold lingers past its expiry longer than StaleHoldAfter;
//   - every guest's counted holds (guest_holds) equal their held reservations;
//   - every offered waitlist entry and its one held reservation name each
//     other, and no entry was offered while an earlier one that the offered
//     rooms would have served waited (first come, first served), and the
//     same of every clinic waitlist offer and its held appointment;
//   - every recently confirmed booking has its confirmation event.
//
// It is the one audit: `booking verify`, the tests (bookingtest) and the
// loadtest's audit all run it.
func Verify(ctx context.Context, db *DB, o VerifyOptions) ([]CheckResult, error) {
	if o.Limit <= 0 {
		o.Limit = 100
	}
	if o.StaleHoldAfter <= 0 {
		o.StaleHoldAfter = 5 * time.Minute
	}
	if o.EventWindow <= 0 {
		o.EventWindow = 48 * time.Hour
	}
	hasClinics, err := tableExists(ctx, db, "appointments")
	if err != nil {
		return nil, err
	}
	var partitions any // NULL: every partition
	if o.Partitions != nil {
		partitions = o.Partitions
	}
	var out []CheckResult
	err = pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		out = out[:0]
		for _, c := range verifyChecks {
			res := CheckResult{Name: c.name, Description: c.desc, Violations: []Violation{}}
			if c.clinic && !hasClinics {
				res.Skipped = "no clinic tables"
				out = append(out, res)
				continue
			}
			args := []any{o.Region, o.Limit, partitions}
			if c.window != nil {
				args = append(args, c.window(o).Microseconds())
			}
			rows, err := tx.Query(ctx, c.sql, args...)
			if err != nil {
				return fmt.Errorf("verify %s: %w", c.name, err)
			}
			for rows.Next() {
				var v Violation
				if err := rows.Scan(&v.Partition, &v.Detail); err != nil {
					rows.Close()
					return fmt.Errorf("verify %s: %w", c.name, err)
				}
				res.Violations = append(res.Violations, v)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("verify %s: %w", c.name, err)
			}
			out = append(out, res)
		}
		return nil
	})
	return out, err
}

func tableExists(ctx context.Context, db *DB, name string) (bool, error) {
	var ok bool
	err := db.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1)`,
		name).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("look up table %s: %w", name, err)
	}
	return ok, nil
}

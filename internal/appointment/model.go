// Package appointment owns the rules of a clinic appointment: the states of
// a slot and of an appointment and the transitions between them, the weekly
// template of a doctor ("Mon 08:00–12:00" in the clinic's time zone) and its
// DST-safe materialization into slots stored as UTC instants, and the
// validation of what a client may ask for. It imports only the standard
// library; the stores enforce these rules inside their transactions.
package appointment

import (
	"time"

	"github.com/berthhq/berth/internal/reservation"
)

// Date is a calendar day without a time zone (shared with hotel stays).
type Date = reservation.Date

// SlotStatus is the state of a slot row.
type SlotStatus string

// The statuses of a slot. A held slot whose hold lapsed is shown (and
// treated by every write) as open.
const (
	SlotOpen    SlotStatus = "open"
	SlotHeld    SlotStatus = "held"
	SlotBooked  SlotStatus = "booked"
	SlotBlocked SlotStatus = "blocked"
)

// Status is the life-cycle state of an appointment.
type Status string

// The statuses of an appointment.
const (
	StatusHeld      Status = "held"
	StatusConfirmed Status = "confirmed"
	StatusCancelled Status = "cancelled"
	StatusExpired   Status = "expired"
	StatusNoShow    Status = "no_show"
)

// Live reports whether an appointment in status s still claims its slot: a
// held one, even when its hold lapsed (it may still be confirmed, cancelled
// or rescheduled until someone else takes the slot), or a confirmed one.
func (s Status) Live() bool { return s == StatusHeld || s == StatusConfirmed }

// Counts reports whether an appointment in status s counts against the
// guest's one appointment per doctor per day: a confirmed one, or a held
// one whose hold has not lapsed (lapsed: by database time). A lapsed hold
// is Live but no longer Counts, so the guest may book another slot that
// day. The store says the same in SQL (countsSQL); a test of the store
// holds the two together.
func (s Status) Counts(lapsed bool) bool {
	return s == StatusConfirmed || (s == StatusHeld && !lapsed)
}

// SlotStatus is the status of the slot an appointment in status s occupies.
func (s Status) SlotStatus() SlotStatus {
	switch s {
	case StatusHeld:
		return SlotHeld
	case StatusConfirmed:
		return SlotBooked
	}
	return SlotOpen
}

// Channel is where an appointment was made.
type Channel string

// The channels of the API contract. ChannelSystem marks audit rows written
// by the service itself (a lapsed hold given up when someone else took it).
const (
	ChannelApp     Channel = "app"
	ChannelWeb     Channel = "web"
	ChannelCounter Channel = "counter"
	ChannelSystem  Channel = "system"
)

// ValidRequestChannel reports whether a client may name c.
func ValidRequestChannel(c Channel) bool {
	return c == ChannelApp || c == ChannelWeb || c == ChannelCounter
}

// Event types written to the outbox.
const (
	EventHeld            = "appointment.held"
	EventConfirmed       = "appointment.confirmed"
	EventCancelled       = "appointment.cancelled"
	EventRescheduled     = "appointment.rescheduled"
	EventExpired         = "appointment.expired"
	EventRefundRequested = "refund_requested"
	EventSlotBlocked     = "slot.blocked"
)

// Clinic is a partition of the clinic kind.
type Clinic struct {
	ID         string    `json:"clinic_id"`
	Name       string    `json:"name"`
	Timezone   string    `json:"timezone"`
	HomeRegion string    `json:"home_region"`
	CreatedAt  time.Time `json:"created_at"`
}

// Doctor is who a slot belongs to, with the weekly template slots are made from.
type Doctor struct {
	ID             string `json:"doctor_id"`
	ClinicID       string `json:"clinic_id"`
	Name           string `json:"name"`
	SlotMinutes    int    `json:"slot_minutes"`
	PrepayRequired bool   `json:"prepay_required"`
	// PriceCents and Currency are what a prepaid appointment costs; without
	// them a prepaid appointment cannot be paid online (only at the desk).
	PriceCents *int64   `json:"price_cents,omitempty"`
	Currency   string   `json:"currency,omitempty"`
	Weekly     []Window `json:"weekly"`
}

// Slot is one bookable slot of a doctor.
type Slot struct {
	ID        string     `json:"slot_id"`
	ClinicID  string     `json:"-"`
	DoctorID  string     `json:"doctor_id,omitempty"`
	StartsAt  time.Time  `json:"starts_at"`
	EndsAt    time.Time  `json:"ends_at"`
	LocalDate Date       `json:"-"`
	Status    SlotStatus `json:"status"`
}

// SlotList is a doctor's slots of one local day.
type SlotList struct {
	DoctorID string `json:"doctor_id"`
	Date     Date   `json:"date"`
	Timezone string `json:"timezone"`
	Slots    []Slot `json:"slots"`
}

// Actor is who made a change, as proven by their token.
type Actor struct {
	Subject string `json:"subject"`
	Role    string `json:"role"`
}

// Appointment is a guest's hold or booking of one slot.
type Appointment struct {
	ID            string     `json:"appointment_id"`
	ClinicID      string     `json:"clinic_id"`
	DoctorID      string     `json:"doctor_id"`
	SlotID        string     `json:"slot_id"`
	GuestID       string     `json:"guest_id"`
	StartsAt      time.Time  `json:"starts_at"`
	EndsAt        time.Time  `json:"ends_at"`
	LocalDate     Date       `json:"date"`
	Status        Status     `json:"status"`
	HoldExpiresAt *time.Time `json:"hold_expires_at"`
	Channel       Channel    `json:"channel"`
	CreatedBy     Actor      `json:"created_by"`
	PaymentRef    string     `json:"payment_ref,omitempty"`
	// PriceCents and Currency are what the appointment's payment must match
	// (copied from the doctor when a prepaid appointment is held).
	PriceCents *int64 `json:"price_cents,omitempty"`
	Currency   string `json:"currency,omitempty"`
	// ContactEmail and ContactPhone are where notifications go.
	ContactEmail string `json:"contact_email,omitempty"`
	ContactPhone string `json:"contact_phone,omitempty"`
	// ContactPushToken is the device token of the patient's app, where push
	// notifications go (FCM).
	ContactPushToken string `json:"contact_push_token,omitempty"`
	// WaitlistEntryID names the clinic waitlist entry this held appointment
	// was offered to (docs/adr/0015-clinic-waitlist.md); empty for a hold the
	// patient made.
	WaitlistEntryID string    `json:"waitlist_entry_id,omitempty"`
	Version         int64     `json:"version"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// AuditEvent is one slot transition.
type AuditEvent struct {
	At            time.Time `json:"at"`
	Actor         string    `json:"actor"`
	ActorRole     string    `json:"actor_role"`
	Channel       Channel   `json:"channel"`
	FromStatus    string    `json:"from_status"`
	ToStatus      string    `json:"to_status"`
	AppointmentID string    `json:"appointment_id,omitempty"`
}

// HoldRequest asks for one slot — a given one, or any open slot of a doctor
// starting within [WindowStart, WindowEnd).
type HoldRequest struct {
	AppointmentID    string // generated by the caller, before the transaction
	ClinicID         string
	GuestID          string
	SlotID           string
	DoctorID         string
	WindowStart      time.Time
	WindowEnd        time.Time
	Channel          Channel
	Actor            Actor
	ContactEmail     string
	ContactPhone     string
	ContactPushToken string
}

// ByWindow reports whether the request names a window rather than a slot.
func (r HoldRequest) ByWindow() bool { return r.SlotID == "" }

// DateOf returns the calendar day of t in t's location.
func DateOf(t time.Time) Date { return reservation.DateOf(t) }

// ParseDate parses a strict YYYY-MM-DD date.
func ParseDate(s string) (Date, error) { return reservation.ParseDate(s) }

// ClinicDetail is a clinic with its doctors.
type ClinicDetail struct {
	Clinic
	Doctors []Doctor `json:"doctors"`
}

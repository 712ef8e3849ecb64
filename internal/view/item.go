package view

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/events"
)

// Item is one row of the view: a reservation or an appointment as a guest
// sees it.
type Item struct {
	Kind         string
	PartitionID  string
	ID           string
	GuestID      string
	Status       string
	Start, End   string // hotel: dates YYYY-MM-DD; clinic: RFC 3339 instants
	SortAt       time.Time
	Title        string
	ContactEmail string
	ContactPhone string
	// ContactPushToken is a device token for push notifications
	// (appointments only).
	ContactPushToken string
	Version          int64
	UpdatedAt        time.Time
	EventTime        time.Time
}

// mapper turns an event's data into an item. Adding a kind of event is
// adding an entry to mappers.
type mapper func(data json.RawMessage) (Item, error)

// mappers maps event types to their projection; types not listed (e.g.
// placement.moved) do not touch the view.
var mappers = map[string]mapper{
	"hotel/reservation.held":        hotelReservation,
	"hotel/reservation.confirmed":   hotelReservation,
	"hotel/reservation.cancelled":   hotelReservation,
	"hotel/reservation.expired":     hotelReservation,
	"hotel/refund_requested":        nested("reservation", hotelReservation),
	"hotel/reservation.checked_in":  hotelReservation,
	"hotel/reservation.checked_out": hotelReservation,
	// A no-show carries the reservation beside the first night's charge.
	"hotel/reservation.no_show": nested("reservation", hotelReservation),
	// Walks (docs/adr/0012-walks.md): the original stay walking, walked
	// (beside the compensation) or confirmed again; the stay a sister
	// hotel holds for the guest is a confirmed stay of that hotel.
	"hotel/reservation.walking":     hotelReservation,
	"hotel/reservation.walked":      nested("reservation", hotelReservation),
	"hotel/reservation.walk_undone": nested("reservation", hotelReservation),
	"hotel/reservation.relocated":   hotelReservation,
	// A waitlist offer carries its entry beside the held reservation it
	// made (which its own reservation.held event projects too).
	"hotel/waitlist.offered":       nested("reservation", hotelReservation),
	"clinic/appointment.held":      clinicAppointment,
	"clinic/appointment.confirmed": clinicAppointment,
	"clinic/appointment.cancelled": clinicAppointment,
	"clinic/appointment.expired":   clinicAppointment,
	// A no-show carries the appointment flat, with its charge beside it
	// (appointment.NoShowEvent); arrived and completed carry it alone.
	"clinic/appointment.no_show":   clinicAppointment,
	"clinic/appointment.arrived":   clinicAppointment,
	"clinic/appointment.completed": clinicAppointment,
	// A reschedule carries the appointment with its new slot.
	"clinic/appointment.rescheduled": clinicAppointment,
	"clinic/refund_requested":        nested("appointment", clinicAppointment),
	// A clinic waitlist offer carries its entry beside the held appointment
	// it made (docs/adr/0015-clinic-waitlist.md).
	"clinic/clinic_waitlist.offered": nested("appointment", clinicAppointment),
}

// FromEvent projects an event. ok is false for events the view ignores.
func FromEvent(e events.Envelope) (it Item, ok bool, err error) {
	m, found := mappers[e.Kind+"/"+e.Type]
	if !found {
		return Item{}, false, nil
	}
	it, err = m(e.Data)
	if err != nil {
		return Item{}, false, fmt.Errorf("project %s %s: %w", e.Type, e.ID, err)
	}
	if it.Version == 0 {
		it.Version = e.AggregateVersion
	}
	if it.PartitionID == "" {
		it.PartitionID = e.PartitionID
	}
	it.EventTime = e.Time
	if err := it.valid(); err != nil {
		return Item{}, false, fmt.Errorf("project %s %s: %w", e.Type, e.ID, err)
	}
	return it, true, nil
}

func (it Item) valid() error {
	var missing []string
	for name, v := range map[string]string{"id": it.ID, "partition": it.PartitionID, "guest_id": it.GuestID, "status": it.Status, "start": it.Start} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	return nil
}

func nested(field string, m mapper) mapper {
	return func(data json.RawMessage) (Item, error) {
		var outer map[string]json.RawMessage
		if err := json.Unmarshal(data, &outer); err != nil {
			return Item{}, err
		}
		inner, ok := outer[field]
		if !ok {
			return Item{}, fmt.Errorf("no %q in the event data", field)
		}
		return m(inner)
	}
}

type hotelData struct {
	ID           string `json:"reservation_id"`
	HotelID      string `json:"hotel_id"`
	GuestID      string `json:"guest_id"`
	CheckIn      string `json:"check_in"`
	CheckOut     string `json:"check_out"`
	Quantity     int    `json:"quantity"`
	Status       string `json:"status"`
	ContactEmail string `json:"contact_email"`
	ContactPhone string `json:"contact_phone"`
	// ContactPushToken is absent from the events of reservations held
	// before it existed: the projection keeps what it had (COALESCE).
	ContactPushToken string    `json:"contact_push_token"`
	Version          int64     `json:"version"`
	UpdatedAt        time.Time `json:"updated_at"`
	// RelocatedFrom links a stay a sister hotel holds for a walked guest
	// to the original.
	RelocatedFrom *struct {
		ReservationID string `json:"reservation_id"`
	} `json:"relocated_from"`
}

func hotelReservation(data json.RawMessage) (Item, error) {
	var d hotelData
	if err := json.Unmarshal(data, &d); err != nil {
		return Item{}, err
	}
	it, err := HotelItem(d.HotelID, d.ID, d.GuestID, d.Status, d.CheckIn, d.CheckOut, d.Quantity, d.ContactEmail, d.ContactPhone, d.Version, d.UpdatedAt)
	it.ContactPushToken = d.ContactPushToken
	if err == nil && d.RelocatedFrom != nil {
		Relocated(&it, d.RelocatedFrom.ReservationID)
	}
	return it, err
}

// Relocated links the item of a stay a sister hotel holds for a walked
// guest to the original reservation, in its title: the guest's list shows
// the walked stay and the one that replaced it side by side.
func Relocated(it *Item, fromReservationID string) {
	if fromReservationID != "" {
		it.Title += " (relocated from reservation " + fromReservationID + ")"
	}
}

// HotelItem builds the item of a hotel reservation; the projection and the
// rebuild both use it, so they agree on every derived field.
func HotelItem(hotelID, id, guestID, status, checkIn, checkOut string, qty int, email, phone string, version int64, updated time.Time) (Item, error) {
	in, err := time.Parse(time.DateOnly, checkIn)
	if err != nil {
		return Item{}, fmt.Errorf("check_in: %w", err)
	}
	out, err := time.Parse(time.DateOnly, checkOut)
	if err != nil {
		return Item{}, fmt.Errorf("check_out: %w", err)
	}
	nights := int(out.Sub(in).Hours() / 24)
	return Item{
		Kind: "hotel", PartitionID: hotelID, ID: id, GuestID: guestID, Status: status,
		Start: checkIn, End: checkOut, SortAt: in,
		Title:        fmt.Sprintf("Hotel stay: %s, %s", plural(nights, "night"), plural(qty, "room")),
		ContactEmail: email, ContactPhone: phone, Version: version, UpdatedAt: updated.UTC(),
	}, nil
}

type clinicData struct {
	ID               string    `json:"appointment_id"`
	ClinicID         string    `json:"clinic_id"`
	GuestID          string    `json:"guest_id"`
	StartsAt         time.Time `json:"starts_at"`
	EndsAt           time.Time `json:"ends_at"`
	Status           string    `json:"status"`
	ContactEmail     string    `json:"contact_email"`
	ContactPhone     string    `json:"contact_phone"`
	ContactPushToken string    `json:"contact_push_token"`
	Version          int64     `json:"version"`
	UpdatedAt        time.Time `json:"updated_at"`
}

func clinicAppointment(data json.RawMessage) (Item, error) {
	var d clinicData
	if err := json.Unmarshal(data, &d); err != nil {
		return Item{}, err
	}
	if d.StartsAt.IsZero() {
		return Item{}, fmt.Errorf("starts_at: missing")
	}
	it := ClinicItem(d.ClinicID, d.ID, d.GuestID, d.Status, d.StartsAt, d.EndsAt, d.ContactEmail, d.ContactPhone, d.Version, d.UpdatedAt)
	it.ContactPushToken = d.ContactPushToken
	return it, nil
}

// ClinicItem builds the item of an appointment (see HotelItem).
func ClinicItem(clinicID, id, guestID, status string, starts, ends time.Time, email, phone string, version int64, updated time.Time) Item {
	starts, ends = starts.UTC(), ends.UTC()
	return Item{
		Kind: "clinic", PartitionID: clinicID, ID: id, GuestID: guestID, Status: status,
		Start: starts.Format(time.RFC3339), End: ends.Format(time.RFC3339), SortAt: starts,
		Title:        fmt.Sprintf("Clinic appointment: %d min", int(ends.Sub(starts).Minutes())),
		ContactEmail: email, ContactPhone: phone, Version: version, UpdatedAt: updated.UTC(),
	}
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

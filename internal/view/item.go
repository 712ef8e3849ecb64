package view

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berthhq/berth/internal/events"
	jsoniter "github.com/json-iterator/go"
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

// mappers maps event types to their projection; types not listed (e.g.
// placement.moved) do not touch the view. Adding a kind of event is adding
// an entry here.
var mappers = map[string]projection{
	"hotel/reservation.held":        hotelFlat,
	"hotel/reservation.confirmed":   hotelFlat,
	"hotel/reservation.cancelled":   hotelFlat,
	"hotel/reservation.expired":     hotelFlat,
	"hotel/refund_requested":        hotelNested,
	"hotel/reservation.checked_in":  hotelFlat,
	"hotel/reservation.checked_out": hotelFlat,
	// A no-show carries the reservation beside the first night's charge.
	"hotel/reservation.no_show": hotelNested,
	// Walks (docs/adr/0012-walks.md): the original stay walking, walked
	// (beside the compensation) or confirmed again; the stay a sister
	// hotel holds for the guest is a confirmed stay of that hotel.
	"hotel/reservation.walking":     hotelFlat,
	"hotel/reservation.walked":      hotelNested,
	"hotel/reservation.walk_undone": hotelNested,
	"hotel/reservation.relocated":   hotelFlat,
	// A waitlist offer carries its entry beside the held reservation it
	// made (which its own reservation.held event projects too).
	"hotel/waitlist.offered":       hotelNested,
	"clinic/appointment.held":      clinicFlat,
	"clinic/appointment.confirmed": clinicFlat,
	"clinic/appointment.cancelled": clinicFlat,
	"clinic/appointment.expired":   clinicFlat,
	// A no-show carries the appointment flat, with its charge beside it
	// (appointment.NoShowEvent); arrived and completed carry it alone.
	"clinic/appointment.no_show":   clinicFlat,
	"clinic/appointment.arrived":   clinicFlat,
	"clinic/appointment.completed": clinicFlat,
	// A reschedule carries the appointment with its new slot.
	"clinic/appointment.rescheduled": clinicFlat,
	"clinic/refund_requested":        clinicNested,
	// A clinic waitlist offer carries its entry beside the held appointment
	// it made (docs/adr/0015-clinic-waitlist.md).
	"clinic/clinic_waitlist.offered": clinicNested,
}

// The four ways an event's data carries its item: the data is the
// reservation (or appointment), or holds it in a field beside other things
// (a charge, a refund, a waitlist entry).
var (
	hotelFlat   = projectionOf(func(d *hotelData) (Item, error) { return hotelReservation(d) })
	hotelNested = projectionOf(func(d *struct {
		Reservation *hotelData `json:"reservation"`
	}) (Item, error) {
		if d.Reservation == nil {
			return Item{}, errors.New(`no "reservation" in the event data`)
		}
		return hotelReservation(d.Reservation)
	})
	clinicFlat   = projectionOf(func(d *clinicData) (Item, error) { return clinicAppointment(d) })
	clinicNested = projectionOf(func(d *struct {
		Appointment *clinicData `json:"appointment"`
	}) (Item, error) {
		if d.Appointment == nil {
			return Item{}, errors.New(`no "appointment" in the event data`)
		}
		return clinicAppointment(d.Appointment)
	})
)

// projection reads the item of one shape of event data: from the data of
// an envelope already decoded (FromEvent), or from the whole message in one
// pass (Project).
type projection struct {
	data    func(data json.RawMessage) (Item, error)
	message func(msg []byte) (head, Item, error)
}

// head is the envelope without its data: what the projection needs of it.
// Its fields are events.Envelope's, with the same JSON names.
type head struct {
	SpecVersion      string    `json:"specversion"`
	ID               string    `json:"id"`
	Source           string    `json:"source"`
	Type             string    `json:"type"`
	Time             time.Time `json:"time"`
	AggregateVersion int64     `json:"aggregateversion"`
	Kind             string    `json:"kind"`
	PartitionID      string    `json:"partitionid"`
}

// message is a whole event whose data decodes straight into T: one pass
// over the bytes, no copy of the data, no second decode.
type message[T any] struct {
	head
	Data T `json:"data"`
}

// skipped decodes any data into nothing (an event the view ignores).
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

func projectionOf[T any](item func(*T) (Item, error)) projection {
	return projection{
		data: func(data json.RawMessage) (Item, error) {
			var d T
			if err := json.Unmarshal(data, &d); err != nil {
				return Item{}, err
			}
			return item(&d)
		},
		message: func(msg []byte) (head, Item, error) {
			var m message[T]
			if err := wire.Unmarshal(msg, &m); err != nil {
				return m.head, Item{}, fmt.Errorf("decode event: %w", err)
			}
			if err := m.head.check(); err != nil {
				return m.head, Item{}, err
			}
			it, err := item(&m.Data)
			if err != nil {
				return m.head, Item{}, fmt.Errorf("project %s %s: %w", m.Type, m.ID, err)
			}
			return m.head, it, nil
		},
	}
}

// wire decodes whole messages (Project): json-iterator in its
// encoding/json-compatible mode (the same tags, the same errors for
// malformed JSON, the members it skips still checked), as the search index
// reads the same messages. The read model decodes every event of every
// region, and encoding/json's decode was about a quarter of its CPU per
// hold (docs/PERFORMANCE.md, "The events side per hold: the read model's
// decode", ADR 0024). FromEvent's data, already split from an envelope by
// encoding/json, stays with encoding/json: FuzzProject holds the two paths
// to the same answers.
var wire = jsoniter.ConfigCompatibleWithStandardLibrary

// check applies events.Decode's rules to the envelope.
func (h head) check() error {
	return events.Envelope{SpecVersion: h.SpecVersion, ID: h.ID, Type: h.Type, Source: h.Source, Kind: h.Kind}.Check()
}

// FromEvent projects an event. ok is false for events the view ignores.
func FromEvent(e events.Envelope) (it Item, ok bool, err error) {
	p, found := mappers[e.Kind+"/"+e.Type]
	if !found {
		return Item{}, false, nil
	}
	it, err = p.data(e.Data)
	if err != nil {
		return Item{}, false, fmt.Errorf("project %s %s: %w", e.Type, e.ID, err)
	}
	return finish(it, head{ID: e.ID, Type: e.Type, Time: e.Time, AggregateVersion: e.AggregateVersion, PartitionID: e.PartitionID})
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

// Event is a booking event as the projection needs it: its id and time,
// and the item it projects to (nil for an event the view ignores).
type Event struct {
	ID   string
	Type string
	Time time.Time
	Item *Item
}

// Change is what one event does to the view: its id, recorded as
// processed once, and the item it projects to (nil: an event the view
// ignores, still recorded as processed).
type Change struct {
	EventID string
	Item    *Item
}

// Applied is what applying a Change did: Fresh is false for a duplicate
// (which changes nothing), Changed false when the view already held the
// same or a newer version of the item.
type Applied struct {
	Fresh, Changed bool
}

// Project reads a whole event message (a CloudEvents envelope, checked as
// events.Decode checks it) and projects it, in one pass over the bytes when
// kind and typ — the message's subject says them — are the envelope's. The
// projection's consumer used to decode each message twice (the envelope,
// then its data; three times for nested data), which was a quarter of its
// CPU (docs/PERFORMANCE.md, "CPU per hold").
func Project(kind, typ string, msg []byte) (Event, error) {
	if !utf8.Valid(msg) {
		// encoding/json reads each invalid byte in a string as U+FFFD and
		// json-iterator keeps it: a message that is not UTF-8 (no relay
		// writes one) goes the two-pass way, so both paths read it alike.
		env, err := events.Decode(msg)
		if err != nil {
			return Event{}, err
		}
		return fromEnvelope(env)
	}
	p, found := mappers[kind+"/"+typ]
	if !found {
		p = ignored
	}
	h, it, err := p.message(msg)
	if (h.Kind != kind || h.Type != typ) && h.check() == nil {
		// The envelope is the truth when the subject says otherwise (the
		// data was then read as the wrong shape: read it again).
		if _, known := mappers[h.Kind+"/"+h.Type]; known || found {
			return Project(h.Kind, h.Type, msg)
		}
	}
	if err != nil {
		if found {
			// The data did not read as the subject's shape, and the envelope
			// could not be read far enough to say its own: the two-pass path
			// decides, as it did before this one-pass read.
			if env, derr := events.Decode(msg); derr == nil && (env.Kind != kind || env.Type != typ) {
				return fromEnvelope(env)
			}
		}
		return Event{}, err
	}
	e := Event{ID: h.ID, Type: h.Type, Time: h.Time}
	if !found {
		return e, nil
	}
	if it, _, err = finish(it, h); err != nil {
		return Event{}, err
	}
	e.Item = &it
	return e, nil
}

// fromEnvelope projects an event decoded whole (events.Decode).
func fromEnvelope(env events.Envelope) (Event, error) {
	it, ok, err := FromEvent(env)
	if err != nil {
		return Event{}, err
	}
	e := Event{ID: env.ID, Type: env.Type, Time: env.Time}
	if ok {
		e.Item = &it
	}
	return e, nil
}

// ignored reads the envelope of an event the view ignores, skipping its data.
var ignored = projectionOf(func(*skipped) (Item, error) { return Item{}, nil })

// finish completes an item with what its envelope says and checks it.
func finish(it Item, h head) (Item, bool, error) {
	if it.Version == 0 {
		it.Version = h.AggregateVersion
	}
	if it.PartitionID == "" {
		it.PartitionID = h.PartitionID
	}
	it.EventTime = h.Time
	if err := it.valid(); err != nil {
		return Item{}, false, fmt.Errorf("project %s %s: %w", h.Type, h.ID, err)
	}
	return it, true, nil
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

func hotelReservation(d *hotelData) (Item, error) {
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

func clinicAppointment(d *clinicData) (Item, error) {
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

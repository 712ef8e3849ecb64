package natsbus

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/waitlist"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Offerer makes the offers of one freeing event in the hotel's home region,
// at most once per event id (postgres.Store.OfferFreed).
type Offerer interface {
	OfferFreed(ctx context.Context, eventID string, free waitlist.Free) ([]waitlist.Entry, error)
}

// WaitlistSubjects are the subjects of the events that wake waitlists
// (waitlist.WakingEvents) of every hotel.
func WaitlistSubjects() []string { return wakingSubjects(berth.KindHotel, waitlist.WakingEvents) }

func wakingSubjects(kind berth.Kind, types []string) []string {
	out := make([]string, 0, len(types))
	for _, t := range types {
		out = append(out, events.Subject(string(kind), "*", t))
	}
	return out
}

// WaitlistHandler applies one freeing event to its waitlist: what came free
// goes to the first waiters as held offers (Offerer). An event of a hotel
// homed in another region is that region's to apply (its consumer gets the
// same event), so the fence's 421 — and a hotel unknown here — ack it.
func WaitlistHandler(o Offerer, log *slog.Logger) Handler {
	return WaitlistHandlerIn("", nil, o, log)
}

// WaitlistHandlerIn is WaitlistHandler for the consumer of region, which
// also redrives an event its own relay sent for a hotel that has moved away
// since (the fence's 421 here, where the hotel was homed when the event was
// sent): the new home's consumer may have seen the event before the move
// and skipped it too, and then the freed rooms would wait for the next
// free. The copy goes to every region once (a copy is never redriven
// again, and its message id dedups a redelivered original's); the new
// home applies it — or, had it applied the original, finds the event
// claimed, or decides again on what is free then, which never offers a
// room twice. Only a second move before the copy is read can still lose it.
func WaitlistHandlerIn(region string, js jetstream.JetStream, o Offerer, log *slog.Logger) Handler {
	return offerHandler(berth.KindHotel, region, js, log, waitlist.Freed, o.OfferFreed,
		func(ctx context.Context, e waitlist.Entry, eventID string) {
			log.InfoContext(ctx, "waitlist offer", "hotel_id", e.HotelID, "entry_id", e.ID, "reservation_id", e.Offer.ReservationID,
				"event_id", eventID)
		})
}

// offerHandler is what both waitlist consumers (hotels, clinics) do with a
// message: a freeing event of their kind (freed reads it) is offered
// (offer: once per event, in the partition's home region); a partition
// unknown here is acked; one homed elsewhere (421) is acked, after a redrive
// when this region's relay sent the event (WaitlistHandlerIn says why);
// every offer made is logged.
func offerHandler[F, E any](kind berth.Kind, region string, js jetstream.JetStream, log *slog.Logger,
	freed func(string, []byte) (F, bool, error), offer func(context.Context, string, F) ([]E, error),
	logged func(context.Context, E, string)) Handler {
	return func(ctx context.Context, m Message) error {
		if m.DecodeErr != nil {
			return m.DecodeErr
		}
		if m.Event.Kind != string(kind) {
			return nil
		}
		free, ok, err := freed(m.Event.Type, m.Event.Data)
		if err != nil || !ok {
			return err
		}
		offered, err := offer(ctx, m.Event.ID, free)
		switch berth.ErrorCode(err) {
		case berth.CodeMisdirected:
			if js == nil || region == "" || m.Region != region || m.Redriven {
				return nil
			}
			if err := Redrive(ctx, js, m); err != nil {
				return err
			}
			log.InfoContext(ctx, "waitlist event redriven: its partition moved away after this region sent it",
				"kind", string(kind), "partition_id", m.Event.PartitionID, "event_id", m.Event.ID)
			return nil
		case berth.CodeNotFound:
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range offered {
			logged(ctx, e, m.Event.ID)
		}
		return nil
	}
}

// OfferOnFree runs the waitlist consumer of one region: one durable per
// region ("waitlist-<region>"), shared by the region's replicas, on the
// freeing events of every hotel from the start of the stream (an offer
// missed while the consumer was down is made when it comes back).
func OfferOnFree(ctx context.Context, js jetstream.JetStream, region string, o Offerer, log *slog.Logger) error {
	return Consume(ctx, js, ConsumerConfig{Durable: "waitlist-" + region, Filters: WaitlistSubjects(), Log: log},
		WaitlistHandlerIn(region, js, o, log))
}

// Redrive publishes a copy of m on its subject for every consumer to see
// again, marked redriven, under a message id derived from the event's (so
// the broker keeps one copy however often the original is redelivered).
func Redrive(ctx context.Context, js jetstream.JetStream, m Message) error {
	out := nats.NewMsg(m.Subject)
	out.Data = m.Data
	out.Header.Set("Content-Type", "application/cloudevents+json")
	out.Header.Set("Ce-Id", m.Event.ID)
	out.Header.Set("Ce-Type", m.Event.Type)
	out.Header.Set(RedrivenHeader, "1")
	out.Header.Set(nats.MsgIdHdr, "redrive-"+m.Event.ID)
	if _, err := js.PublishMsg(ctx, out); err != nil {
		return fmt.Errorf("%w: redrive event %s: %v", berth.ErrDependency, m.Event.ID, err)
	}
	return nil
}

// ClinicOfferer makes the offers of one freeing event to a doctor's line in
// the clinic's home region, at most once per (event, doctor)
// (postgres.ClinicStore.OfferClinicFreed).
type ClinicOfferer interface {
	OfferClinicFreed(ctx context.Context, eventID string, free waitlist.ClinicFree) ([]waitlist.ClinicEntry, error)
}

// ClinicWaitlistSubjects are the subjects of the events that wake clinic
// waitlists (waitlist.ClinicWakingEvents) of every clinic.
func ClinicWaitlistSubjects() []string {
	return wakingSubjects(berth.KindClinic, waitlist.ClinicWakingEvents)
}

// ClinicWaitlistHandler applies one freeing clinic event to the line of its
// doctor: the slots free then go to the first waiters as held offers. As
// for hotels, a clinic homed in another region (421) or unknown here is
// acked: it is not this region's to serve.
func ClinicWaitlistHandler(o ClinicOfferer, log *slog.Logger) Handler {
	return ClinicWaitlistHandlerIn("", nil, o, log)
}

// ClinicWaitlistHandlerIn is ClinicWaitlistHandler for the consumer of
// region, which redrives an event its relay sent for a clinic that moved
// away since, as WaitlistHandlerIn does for hotels.
func ClinicWaitlistHandlerIn(region string, js jetstream.JetStream, o ClinicOfferer, log *slog.Logger) Handler {
	return offerHandler(berth.KindClinic, region, js, log, waitlist.ClinicFreed, o.OfferClinicFreed,
		func(ctx context.Context, e waitlist.ClinicEntry, eventID string) {
			log.InfoContext(ctx, "clinic waitlist offer", "clinic_id", e.ClinicID, "entry_id", e.ID,
				"appointment_id", e.Offer.AppointmentID, "event_id", eventID)
		})
}

// OfferOnClinicFree runs the clinic waitlist consumer of one region: one
// durable per region ("clinic-waitlist-<region>"), on the freeing events of
// every clinic from the start of the stream.
func OfferOnClinicFree(ctx context.Context, js jetstream.JetStream, region string, o ClinicOfferer, log *slog.Logger) error {
	return Consume(ctx, js, ConsumerConfig{Durable: "clinic-waitlist-" + region, Filters: ClinicWaitlistSubjects(), Log: log},
		ClinicWaitlistHandlerIn(region, js, o, log))
}

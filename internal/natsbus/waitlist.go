package natsbus

import (
	"context"
	"log/slog"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/waitlist"
	"github.com/nats-io/nats.go/jetstream"
)

// Offerer makes the offers of one freeing event in the hotel's home region,
// at most once per event id (postgres.Store.OfferFreed).
type Offerer interface {
	OfferFreed(ctx context.Context, eventID string, free waitlist.Free) ([]waitlist.Entry, error)
}

// WaitlistSubjects are the subjects of the events that wake waitlists
// (waitlist.WakingEvents) of every hotel.
func WaitlistSubjects() []string {
	out := make([]string, 0, len(waitlist.WakingEvents))
	for _, t := range waitlist.WakingEvents {
		out = append(out, events.Subject(string(berth.KindHotel), "*", t))
	}
	return out
}

// WaitlistHandler applies one freeing event to its waitlist: what came free
// goes to the first waiters as held offers (Offerer). An event of a hotel
// homed in another region is that region's to apply (its consumer gets the
// same event), so the fence's 421 — and a hotel unknown here — ack it.
func WaitlistHandler(o Offerer, log *slog.Logger) Handler {
	return func(ctx context.Context, m Message) error {
		if m.DecodeErr != nil {
			return m.DecodeErr
		}
		if m.Event.Kind != string(berth.KindHotel) {
			return nil
		}
		free, ok, err := waitlist.Freed(m.Event.Type, m.Event.Data)
		if err != nil || !ok {
			return err
		}
		offered, err := o.OfferFreed(ctx, m.Event.ID, free)
		switch berth.ErrorCode(err) {
		case berth.CodeMisdirected, berth.CodeNotFound:
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range offered {
			log.InfoContext(ctx, "waitlist offer", "hotel_id", e.HotelID, "entry_id", e.ID, "reservation_id", e.Offer.ReservationID,
				"event_id", m.Event.ID)
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
		WaitlistHandler(o, log))
}

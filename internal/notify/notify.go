package notify

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/view"
)

// ConsumerName is the durable consumer of notifications.
const ConsumerName = "notify"

// templates maps an event type (without its aggregate prefix) to the
// message it sends; other events send nothing.
var templates = map[string]string{
	"reservation.confirmed": "confirmation", "appointment.confirmed": "confirmation",
	"reservation.cancelled": "cancellation", "appointment.cancelled": "cancellation",
	"refund_requested": "refund",
	// The end of a visit: a missed one says what happens to a prepayment.
	"appointment.no_show": "no_show", "appointment.completed": "visit_completed",
	// The stay at the front desk and its walks (docs/adr/0012-walks.md).
	"reservation.checked_in": "checked_in", "reservation.no_show": "stay_no_show", "reservation.walked": "walked",
	"waitlist.offered": "offer", "clinic_waitlist.offered": "slot_offer",
}

// EventTypes are the event types that send a message, sorted. The notify
// consumer asks the broker for these alone: every other event (a hold, the
// most frequent) would be delivered, decoded and acked for nothing.
func EventTypes() []string {
	out := make([]string, 0, len(templates))
	for t := range templates {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Queue is the notification queue the notifier writes and drains
// (view.Notifications).
type Queue interface {
	Queue(ctx context.Context, guestID string, msgs []view.Notification) error
	Claim(ctx context.Context, limit int) ([]view.ClaimedNotification, error)
	Sent(ctx context.Context, key, channel string) error
	Retry(ctx context.Context, key, channel string, giveUp bool, lastErr string, delay time.Duration) error
	DueReminders(ctx context.Context, limit int) ([]view.Item, error)
}

// Notifier turns events into queued messages and sends them.
type Notifier struct {
	queue   Queue
	senders map[string]Sender // by channel
	log     *slog.Logger
	// MaxAttempts bounds sends of one message (6); Retry is the delay
	// after failed attempt n (capped exponential from 2s).
	MaxAttempts int
	Retry       func(n int) time.Duration
}

// New returns a notifier sending through senders (channel → sender; a
// channel without a sender is not used).
func New(queue Queue, senders map[string]Sender, log *slog.Logger) *Notifier {
	return &Notifier{queue: queue, senders: senders, log: log, MaxAttempts: 6,
		Retry: func(n int) time.Duration { return min(2*time.Second<<min(n-1, 12), 30*time.Minute) }}
}

// messagesFor composes the messages of an item on every channel it has a
// contact for and a sender exists.
func (n *Notifier) messagesFor(key, template string, it view.Item) []Message {
	subject, body := compose(template, it)
	var out []Message
	if it.ContactEmail != "" && n.senders[ChannelEmail] != nil {
		out = append(out, Message{Key: key, Channel: ChannelEmail, Template: template, To: it.ContactEmail, Subject: subject, Body: body})
	}
	if it.ContactPhone != "" && n.senders[ChannelSMS] != nil {
		out = append(out, Message{Key: key, Channel: ChannelSMS, Template: template, To: it.ContactPhone, Subject: subject, Body: body})
	}
	if it.ContactPushToken != "" && n.senders[ChannelPush] != nil {
		out = append(out, Message{Key: key, Channel: ChannelPush, Template: template, To: it.ContactPushToken, Subject: subject, Body: body})
	}
	return out
}

func compose(template string, it view.Item) (string, string) {
	what := "Your " + it.Title
	when := it.Start + " → " + it.End
	switch template {
	case "confirmation":
		return "Booking confirmed", fmt.Sprintf("%s is confirmed (%s).\nReference: %s", what, when, it.ID)
	case "cancellation":
		return "Booking cancelled", fmt.Sprintf("%s was cancelled (%s).\nReference: %s", what, when, it.ID)
	case "no_show":
		return "Missed appointment", fmt.Sprintf("%s (%s) was missed and is marked as a no-show; a prepayment is not refunded.\nReference: %s", what, when, it.ID)
	case "visit_completed":
		return "Thank you for your visit", fmt.Sprintf("%s (%s) is completed.\nReference: %s", what, when, it.ID)
	case "offer":
		return "A room came free for you", fmt.Sprintf("%s (%s) is held for you from the waitlist: pay and confirm it before the hold expires, or it passes to the next guest.\nReference: %s", what, when, it.ID)
	case "slot_offer":
		return "An appointment came free for you", fmt.Sprintf("%s (%s) is held for you from the waitlist: confirm it (paying first if the doctor asks for prepayment) before the hold expires, or it passes to the next patient.\nReference: %s", what, when, it.ID)
	case "refund":
		return "Refund on its way", fmt.Sprintf("We could not keep %s (%s); your payment is being refunded.\nReference: %s", what, when, it.ID)
	case "checked_in":
		return "Welcome: you are checked in", fmt.Sprintf("%s has begun (%s). Enjoy your stay.\nReference: %s", what, when, it.ID)
	case "stay_no_show":
		return "We missed you", fmt.Sprintf("You did not arrive for %s (%s). The first night is charged; the other nights were released.\nReference: %s",
			what, when, it.ID)
	case "walked":
		return "Your stay moved to a sister hotel", fmt.Sprintf("We had no room for %s (%s), so we booked you at a sister hotel "+
			"of our chain in the same city, at our cost. The new stay is in your bookings.\nReference: %s", what, when, it.ID)
	default:
		return "Reminder: your booking is coming up", fmt.Sprintf("%s starts soon (%s).\nReference: %s", what, when, it.ID)
	}
}

// Apply queues the messages of one event. The unique (message key,
// channel) row is the idempotency record: a redelivered event queues
// nothing new, so it is sent once.
func (n *Notifier) Apply(ctx context.Context, e events.Envelope) error {
	template, ok := templates[e.Type]
	if !ok {
		return nil
	}
	it, ok, err := view.FromEvent(e)
	if err != nil || !ok {
		return err
	}
	return n.enqueue(ctx, it.GuestID, n.messagesFor(e.ID, template, it))
}

func (n *Notifier) enqueue(ctx context.Context, guestID string, msgs []Message) error {
	rows := make([]view.Notification, len(msgs))
	for i, m := range msgs {
		rows[i] = view.Notification(m)
	}
	return n.queue.Queue(ctx, guestID, rows)
}

// Dispatch sends due messages, at most limit, and reports how many it sent.
func (n *Notifier) Dispatch(ctx context.Context, limit int) (int, error) {
	due, err := n.queue.Claim(ctx, limit)
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, c := range due {
		// The claim is committed: finish every claimed row's bookkeeping
		// even when ctx ends, or it would sit in 'sending' for ever.
		bctx := context.WithoutCancel(ctx)
		s := n.senders[c.Channel]
		var sendErr error
		if s == nil {
			sendErr = fmt.Errorf("no sender for channel %s", c.Channel)
		} else {
			sctx, cancel := context.WithTimeout(bctx, 30*time.Second)
			sendErr = s.Send(sctx, Message(c.Notification))
			cancel()
		}
		if sendErr == nil {
			sent++
			err = n.queue.Sent(bctx, c.Key, c.Channel)
		} else {
			giveUp, next := c.Attempts >= n.MaxAttempts, "pending"
			if giveUp {
				next = "failed"
			}
			n.log.Warn("notification failed", "key", c.Key, "channel", c.Channel, "attempt", c.Attempts, "next", next, "err", sendErr)
			err = n.queue.Retry(bctx, c.Key, c.Channel, giveUp, truncate(sendErr.Error(), 500), n.Retry(c.Attempts))
		}
		if err != nil {
			return sent, fmt.Errorf("record notification outcome: %w", err)
		}
	}
	return sent, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// ScanReminders queues reminders of confirmed bookings starting within the
// next 24 h: hotel stays the day before check-in (check-in day 00:00 UTC),
// appointments 24 h before. The key names the start, so a rescheduled
// appointment is reminded of its new time. It reports how many it queued.
func (n *Notifier) ScanReminders(ctx context.Context, limit int) (int, error) {
	items, err := n.queue.DueReminders(ctx, limit)
	if err != nil {
		return 0, err
	}
	queued := 0
	for _, it := range items {
		msgs := n.messagesFor("reminder:"+it.Kind+":"+it.ID+":"+it.Start, "reminder", it)
		if err := n.enqueue(ctx, it.GuestID, msgs); err != nil {
			return queued, err
		}
		queued += len(msgs)
	}
	return queued, nil
}

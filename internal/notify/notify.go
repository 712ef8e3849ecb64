package notify

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/readmodel"
	"github.com/jackc/pgx/v5"
)

// ConsumerName is the durable consumer of notifications.
const ConsumerName = "notify"

// templates maps an event type (without its aggregate prefix) to the
// message it sends; other events send nothing.
var templates = map[string]string{
	"reservation.confirmed": "confirmation", "appointment.confirmed": "confirmation",
	"reservation.cancelled": "cancellation", "appointment.cancelled": "cancellation",
	"refund_requested": "refund",
}

// Notifier turns events into queued messages and sends them.
type Notifier struct {
	db      *postgres.DB
	senders map[string]Sender // by channel
	log     *slog.Logger
	// MaxAttempts bounds sends of one message (6); Retry is the delay
	// after failed attempt n (capped exponential from 2s).
	MaxAttempts int
	Retry       func(n int) time.Duration
	now         func() time.Time
}

// New returns a notifier sending through senders (channel → sender; a
// channel without a sender is not used).
func New(db *postgres.DB, senders map[string]Sender, log *slog.Logger) *Notifier {
	return &Notifier{db: db, senders: senders, log: log, MaxAttempts: 6,
		Retry: func(n int) time.Duration { return min(2*time.Second<<min(n-1, 12), 30*time.Minute) },
		now:   time.Now}
}

// messagesFor composes the messages of an item on every channel it has a
// contact for and a sender exists.
func (n *Notifier) messagesFor(key, template string, it readmodel.Item) []Message {
	subject, body := compose(template, it)
	var out []Message
	if it.ContactEmail != "" && n.senders[ChannelEmail] != nil {
		out = append(out, Message{Key: key, Channel: ChannelEmail, Template: template, To: it.ContactEmail, Subject: subject, Body: body})
	}
	if it.ContactPhone != "" && n.senders[ChannelSMS] != nil {
		out = append(out, Message{Key: key, Channel: ChannelSMS, Template: template, To: it.ContactPhone, Subject: subject, Body: body})
	}
	return out
}

func compose(template string, it readmodel.Item) (string, string) {
	what := "Your " + it.Title
	when := it.Start + " → " + it.End
	switch template {
	case "confirmation":
		return "Booking confirmed", fmt.Sprintf("%s is confirmed (%s).\nReference: %s", what, when, it.ID)
	case "cancellation":
		return "Booking cancelled", fmt.Sprintf("%s was cancelled (%s).\nReference: %s", what, when, it.ID)
	case "refund":
		return "Refund on its way", fmt.Sprintf("We could not keep %s (%s); your payment is being refunded.\nReference: %s", what, when, it.ID)
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
	it, ok, err := readmodel.FromEvent(e)
	if err != nil || !ok {
		return err
	}
	return n.enqueue(ctx, it.GuestID, n.messagesFor(e.ID, template, it))
}

func (n *Notifier) enqueue(ctx context.Context, guestID string, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	return n.db.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, m := range msgs {
			b.Queue(`INSERT INTO notify_messages (message_key, channel, template, recipient, guest_id, subject, body, status)
				VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending') ON CONFLICT (message_key, channel) DO NOTHING`,
				m.Key, m.Channel, m.Template, m.To, guestID, m.Subject, m.Body)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("queue notifications: %w", err)
		}
		return nil
	})
}

// claimSQL moves due messages to 'sending' in one autocommitted statement:
// once it returns, no other dispatcher will send them — at most once.
const claimSQL = `
UPDATE notify_messages SET status = 'sending', attempts = attempts + 1
WHERE (message_key, channel) IN (
    SELECT message_key, channel FROM notify_messages
    WHERE status = 'pending' AND next_attempt_at <= now()
    ORDER BY next_attempt_at LIMIT $1
    FOR UPDATE SKIP LOCKED)
RETURNING message_key, channel, template, recipient, subject, body, attempts`

// Dispatch sends due messages, at most limit, and reports how many it sent.
func (n *Notifier) Dispatch(ctx context.Context, limit int) (int, error) {
	rows, err := n.db.Pool.Query(ctx, claimSQL, limit)
	if err != nil {
		return 0, fmt.Errorf("claim notifications: %w", err)
	}
	type claimed struct {
		Message
		attempts int32
	}
	var due []claimed
	for rows.Next() {
		var c claimed
		if err := rows.Scan(&c.Key, &c.Channel, &c.Template, &c.To, &c.Subject, &c.Body, &c.attempts); err != nil {
			rows.Close()
			return 0, fmt.Errorf("claim notifications: %w", err)
		}
		due = append(due, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("claim notifications: %w", err)
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
			sendErr = s.Send(sctx, c.Message)
			cancel()
		}
		if sendErr == nil {
			sent++
			_, err = n.db.Pool.Exec(bctx, `UPDATE notify_messages SET status = 'sent', sent_at = now(), last_error = NULL
				WHERE message_key = $1 AND channel = $2 AND status = 'sending'`, c.Key, c.Channel)
		} else {
			status := "pending"
			if int(c.attempts) >= n.MaxAttempts {
				status = "failed"
			}
			n.log.Warn("notification failed", "key", c.Key, "channel", c.Channel, "attempt", c.attempts, "next", status, "err", sendErr)
			_, err = n.db.Pool.Exec(bctx, `UPDATE notify_messages SET status = $3, last_error = $4,
				next_attempt_at = now() + $5 * INTERVAL '1 microsecond'
				WHERE message_key = $1 AND channel = $2 AND status = 'sending'`,
				c.Key, c.Channel, status, truncate(sendErr.Error(), 500), n.Retry(int(c.attempts)).Microseconds())
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
	rows, err := n.db.Pool.Query(ctx, `
		SELECT kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title,
		       COALESCE(contact_email, ''), COALESCE(contact_phone, '')
		FROM rm_reservations AS rm
		WHERE status = 'confirmed' AND sort_at > now() AND sort_at <= now() + INTERVAL '24 hours'
		  AND (contact_email IS NOT NULL OR contact_phone IS NOT NULL)
		  AND NOT EXISTS (SELECT 1 FROM notify_messages AS m
		      WHERE m.message_key = 'reminder:' || rm.kind || ':' || rm.id || ':' || rm.start_at)
		ORDER BY sort_at LIMIT $1`, limit)
	if err != nil {
		return 0, fmt.Errorf("scan reminders: %w", err)
	}
	var items []readmodel.Item
	for rows.Next() {
		var it readmodel.Item
		if err := rows.Scan(&it.Kind, &it.PartitionID, &it.ID, &it.GuestID, &it.Status, &it.Start, &it.End, &it.SortAt, &it.Title,
			&it.ContactEmail, &it.ContactPhone); err != nil {
			rows.Close()
			return 0, fmt.Errorf("scan reminders: %w", err)
		}
		items = append(items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("scan reminders: %w", err)
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

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/view"
	"github.com/jackc/pgx/v5"
)

// Notifications keeps the queue of guest notifications (notify_messages):
// one row per (message key, channel), claimed before it is sent.
type Notifications struct {
	db *DB
}

// NewNotifications returns the notification queue on db.
func NewNotifications(db *DB) *Notifications { return &Notifications{db: db} }

// Notification and ClaimedNotification are the queue's rows (package
// view holds the values, so the notifier never reaches the driver).
type (
	Notification        = view.Notification
	ClaimedNotification = view.ClaimedNotification
)

// Queue queues msgs for guestID in one transaction. The unique (message
// key, channel) row is the idempotency record: a message queued before is
// not queued again, so a redelivered event is sent once.
func (n *Notifications) Queue(ctx context.Context, guestID string, msgs []Notification) error {
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

// claimTimeout bounds a claim statement, which its caller cannot cancel.
const claimTimeout = 30 * time.Second

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

// Claim claims up to limit due messages. The claim is committed when it
// returns: the caller must record every claimed message's outcome (Sent or
// Retry), or it stays in 'sending'.
//
// The statement commits on the server as it ends, so a caller's context
// ending while it runs (a shutdown) could leave the client with an error
// and the server with rows claimed for no one. Once sent, the statement
// runs to its end under a context of its own (claimTimeout), and its rows
// are always returned; an ended context only keeps a claim from starting.
func (n *Notifications) Claim(ctx context.Context, limit int) ([]ClaimedNotification, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	rows, err := n.db.pool.Query(ctx, claimSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	defer rows.Close()
	var due []ClaimedNotification
	for rows.Next() {
		var (
			c        ClaimedNotification
			attempts int32
		)
		if err := rows.Scan(&c.Key, &c.Channel, &c.Template, &c.To, &c.Subject, &c.Body, &attempts); err != nil {
			return nil, fmt.Errorf("claim notifications: %w", err)
		}
		c.Attempts = int(attempts)
		due = append(due, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim notifications: %w", err)
	}
	return due, nil
}

// Sent records that a claimed message went out.
func (n *Notifications) Sent(ctx context.Context, key, channel string) error {
	_, err := n.db.pool.Exec(ctx, `UPDATE notify_messages SET status = 'sent', sent_at = now(), last_error = NULL
		WHERE message_key = $1 AND channel = $2 AND status = 'sending'`, key, channel)
	if err != nil {
		return fmt.Errorf("record notification sent: %w", err)
	}
	return nil
}

// Retry records that a claimed message failed: it is due again after
// delay, or, when giveUp, failed for good.
func (n *Notifications) Retry(ctx context.Context, key, channel string, giveUp bool, lastErr string, delay time.Duration) error {
	status := "pending"
	if giveUp {
		status = "failed"
	}
	_, err := n.db.pool.Exec(ctx, `UPDATE notify_messages SET status = $3, last_error = $4,
		next_attempt_at = now() + $5 * INTERVAL '1 microsecond'
		WHERE message_key = $1 AND channel = $2 AND status = 'sending'`,
		key, channel, status, lastErr, delay.Microseconds())
	if err != nil {
		return fmt.Errorf("record notification failure: %w", err)
	}
	return nil
}

// DueReminders lists up to limit confirmed bookings of the view starting
// within the next 24 h that have a contact and no reminder queued yet (a
// reminder's key is "reminder:<kind>:<id>:<start>", so a rescheduled
// appointment is reminded of its new time).
func (n *Notifications) DueReminders(ctx context.Context, limit int) ([]view.Item, error) {
	rows, err := n.db.pool.Query(ctx, `
		SELECT kind, partition_id, id, guest_id, status, start_at, end_at, sort_at, title,
		       COALESCE(contact_email, ''), COALESCE(contact_phone, ''), COALESCE(contact_push_token, '')
		FROM rm_reservations AS rm
		WHERE status = 'confirmed' AND sort_at > now() AND sort_at <= now() + INTERVAL '24 hours'
		  AND (contact_email IS NOT NULL OR contact_phone IS NOT NULL OR contact_push_token IS NOT NULL)
		  AND NOT EXISTS (SELECT 1 FROM notify_messages AS m
		      WHERE m.message_key = 'reminder:' || rm.kind || ':' || rm.id || ':' || rm.start_at)
		ORDER BY sort_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("scan reminders: %w", err)
	}
	defer rows.Close()
	var items []view.Item
	for rows.Next() {
		var it view.Item
		if err := rows.Scan(&it.Kind, &it.PartitionID, &it.ID, &it.GuestID, &it.Status, &it.Start, &it.End, &it.SortAt, &it.Title,
			&it.ContactEmail, &it.ContactPhone, &it.ContactPushToken); err != nil {
			return nil, fmt.Errorf("scan reminders: %w", err)
		}
		items = append(items, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("scan reminders: %w", err)
	}
	return items, nil
}

package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/reservation"
	"github.com/jackc/pgx/v5"
)

// ExpireHolds returns lapsed holds of partitions homed in this region to
// inventory, at most limit per call, and reports how many it expired.
//
// It is safe to run in every booking service at once: the batch is claimed
// with FOR UPDATE SKIP LOCKED (a confirm holding a reservation's lock is
// skipped, and the confirm wins), and each expiry is a state-conditional
// update, so a reservation confirmed meanwhile is never expired. The batch is
// sorted by (hotel, room type, check-in), which makes the nights it locks
// ascend within each room type — the hotel lock order (docs/adr/0003-lock-order.md).
func (s *Store) ExpireHolds(ctx context.Context, limit int) (int, error) {
	var (
		expired int
		freed   []string // hotels whose rooms came back
	)
	err := s.db.InTx(ctx, func(tx pgx.Tx) error {
		expired, freed = 0, freed[:0]
		rows, err := tx.Query(ctx,
			`SELECT `+reservationColumns+` FROM reservations
			 WHERE status = 'held' AND hold_expires_at < now() AND home_region = $1
			 ORDER BY hotel_id, room_type_id, check_in, reservation_id
			 LIMIT $2 FOR UPDATE SKIP LOCKED`, s.region, limit)
		if err != nil {
			return fmt.Errorf("claim lapsed holds: %w", err)
		}
		var lapsed []reservation.Reservation
		for rows.Next() {
			r, err := scanReservation(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("claim lapsed holds: %w", err)
			}
			lapsed = append(lapsed, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("claim lapsed holds: %w", err)
		}
		if len(lapsed) == 0 {
			return nil
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for i := range lapsed {
			r := &lapsed[i]
			counts, err := releaseStay(ctx, tx, *r)
			if err != nil {
				return err
			}
			r.Version++
			r.Status, r.UpdatedAt = reservation.StatusExpired, now
			// Conditional on the status we claimed: the batch fails loudly
			// below if anything else changed it.
			b.Queue(`UPDATE reservations SET status = 'expired', version = $3, updated_at = $4
				WHERE hotel_id = $1 AND reservation_id = $2 AND status = 'held'`, r.HotelID, r.ID, r.Version, now)
			if err := queueEvents(ctx, b, s.region, reservationInventoryEvent(reservation.EventExpired, *r, counts)); err != nil {
				return err
			}
			// An unconfirmed waitlist offer lapses; its expired event
			// wakes the waitlist, which offers the rooms to the next waiter.
			queueSettleOffer(b, *r)
		}
		// The guests' rows after every night (the lock order).
		if err := releaseGuestHolds(ctx, tx, lapsed); err != nil {
			return err
		}
		br := tx.SendBatch(ctx, b)
		for _, r := range lapsed {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return fmt.Errorf("expire hold: %w", err)
			}
			if tag.RowsAffected() != 1 {
				br.Close()
				return fmt.Errorf("expire hold: a claimed hold changed under its lock")
			}
			if _, err := br.Exec(); err != nil { // its outbox event
				br.Close()
				return fmt.Errorf("expire hold event: %w", err)
			}
			if r.WaitlistEntryID != "" {
				if _, err := br.Exec(); err != nil { // its entry
					br.Close()
					return fmt.Errorf("expire hold: lapse its waitlist entry: %w", err)
				}
			}
		}
		if err := br.Close(); err != nil {
			return fmt.Errorf("expire holds: %w", err)
		}
		expired = len(lapsed)
		for _, r := range lapsed {
			freed = append(freed, r.HotelID)
		}
		return nil
	})
	if err == nil {
		for _, h := range freed {
			s.ForgetSoldOut(h)
		}
	}
	return expired, classify(err)
}

// LoadDefaultNights keeps nights loaded a sale window ahead for every room
// type of this region's hotels that sets a default room count; existing
// nights are left alone. It returns how many nights it added.
func (s *Store) LoadDefaultNights(ctx context.Context, today reservation.Date) (int, error) {
	rows, err := s.db.pool.Query(ctx,
		`SELECT rt.hotel_id::TEXT, rt.room_type_id::TEXT, rt.default_total_rooms FROM room_types rt
		 WHERE rt.default_total_rooms IS NOT NULL AND rt.home_region = $1
		   AND NOT EXISTS (SELECT 1 FROM room_inventory i WHERE i.hotel_id = rt.hotel_id
		                   AND i.room_type_id = rt.room_type_id AND i.night = $2)`,
		s.region, today.AddDays(reservation.SaleWindowDays-1).Time())
	if err != nil {
		return 0, classify(fmt.Errorf("list room types to load: %w", err))
	}
	type todo struct {
		hotel, roomType string
		rooms           int32
	}
	var list []todo
	for rows.Next() {
		var t todo
		if err := rows.Scan(&t.hotel, &t.roomType, &t.rooms); err != nil {
			rows.Close()
			return 0, classify(err)
		}
		list = append(list, t)
	}
	rows.Close()
	total := 0
	for _, t := range list {
		n, err := s.SetInventory(ctx, t.hotel, t.roomType, today, today.AddDays(reservation.SaleWindowDays), int(t.rooms), true)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// Every runs f every interval until ctx ends, logging nothing itself: the
// caller decides what a failure means.
func Every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

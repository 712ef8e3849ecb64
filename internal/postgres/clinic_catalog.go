package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// ClinicStore is the store of the clinic partitions of one region. It
// shares the Store's database, fence and idempotency machinery and adds the
// clinic hold TTL (BERTH_SLOT_HOLD_TTL).
//
// Every clinic transaction takes its locks in the clinic lock order of
// docs/adr/0003-lock-order.md (placement row and key, guest days, slots,
// appointments), and treats what it read before a lock as a hint to check
// again once it holds it.
type ClinicStore struct {
	s       *Store
	holdTTL time.Duration
	// full: the windows found full a moment ago (clinic_full.go).
	full fullHints
	// flights: the holds of named slots in a transaction (clinic_full.go).
	flights slotFlights
	// offerTTL is how long a waitlist offer's hold waits (holdTTL unless
	// set: SetOfferTTL).
	offerTTL time.Duration
}

// SetReadHintTTL sets how long a window found full, or a slot found taken,
// makes the next holds of it ask a read first (1 s unless set; ADR 0011).
// The hint only chooses which way a hold asks the database, never its
// answer, so its length changes no decision; tests set it long so that
// what they prove does not depend on how fast the machine runs them. Call
// it while wiring, or before the holds it should govern.
func (c *ClinicStore) SetReadHintTTL(d time.Duration) {
	c.full.mu.Lock()
	defer c.full.mu.Unlock()
	c.full.ttl = d
}

// DefaultSlotHoldTTL is how long a clinic hold lasts unless configured.
const DefaultSlotHoldTTL = 5 * time.Minute

// NewClinicStore returns the clinic store over s with the given hold TTL
// (DefaultSlotHoldTTL when not positive).
func NewClinicStore(s *Store, holdTTL time.Duration) *ClinicStore {
	if holdTTL <= 0 {
		holdTTL = DefaultSlotHoldTTL
	}
	return &ClinicStore{s: s, holdTTL: holdTTL}
}

// Region returns the region the store writes for.
func (c *ClinicStore) Region() string { return c.s.region }

// CreateClinic inserts a clinic and its placement row in one transaction.
// Any region may create a partition: the new rows carry the requested home.
func (c *ClinicStore) CreateClinic(ctx context.Context, cl appointment.Clinic) (appointment.Clinic, error) {
	err := c.s.db.InTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO placements (kind, partition_id, home_region) VALUES ('clinic', $1, $2)`, cl.ID, cl.HomeRegion)
		b.Queue(`INSERT INTO clinics (clinic_id, home_region, name, timezone) VALUES ($1, $2, $3, $4) RETURNING created_at`,
			cl.ID, cl.HomeRegion, cl.Name, cl.Timezone)
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return fmt.Errorf("insert placement: %w", err)
		}
		if err := br.QueryRow().Scan(&cl.CreatedAt); err != nil {
			br.Close()
			return fmt.Errorf("insert clinic: %w", err)
		}
		return br.Close()
	})
	if sqlState(err) == "23505" {
		return cl, berth.Errorf(berth.CodeInvalidState, "clinic %s exists already", cl.ID)
	}
	cl.CreatedAt = cl.CreatedAt.UTC()
	return cl, classify(err)
}

// GetClinic reads a clinic.
func (c *ClinicStore) GetClinic(ctx context.Context, clinicID string) (appointment.Clinic, error) {
	var cl appointment.Clinic
	err := c.s.db.pool.QueryRow(ctx,
		`SELECT clinic_id::TEXT, home_region, name, timezone, created_at FROM clinics WHERE clinic_id = $1`,
		clinicID).Scan(&cl.ID, &cl.HomeRegion, &cl.Name, &cl.Timezone, &cl.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return cl, berth.Errorf(berth.CodeNotFound, "clinic %s not found", clinicID)
	}
	if err != nil {
		return cl, classify(fmt.Errorf("get clinic: %w", err))
	}
	cl.CreatedAt = cl.CreatedAt.UTC()
	return cl, nil
}

// locations caches time.LoadLocation, which reads the zone database from
// disk on every call: a window hold needs its clinic's zone every time.
var locations sync.Map // name → *time.Location

// location is time.LoadLocation, cached.
func location(name string) (*time.Location, error) {
	if l, ok := locations.Load(name); ok {
		return l.(*time.Location), nil
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", name, err)
	}
	locations.Store(name, l)
	return l, nil
}

// clinicLocation returns the time zone of a clinic (immutable, read outside
// any transaction).
func (c *ClinicStore) clinicLocation(ctx context.Context, clinicID string) (*time.Location, error) {
	cl, err := c.GetClinic(ctx, clinicID)
	if err != nil {
		return nil, err
	}
	loc, err := location(cl.Timezone)
	if err != nil {
		return nil, fmt.Errorf("clinic %s: %w", clinicID, err)
	}
	return loc, nil
}

// CreateDoctor adds a doctor to a clinic homed in this region.
func (c *ClinicStore) CreateDoctor(ctx context.Context, d appointment.Doctor) (appointment.Doctor, error) {
	weekly, err := json.Marshal(d.Weekly)
	if err != nil {
		return d, fmt.Errorf("encode template: %w", err)
	}
	_, err = c.s.write(ctx, berth.KindClinic, d.ClinicID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		b.Queue(`INSERT INTO doctors (clinic_id, doctor_id, home_region, name, slot_minutes, prepay_required, weekly, price_cents, currency)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULLIF($9, ''))`,
			d.ClinicID, d.ID, c.s.region, d.Name, d.SlotMinutes, d.PrepayRequired, weekly, d.PriceCents, d.Currency)
		return nil, nil
	})
	return d, err
}

// doctors lists a clinic's doctors, optionally only one.
func (c *ClinicStore) doctors(ctx context.Context, q querier, clinicID, doctorID string) ([]appointment.Doctor, error) {
	rows, err := q.Query(ctx,
		`SELECT doctor_id::TEXT, clinic_id::TEXT, name, slot_minutes, prepay_required, weekly, price_cents, COALESCE(currency, '') FROM doctors
		 WHERE clinic_id = $1 AND ($2 = '' OR doctor_id::TEXT = $2) ORDER BY name, doctor_id`, clinicID, doctorID)
	if err != nil {
		return nil, classify(fmt.Errorf("list doctors: %w", err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (appointment.Doctor, error) {
		var (
			d       appointment.Doctor
			minutes int32
			weekly  []byte
		)
		if err := row.Scan(&d.ID, &d.ClinicID, &d.Name, &minutes, &d.PrepayRequired, &weekly, &d.PriceCents, &d.Currency); err != nil {
			return d, err
		}
		d.SlotMinutes = int(minutes)
		return d, json.Unmarshal(weekly, &d.Weekly)
	})
	if err != nil {
		return nil, classify(fmt.Errorf("list doctors: %w", err))
	}
	return out, nil
}

// GetClinicDetail reads a clinic with its doctors.
func (c *ClinicStore) GetClinicDetail(ctx context.Context, clinicID string) (appointment.ClinicDetail, error) {
	cl, err := c.GetClinic(ctx, clinicID)
	if err != nil {
		return appointment.ClinicDetail{}, err
	}
	docs, err := c.doctors(ctx, c.s.db.pool, clinicID, "")
	if docs == nil {
		docs = []appointment.Doctor{}
	}
	return appointment.ClinicDetail{Clinic: cl, Doctors: docs}, err
}

// Materialize creates the slots of every doctor of a clinic for the local
// days [from, to). It is idempotent: a slot that exists (same doctor, same
// start) is left alone, so re-running creates nothing twice. It returns how
// many slots it created.
func (c *ClinicStore) Materialize(ctx context.Context, clinicID string, from, to appointment.Date) (int, error) {
	return c.materialize(ctx, clinicID, from, to, false)
}

func (c *ClinicStore) materialize(ctx context.Context, clinicID string, from, to appointment.Date, rolling bool) (int, error) {
	loc, err := c.clinicLocation(ctx, clinicID)
	if err != nil {
		return 0, err
	}
	docs, err := c.doctors(ctx, c.s.db.pool, clinicID, "")
	if err != nil {
		return 0, err
	}
	// Everything is computed, and every id generated, before the transaction.
	var (
		ids, doctorIDs []string
		starts, ends   []time.Time
		days           []time.Time
	)
	for _, d := range docs {
		for _, st := range appointment.Materialize(d.SlotMinutes, d.Weekly, loc, from, to) {
			ids = append(ids, uuid.NewString())
			doctorIDs = append(doctorIDs, d.ID)
			starts, ends, days = append(starts, st.Start), append(ends, st.End), append(days, st.LocalDate.Time())
		}
	}
	var created int
	_, err = c.s.write(ctx, berth.KindClinic, clinicID, nil, func(tx pgx.Tx, b *pgx.Batch) (any, error) {
		created = 0
		if len(ids) > 0 {
			tag, err := tx.Exec(ctx,
				`INSERT INTO slots (clinic_id, slot_id, home_region, doctor_id, starts_at, ends_at, local_date)
				 SELECT $1, u.id, $2, u.doctor_id, u.starts_at, u.ends_at, u.local_date
				 FROM unnest($3::UUID[], $4::UUID[], $5::TIMESTAMPTZ[], $6::TIMESTAMPTZ[], $7::DATE[])
				      AS u(id, doctor_id, starts_at, ends_at, local_date)
				 ON CONFLICT (clinic_id, doctor_id, starts_at) DO NOTHING`,
				clinicID, c.s.region, ids, doctorIDs, starts, ends, days)
			if err != nil {
				return nil, fmt.Errorf("insert slots: %w", err)
			}
			created = int(tag.RowsAffected())
		}
		if rolling {
			b.Queue(`UPDATE doctors SET materialized_through = $2
				WHERE clinic_id = $1 AND (materialized_through IS NULL OR materialized_through < $2)`, clinicID, to.Time())
		}
		return nil, nil
	})
	return created, err
}

// MaterializeRolling keeps every clinic homed in this region materialized
// for the local days [today, today + weeks) and returns how many slots it
// created. Clinics whose doctors are all materialized far enough are
// skipped; the rest are re-run idempotently.
func (c *ClinicStore) MaterializeRolling(ctx context.Context, now time.Time, weeks int) (int, error) {
	rows, err := c.s.db.pool.Query(ctx,
		`SELECT c.clinic_id::TEXT, c.timezone, min(COALESCE(d.materialized_through, DATE '0001-01-01'))
		 FROM clinics c JOIN doctors d ON d.clinic_id = c.clinic_id
		 WHERE c.home_region = $1 GROUP BY c.clinic_id, c.timezone`, c.s.region)
	if err != nil {
		return 0, classify(fmt.Errorf("list clinics to materialize: %w", err))
	}
	type due struct {
		id, tz  string
		through time.Time
	}
	todo, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (due, error) {
		var d due
		return d, row.Scan(&d.id, &d.tz, &d.through)
	})
	if err != nil {
		return 0, classify(fmt.Errorf("list clinics to materialize: %w", err))
	}
	total := 0
	var errs []error
	for _, d := range todo {
		loc, err := time.LoadLocation(d.tz)
		if err != nil {
			errs = append(errs, fmt.Errorf("clinic %s: %w", d.id, err))
			continue
		}
		today := appointment.DateOf(now.In(loc))
		end := today.AddDays(7 * weeks)
		if !appointment.DateOf(d.through).Before(end) {
			continue
		}
		n, err := c.materialize(ctx, d.id, today, end, true)
		total += n
		if err != nil && berth.ErrorCode(err) != berth.CodeMisdirected {
			errs = append(errs, fmt.Errorf("clinic %s: %w", d.id, err))
		}
	}
	return total, errors.Join(errs...)
}

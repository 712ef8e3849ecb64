package postgres_test

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/postgres"
)

// The takeable-slot rule is written twice: in Go (appointment.Takeable, for
// the answers) and in SQL (the store's conditional UPDATEs, in database
// time). Every status, lapsed or not, gets the same verdict from both.
func TestTakeableSQLIsAppointmentTakeable(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.New(t, postgres.Options{})
	q := `SELECT ` + postgres.TakeableSQLForTest + `
		FROM (SELECT $1::TEXT AS status, now() + $2 * INTERVAL '1 minute' AS hold_expires_at) AS s`
	for _, st := range []appointment.SlotStatus{appointment.SlotOpen, appointment.SlotHeld, appointment.SlotBooked, appointment.SlotBlocked} {
		for _, lapsed := range []bool{false, true} {
			offset := 1 // minutes from now to the hold's expiry
			if lapsed {
				offset = -1
			}
			var got bool
			if err := dbtest.SQL(db).QueryRow(context.Background(), q, string(st), offset).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := appointment.Takeable(st, lapsed); got != want {
				t.Errorf("slot %s, lapsed %v: SQL says takeable=%v, appointment.Takeable says %v", st, lapsed, got, want)
			}
		}
	}
}

// "Counts against one appointment per doctor per day" is written in Go
// (appointment.Status.Counts) and in SQL (the store's guest-day checks):
// every status, lapsed or not, gets the same verdict from both.
func TestCountsSQLIsAppointmentCounts(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.New(t, postgres.Options{})
	q := `SELECT ` + postgres.CountsSQLForTest + `
		FROM (SELECT $1::TEXT AS status, now() + $2 * INTERVAL '1 minute' AS hold_expires_at) AS a`
	for _, st := range []appointment.Status{appointment.StatusHeld, appointment.StatusConfirmed, appointment.StatusCancelled,
		appointment.StatusExpired, appointment.StatusNoShow, appointment.StatusArrived, appointment.StatusCompleted} {
		for _, lapsed := range []bool{false, true} {
			offset := 1
			if lapsed {
				offset = -1
			}
			var got bool
			if err := dbtest.SQL(db).QueryRow(context.Background(), q, string(st), offset).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := st.Counts(lapsed); got != want {
				t.Errorf("appointment %s, lapsed %v: SQL says counts=%v, Status.Counts says %v", st, lapsed, got, want)
			}
		}
	}
}

// "The slot names this appointment" is written in Go
// (appointment.Status.Occupies) and in the audit's SQL: every status gets
// the same verdict from both.
func TestOccupiesSQLIsAppointmentOccupies(t *testing.T) {
	t.Parallel()
	db, _ := dbtest.New(t, postgres.Options{})
	q := `SELECT ` + postgres.OccupiesSQLForTest + ` FROM (SELECT $1::TEXT AS status) AS a`
	for _, st := range []appointment.Status{appointment.StatusHeld, appointment.StatusConfirmed, appointment.StatusCancelled,
		appointment.StatusExpired, appointment.StatusNoShow, appointment.StatusArrived, appointment.StatusCompleted} {
		var got bool
		if err := dbtest.SQL(db).QueryRow(context.Background(), q, string(st)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := st.Occupies(); got != want {
			t.Errorf("appointment %s: SQL says occupies=%v, Status.Occupies says %v", st, got, want)
		}
	}
}

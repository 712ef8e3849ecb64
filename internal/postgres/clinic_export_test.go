package postgres

// TakeableSQLForTest is the store's takeable-slot condition over a row s
// with status and hold_expires_at.
const TakeableSQLForTest = takeableSQL

// CountsSQLForTest is the store's counting condition over an appointment
// row a with status and hold_expires_at.
const CountsSQLForTest = countsSQL

// OccupiesSQLForTest is the audit's condition over an appointment row a
// with status.
const OccupiesSQLForTest = occupiesSQL

// The per-guest counts of an appointment hold (guest_holds.go,
// clinic_appointments.go).
const (
	CountClinicGuestSQLForTest = countClinicGuestSQL
	LiveElsewhereSQLForTest    = liveElsewhereSQL
)

package postgres

// TakeableSQLForTest is the store's takeable-slot condition over a row s
// with status and hold_expires_at.
const TakeableSQLForTest = takeableSQL

-- +goose Up
-- The held offers, for the job that expires the lapsed ones (so they pass to
-- the next waiter): a partial index, empty unless somebody waits.
CREATE INDEX appointments_offer_idx ON appointments (hold_expires_at) WHERE waitlist_entry_id IS NOT NULL AND status = 'held';

-- +goose Down
DROP INDEX appointments_offer_idx;

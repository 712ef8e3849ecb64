-- The row lives in the home region of the partition the event paid for.
ALTER TABLE webhook_events ADD COLUMN IF NOT EXISTS crdb_region crdb_internal_region NOT VISIBLE NOT NULL AS (home_region::crdb_internal_region) STORED;

-- The row lives in its partition's home region; updating home_region moves it.
ALTER TABLE clinic_waitlist_queues ADD COLUMN IF NOT EXISTS crdb_region crdb_internal_region NOT VISIBLE NOT NULL AS (home_region::crdb_internal_region) STORED;

ALTER TABLE clinic_guests ADD COLUMN IF NOT EXISTS crdb_region crdb_internal_region NOT NULL AS (home_region::crdb_internal_region) STORED;

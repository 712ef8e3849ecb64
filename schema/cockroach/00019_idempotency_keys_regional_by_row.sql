ALTER TABLE idempotency_keys SET LOCALITY REGIONAL BY ROW AS crdb_region;

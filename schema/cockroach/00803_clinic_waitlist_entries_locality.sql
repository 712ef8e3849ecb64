ALTER TABLE clinic_waitlist_entries SET LOCALITY REGIONAL BY ROW AS crdb_region;

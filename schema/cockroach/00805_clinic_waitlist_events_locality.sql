ALTER TABLE clinic_waitlist_events SET LOCALITY REGIONAL BY ROW AS crdb_region;

ALTER TABLE waitlist_events SET LOCALITY REGIONAL BY ROW AS crdb_region;

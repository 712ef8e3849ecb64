ALTER TABLE clinic_waitlist_queues SET LOCALITY REGIONAL BY ROW AS crdb_region;

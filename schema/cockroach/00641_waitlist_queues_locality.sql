ALTER TABLE waitlist_queues SET LOCALITY REGIONAL BY ROW AS crdb_region;

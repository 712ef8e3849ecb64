ALTER TABLE webhook_events SET LOCALITY REGIONAL BY ROW AS crdb_region;

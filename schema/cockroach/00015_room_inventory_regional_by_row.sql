ALTER TABLE room_inventory SET LOCALITY REGIONAL BY ROW AS crdb_region;

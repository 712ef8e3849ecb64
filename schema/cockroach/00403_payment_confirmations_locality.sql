ALTER TABLE payment_confirmations SET LOCALITY REGIONAL BY ROW AS crdb_region;

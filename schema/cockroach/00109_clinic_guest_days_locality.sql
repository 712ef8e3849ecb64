ALTER TABLE clinic_guest_days SET LOCALITY REGIONAL BY ROW AS crdb_region;

-- The placement directory is read by every write in every region: GLOBAL
-- tables serve consistent, non-blocking reads from every region.
ALTER TABLE placements SET LOCALITY GLOBAL;

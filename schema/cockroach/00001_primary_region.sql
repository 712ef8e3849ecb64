-- Database regions must exist before any table can be REGIONAL BY ROW.
ALTER DATABASE {{database}} SET PRIMARY REGION "us-east";

-- Berth runs writes at READ COMMITTED by default (docs/adr/0002-isolation.md):
-- the conditional UPDATE re-evaluates after a lock wait, so the last room
-- costs no retry storm. CockroachDB needs this cluster setting for it;
-- without it, READ COMMITTED is silently upgraded to SERIALIZABLE.
SET CLUSTER SETTING sql.txn.read_committed_isolation.enabled = true;

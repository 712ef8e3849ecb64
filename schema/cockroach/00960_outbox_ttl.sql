-- Sent outbox rows expire 72 h after they were sent (the relay's default
-- retention) by CockroachDB's row-level TTL: the job deletes in small
-- batches beside the workload, and unsent rows (sent_at NULL, so a NULL
-- expiration) never expire. The relay's own prune (Store.PruneOutbox) keeps
-- working too; it has no BRIN index here (PostgreSQL's 00960) and finds
-- little left to delete.
ALTER TABLE outbox SET (ttl_expiration_expression = 'sent_at + INTERVAL ''72 hours''', ttl_job_cron = '@hourly');

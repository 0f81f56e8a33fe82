-- What idempotency needs to never run a mutation twice. `ran_at` is set inside the very
-- transaction of each write the request makes, so that a key whose request wrote anything is
-- never taken over by a retry, even when the server stopped before its answer was kept.
-- `reads` holds the reads of patient data the answer carries, recorded again in the audit log
-- whenever it is replayed.
ALTER TABLE idempotency_keys ADD COLUMN ran_at INTEGER;
ALTER TABLE idempotency_keys ADD COLUMN reads TEXT;

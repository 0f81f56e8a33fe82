-- no-transaction
-- The GIN index of each read's patients (migration 0026), built without holding the writes
-- of the audit log (and so every read of patient data) for as long as it takes to read the
-- whole table: CONCURRENTLY, outside a transaction, so alone in this file. IF NOT EXISTS: a
-- server that died after the build and before the migration was recorded goes on.
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_reads_patients ON audit_reads USING gin (patients) WITH (fastupdate = on) WHERE patients IS NOT NULL

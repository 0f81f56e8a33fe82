-- The GIN index of each read's patients (migration 0026), in a migration of its own so that
-- the table's exclusive lock of the new column is let go before the build, which lets the
-- log be read meanwhile (its inserts, and so the reads of patient data, wait). It reads the
-- whole table but indexes none of the rows from before (their list is NULL): 0.5 s for
-- 2,000,000 reads (460 MB) in PostgreSQL 15's cache. Not CONCURRENTLY: servers starting
-- together wait for the migrator's advisory lock inside a statement, whose snapshot such a
-- build waits for in turn (PostgreSQL found the deadlock and failed the build, leaving an
-- invalid index behind).
CREATE INDEX audit_reads_patients ON audit_reads USING gin (patients) WITH (fastupdate = on)
    WHERE patients IS NOT NULL;

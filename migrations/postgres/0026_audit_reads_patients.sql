-- Who read each patient, in the row of the read itself: each row of audit_reads written from
-- here on lists the patients its reads reached, and a GIN index of that list finds a
-- patient's reads. An entry of audit_read_patients per patient read was a row and an entry
-- of a b-tree keyed by patient, each landing at a random place of its table (a page written
-- to the WAL, whole after each checkpoint); GIN's list of pending entries takes a row's
-- patients in one append, and moves them into the index proper in bulk, behind the reads
-- (src/store/audit.rs `index_reads` cleans the list every second; an insert does it itself
-- once the list passes gin_pending_list_limit). Rows from before this migration keep their
-- entries in audit_read_patients, which are still read; their list is NULL, and the index
-- leaves them out.
ALTER TABLE audit_reads ADD COLUMN patients TEXT[];
CREATE INDEX audit_reads_patients ON audit_reads USING gin (patients) WITH (fastupdate = on)
    WHERE patients IS NOT NULL;

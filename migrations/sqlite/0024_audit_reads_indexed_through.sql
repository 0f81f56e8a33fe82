-- The reads whose patients are not in audit_read_patients yet are now those of audit_reads
-- past a mark, rather than rows of a table of their own: recording a request's reads wrote
-- two b-trees' pages more (audit_reads_unindexed, its row and its key) in every commit, and
-- took a transaction of two statements where one now does. The task that indexes them
-- (src/store/audit.rs, Store::index_reads) moves the mark in the transaction that indexes
-- them. audit_reads' rows are never deleted and only appended, by SQLite's one writer, so
-- their row ids grow in the order they were committed.
INSERT OR IGNORE INTO audit_read_patients (practice_id, patient_id, read_id)
SELECT DISTINCT r.practice_id, e.value ->> 3, r.id
FROM audit_reads_unindexed u
JOIN audit_reads r ON r.practice_id = u.practice_id AND r.id = u.read_id
CROSS JOIN json_each(r.reads) AS e
WHERE e.value ->> 3 IS NOT NULL;
DROP TABLE audit_reads_unindexed;

-- One row: the row id of audit_reads up to which every read's patients are indexed.
CREATE TABLE audit_reads_indexed (
    one      INTEGER PRIMARY KEY CHECK (one = 1),
    through  INTEGER NOT NULL
);
INSERT INTO audit_reads_indexed (one, through)
SELECT 1, COALESCE(MAX(rowid), 0) FROM audit_reads;

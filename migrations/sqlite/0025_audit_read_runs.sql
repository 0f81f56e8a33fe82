-- Who read each patient, indexed so that a second's new entries land together. In
-- audit_read_patients (patient first), each patient read in the last second took an entry at
-- the end of that patient's own range: a page of the file rewritten (in the log, then again at
-- the checkpoint) for each patient, however few entries it got. Each run of the index
-- (src/store/audit.rs, Store::index_reads) now writes its entries under a number of its own,
-- after every entry before it (audit_read_runs), and notes once in each span of 64 runs that a
-- patient has entries there (audit_read_buckets: "patient P was read in runs 64b - s to
-- 64b - s + 63", s the patient's own offset, so that patients start their spans in different
-- runs); a patient read again in the same span changes no page. Once the span's last run is
-- indexed, its note says which of its runs read the patient (`runs`, a bit a run), found
-- through audit_read_buckets_open, the spans not yet closed, by their last run. "Who read this
-- patient" looks up the patient's spans, then their runs. audit_read_patients keeps the
-- entries made before this, and is read as it was; it is written no more on SQLite.
-- PostgreSQL, whose log records rows rather than pages, indexes each read in
-- audit_read_patients as it records it.
CREATE TABLE audit_read_runs (
    run          INTEGER NOT NULL,
    practice_id  TEXT    NOT NULL,
    patient_id   TEXT    NOT NULL,
    read_id      TEXT    NOT NULL,
    PRIMARY KEY (run, practice_id, patient_id, read_id)
) WITHOUT ROWID;
CREATE TABLE audit_read_buckets (
    practice_id  TEXT    NOT NULL,
    patient_id   TEXT    NOT NULL,
    bucket       INTEGER NOT NULL,
    -- The span's last run: 64 * bucket - s + 63.
    ends         INTEGER NOT NULL,
    -- Bit i: run 64 * bucket - s + i read the patient; low and high, the first and the last
    -- such i. NULL while the span is open.
    runs         INTEGER,
    low          INTEGER,
    high         INTEGER,
    PRIMARY KEY (practice_id, patient_id, bucket)
) WITHOUT ROWID;
-- The spans still open, by their last run: an entry each until its note is written.
CREATE INDEX audit_read_buckets_open ON audit_read_buckets (ends) WHERE runs IS NULL;
-- The numbers 0 to 63, a span's runs from its first: a lookup goes through those from a
-- closed span's low to its high alone (by this table's key), not all 64.
CREATE TABLE audit_read_span_runs (i INTEGER PRIMARY KEY);
WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 63)
INSERT INTO audit_read_span_runs (i) SELECT i FROM k;
-- The number of the last run.
ALTER TABLE audit_reads_indexed ADD COLUMN runs INTEGER NOT NULL DEFAULT 0;

-- The reads whose patients are not in audit_read_patients yet. A request's reads used to add
-- an entry per patient reached to audit_read_patients, each at a random place in its b-tree,
-- and SQLite's commit writes every page it changed (a page of 100 patients: some 100 pages of
-- the file, before the response could leave). A request now adds one row here, at the end of
-- this b-tree, and a background task moves many requests' patients at a time into
-- audit_read_patients, in its order; "who read this patient" looks in both
-- (src/store/audit.rs). PostgreSQL, whose log records rows rather than pages, indexes each
-- read as it records it and has no such table.
CREATE TABLE audit_reads_unindexed (
    practice_id  TEXT NOT NULL,
    read_id      TEXT NOT NULL,
    PRIMARY KEY (practice_id, read_id)
) WITHOUT ROWID;

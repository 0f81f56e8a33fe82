-- Reads of patient data, one row per request (and practice) rather than one per record read:
-- a page of 100 bookings wrote 200 rows of the audit log, each in five b-trees; it now writes
-- one row, in three that grow at their end, and an entry per patient read. The earlier
-- reads stay in audit_events; the log lists both (src/store/audit.rs).
CREATE TABLE audit_reads (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    actor_type   TEXT    NOT NULL,
    actor_id     TEXT    NOT NULL,
    actor_name   TEXT,
    -- A JSON array of [operation, resource_type, resource_id, patient_id], a record read each.
    reads        TEXT    NOT NULL,
    PRIMARY KEY (practice_id, id)
);
CREATE INDEX audit_reads_by_time ON audit_reads (practice_id, at, id);
CREATE INDEX audit_reads_by_actor ON audit_reads (practice_id, actor_id, at, id);
-- Who looked at this patient: the reads (audit_reads.id) that handed out their data.
CREATE TABLE audit_read_patients (
    practice_id  TEXT    NOT NULL,
    patient_id   TEXT    NOT NULL,
    read_id      TEXT    NOT NULL,
    PRIMARY KEY (practice_id, patient_id, read_id)
) WITHOUT ROWID;

-- The audit log: every read of patient data and every write, with who did it and when. Rows are
-- only ever added. `patient_id` and `resource_id` name records that may since have been deleted,
-- so they carry no foreign key; the actor is kept by id and by name as it was at the time.
CREATE TABLE audit_events (
    practice_id    TEXT    NOT NULL REFERENCES practices (id),
    id             TEXT    NOT NULL,
    at             BIGINT  NOT NULL,
    actor_type     TEXT    NOT NULL,  -- 'user', 'token' or 'operator' (the command line)
    actor_id       TEXT    NOT NULL,
    actor_name     TEXT,
    action         TEXT    NOT NULL,  -- 'read', 'create', 'update', 'delete', 'sign_in', ...
    operation      TEXT,              -- the root field: 'patient', 'addPatientLabel', ...
    resource_type  TEXT,
    resource_id    TEXT,
    patient_id     TEXT,
    PRIMARY KEY (practice_id, id)
);
-- The three questions the log answers, newest first: what happened, to this patient, by this
-- actor. Ids are UUIDv7, so (at, id) is a stable order.
CREATE INDEX audit_events_by_time ON audit_events (practice_id, at, id);
CREATE INDEX audit_events_by_patient ON audit_events (practice_id, patient_id, at, id);
CREATE INDEX audit_events_by_actor ON audit_events (practice_id, actor_id, at, id);

-- Bookings, and the practice's locations and appointment types they refer to (PostgreSQL).

CREATE TABLE locations (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    name         TEXT COLLATE "C" NOT NULL,
    address      TEXT,
    city         TEXT,
    postcode     TEXT,
    country      TEXT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id)
);
CREATE UNIQUE INDEX locations_by_name ON locations (practice_id, name);

-- What a booking is for ("Initial consultation", 45 minutes, 80.00).
CREATE TABLE appointment_types (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    title        TEXT COLLATE "C" NOT NULL,
    duration     BIGINT NOT NULL CHECK (duration > 0),  -- minutes
    price        DOUBLE PRECISION,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id)
);
CREATE UNIQUE INDEX appointment_types_by_title ON appointment_types (practice_id, title);

CREATE TABLE bookings (
    practice_id          TEXT    NOT NULL,
    id                   TEXT    NOT NULL,
    patient_id           TEXT    NOT NULL,
    doctor_id            TEXT    NOT NULL,
    location_id          TEXT,
    appointment_type_id  TEXT,
    start_at             BIGINT NOT NULL,
    end_at               BIGINT NOT NULL,
    comments             TEXT,
    cancelled_at         BIGINT,
    cancellation_reason  TEXT,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id),
    CHECK (end_at > start_at),
    FOREIGN KEY (practice_id, patient_id) REFERENCES patients (practice_id, id),
    FOREIGN KEY (practice_id, doctor_id) REFERENCES users (practice_id, id),
    FOREIGN KEY (practice_id, location_id) REFERENCES locations (practice_id, id),
    FOREIGN KEY (practice_id, appointment_type_id) REFERENCES appointment_types (practice_id, id)
);
CREATE INDEX bookings_by_start ON bookings (practice_id, start_at);
CREATE INDEX bookings_by_end ON bookings (practice_id, end_at);
CREATE INDEX bookings_by_doctor ON bookings (practice_id, doctor_id, start_at);
CREATE INDEX bookings_by_patient ON bookings (practice_id, patient_id, start_at);

-- No two active bookings of one doctor overlap (back to back is fine: ranges are half-open).
-- The database enforces it, across every instance that shares it; the store recognises the
-- constraint's name in the error.
CREATE EXTENSION IF NOT EXISTS btree_gist;
ALTER TABLE bookings ADD CONSTRAINT bookings_no_overlap EXCLUDE USING gist (
    practice_id WITH =,
    doctor_id WITH =,
    int8range(start_at, end_at) WITH &&
) WHERE (cancelled_at IS NULL);

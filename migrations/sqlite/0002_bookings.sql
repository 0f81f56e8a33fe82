-- Bookings, and the practice's locations and appointment types they refer to.

CREATE TABLE locations (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    address      TEXT,
    city         TEXT,
    postcode     TEXT,
    country      TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (practice_id, id)
);
CREATE UNIQUE INDEX locations_by_name ON locations (practice_id, name);

-- What a booking is for ("Initial consultation", 45 minutes, 80.00).
CREATE TABLE appointment_types (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    title        TEXT    NOT NULL,
    duration     INTEGER NOT NULL CHECK (duration > 0),  -- minutes
    price        REAL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
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
    start_at             INTEGER NOT NULL,
    end_at               INTEGER NOT NULL,
    comments             TEXT,
    cancelled_at         INTEGER,
    cancellation_reason  TEXT,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL,
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

-- No two active bookings of one doctor overlap (back to back is fine). The database enforces
-- it, so that it holds whatever writes the bookings and however many write at once; the store
-- recognises the name bookings_no_overlap in the error.
CREATE TRIGGER bookings_no_overlap_insert BEFORE INSERT ON bookings
WHEN NEW.cancelled_at IS NULL AND EXISTS (
    SELECT 1 FROM bookings b
    WHERE b.practice_id = NEW.practice_id AND b.doctor_id = NEW.doctor_id
      AND b.cancelled_at IS NULL AND b.start_at < NEW.end_at AND NEW.start_at < b.end_at
)
BEGIN
    SELECT RAISE(ABORT, 'bookings_no_overlap');
END;

CREATE TRIGGER bookings_no_overlap_update BEFORE UPDATE OF doctor_id, start_at, end_at, cancelled_at ON bookings
WHEN NEW.cancelled_at IS NULL AND EXISTS (
    SELECT 1 FROM bookings b
    WHERE b.practice_id = NEW.practice_id AND b.doctor_id = NEW.doctor_id AND b.id <> NEW.id
      AND b.cancelled_at IS NULL AND b.start_at < NEW.end_at AND NEW.start_at < b.end_at
)
BEGIN
    SELECT RAISE(ABORT, 'bookings_no_overlap');
END;

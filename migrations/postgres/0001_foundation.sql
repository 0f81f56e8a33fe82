-- The foundation: practices, staff, tokens, patients and labels (PostgreSQL; the same tables
-- as migrations/sqlite, column for column, so that one set of SQL in the store serves both).
-- Columns that lists sort by are COLLATE "C": byte order, as SQLite sorts, so that a page
-- holds the same rows on either engine.
--
-- Every table but `practices` belongs to one practice, and `practice_id` leads every primary key,
-- foreign key and index, so that each query is scoped to one practice by the key itself and the
-- data can later be distributed by practice. IDs are opaque text (UUIDv7); times are BIGINT
-- milliseconds since the Unix epoch, in UTC, so that they compare and sort the same way on every
-- engine; dates of birth are ISO 8601 text (YYYY-MM-DD).

CREATE TABLE practices (
    id          TEXT    NOT NULL PRIMARY KEY,
    name        TEXT    NOT NULL,
    is_default  BIGINT NOT NULL DEFAULT 0,
    created_at  BIGINT NOT NULL
);
-- At most one default practice: the one a single clinic uses without ever naming it.
CREATE UNIQUE INDEX practices_one_default ON practices (is_default) WHERE is_default = 1;

CREATE TABLE users (
    practice_id    TEXT    NOT NULL REFERENCES practices (id),
    id             TEXT    NOT NULL,
    email          TEXT    NOT NULL,  -- stored lower-cased
    password_hash  TEXT    NOT NULL,  -- Argon2id, PHC string
    title          TEXT,
    first_name     TEXT COLLATE "C" NOT NULL,
    last_name      TEXT COLLATE "C" NOT NULL,
    role           TEXT    NOT NULL,
    is_doctor      BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id)
);
-- signIn takes no practice, so a staff email is unique across practices. This is the one
-- lookup that is not led by practice_id: it finds the practice.
CREATE UNIQUE INDEX users_email ON users (email);
CREATE INDEX users_by_name ON users (practice_id, last_name, first_name, id);

-- API tokens (kind 'api') and the tokens signIn hands out (kind 'user'). Only a SHA-256 hash of
-- the secret is kept; the secret names its practice, so the lookup is led by practice_id too.
CREATE TABLE tokens (
    practice_id   TEXT    NOT NULL REFERENCES practices (id),
    id            TEXT    NOT NULL,
    kind          TEXT    NOT NULL CHECK (kind IN ('api', 'user')),
    name          TEXT    NOT NULL,
    secret_hash   TEXT    NOT NULL,
    permissions   TEXT    NOT NULL,  -- space-separated; empty for user tokens (the role decides)
    user_id       TEXT,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT,
    expires_at    BIGINT,
    revoked_at    BIGINT,
    PRIMARY KEY (practice_id, id),
    FOREIGN KEY (practice_id, user_id) REFERENCES users (practice_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX tokens_by_secret ON tokens (practice_id, secret_hash);
CREATE INDEX tokens_by_kind ON tokens (practice_id, kind, created_at);

CREATE TABLE patients (
    practice_id       TEXT    NOT NULL REFERENCES practices (id),
    id                TEXT    NOT NULL,
    title             TEXT,
    first_name        TEXT COLLATE "C" NOT NULL,
    last_name         TEXT COLLATE "C" NOT NULL,
    email             TEXT,
    dob               TEXT,
    gender            TEXT,
    sex               TEXT,
    address           TEXT,
    city              TEXT,
    postcode          TEXT,
    country           TEXT,
    phone_type        TEXT,
    phone_number      TEXT,
    comments          TEXT,
    -- Lower-cased "first last email dob", what patients(search:) matches against.
    search_text       TEXT    NOT NULL,
    archived_at       BIGINT,
    archive_reason    TEXT,
    archive_comments  TEXT,
    deleted_at        BIGINT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id)
);
CREATE INDEX patients_by_name ON patients (practice_id, last_name, first_name, id);

CREATE TABLE labels (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    title        TEXT COLLATE "C" NOT NULL,
    color        TEXT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id)
);
-- Two labels of one practice never share a title.
CREATE UNIQUE INDEX labels_by_title ON labels (practice_id, title);

-- A label on a patient. Deleting the label takes it off every patient.
CREATE TABLE patient_labels (
    practice_id  TEXT    NOT NULL,
    id           TEXT    NOT NULL,
    patient_id   TEXT    NOT NULL,
    label_id     TEXT    NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id),
    FOREIGN KEY (practice_id, patient_id) REFERENCES patients (practice_id, id) ON DELETE CASCADE,
    FOREIGN KEY (practice_id, label_id) REFERENCES labels (practice_id, id) ON DELETE CASCADE
);
-- A label is on a patient once at most.
CREATE UNIQUE INDEX patient_labels_once ON patient_labels (practice_id, patient_id, label_id);
CREATE INDEX patient_labels_by_label ON patient_labels (practice_id, label_id);

-- The rest of a patient's record (issue 15), and the practice's access groups and number
-- definitions that it names. Scalars are columns; the lists a patient holds (phones, numbers
-- against the practice's definitions, custom attributes, relationships, access groups) are
-- JSON arrays on the patient's row, each entry with an id of its own, so that reading a
-- patient stays one statement. An existing patient's phone becomes the first entry of its
-- list.
ALTER TABLE patients ADD COLUMN birth_surname TEXT;
ALTER TABLE patients ADD COLUMN birth_name TEXT;
ALTER TABLE patients ADD COLUMN birth_names TEXT;
ALTER TABLE patients ADD COLUMN place_of_birth_name TEXT;
ALTER TABLE patients ADD COLUMN place_of_birth_code TEXT;
ALTER TABLE patients ADD COLUMN social_security_number TEXT;
ALTER TABLE patients ADD COLUMN google_client_id TEXT;
ALTER TABLE patients ADD COLUMN payment_reference TEXT;
ALTER TABLE patients ADD COLUMN occupation TEXT;
ALTER TABLE patients ADD COLUMN membership_name TEXT;
ALTER TABLE patients ADD COLUMN membership_start_date TEXT;
ALTER TABLE patients ADD COLUMN on_hold BIGINT NOT NULL DEFAULT 0;
-- JSON objects: the INS (France's national health identity) and communication preferences.
ALTER TABLE patients ADD COLUMN ins TEXT;
ALTER TABLE patients ADD COLUMN communication TEXT;
ALTER TABLE patients ADD COLUMN phones TEXT NOT NULL DEFAULT '[]';
ALTER TABLE patients ADD COLUMN numbers TEXT NOT NULL DEFAULT '[]';
ALTER TABLE patients ADD COLUMN attributes TEXT NOT NULL DEFAULT '[]';
ALTER TABLE patients ADD COLUMN relationships TEXT NOT NULL DEFAULT '[]';
ALTER TABLE patients ADD COLUMN access_groups TEXT NOT NULL DEFAULT '[]';
ALTER TABLE patients ADD COLUMN archived_by TEXT;
ALTER TABLE patients ADD COLUMN unarchived_at BIGINT;
ALTER TABLE patients ADD COLUMN unarchived_by TEXT;
ALTER TABLE patients ADD COLUMN unarchive_reason TEXT;
UPDATE patients SET phones = json_build_array(json_build_object(
    'id', id || '.1', 'type', phone_type, 'number', phone_number))::text
WHERE phone_number IS NOT NULL;

-- The access groups a staff user belongs to: a JSON array of access group ids.
ALTER TABLE users ADD COLUMN access_groups TEXT NOT NULL DEFAULT '[]';

CREATE TABLE access_groups (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    label        TEXT    NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id)
);
CREATE UNIQUE INDEX access_groups_by_name ON access_groups (practice_id, name);

-- The numbers a practice records of its patients ("NHS number", "Insurance number").
CREATE TABLE practice_numbers (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    is_primary   BIGINT NOT NULL DEFAULT 0,
    deleted_at   BIGINT,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (practice_id, id)
);
CREATE UNIQUE INDEX practice_numbers_by_name ON practice_numbers (practice_id, name);

-- A user's access groups decide which patients they see: a change to them is a change to
-- who may call (migration 0012), so the instances' token caches hear of it.
DROP TRIGGER users_notify ON users;
CREATE TRIGGER users_notify
    AFTER UPDATE OF practice_id, id, email, password_hash, title, first_name, last_name, role,
        is_doctor, disabled_at, access_groups OR DELETE
    ON users FOR EACH ROW EXECUTE FUNCTION credentials_notify();
ALTER TABLE users ENABLE ALWAYS TRIGGER users_notify;

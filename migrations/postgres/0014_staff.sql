-- Staff management (issue 16): a user can be disabled, has a last sign-in, and carries the
-- profile fields clients read; a practice has a time zone. One-time links set a password
-- (after createUser or resetUserPassword) or make a practice's first admin; only a hash of
-- each link's secret is stored, as for tokens.
ALTER TABLE users ADD COLUMN disabled_at BIGINT;
ALTER TABLE users ADD COLUMN last_sign_in_at BIGINT;
ALTER TABLE users ADD COLUMN gender TEXT;
ALTER TABLE users ADD COLUMN qualifications TEXT;
ALTER TABLE users ADD COLUMN registration TEXT;
-- A JSON array of strings.
ALTER TABLE users ADD COLUMN medical_specialties TEXT;
ALTER TABLE users ADD COLUMN position_title TEXT;
ALTER TABLE users ADD COLUMN minimum_treatment_age BIGINT;
ALTER TABLE practices ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC';

CREATE TABLE user_links (
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    id           TEXT    NOT NULL,
    purpose      TEXT    NOT NULL CHECK (purpose IN ('set_password', 'first_admin')),
    user_id      TEXT,
    secret_hash  TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    expires_at   BIGINT  NOT NULL,
    used_at      BIGINT,
    PRIMARY KEY (practice_id, id),
    FOREIGN KEY (practice_id, user_id) REFERENCES users (practice_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX user_links_by_secret ON user_links (practice_id, secret_hash);
CREATE INDEX user_links_by_user ON user_links (practice_id, user_id);

-- A sign-in is not a change to who may call: recording its time must not make every
-- instance forget its cached tokens (migration 0012). Every other column still notifies.
DROP TRIGGER users_notify ON users;
CREATE TRIGGER users_notify
    AFTER UPDATE OF practice_id, id, email, password_hash, title, first_name, last_name, role,
        is_doctor, disabled_at OR DELETE
    ON users FOR EACH ROW EXECUTE FUNCTION credentials_notify();
ALTER TABLE users ENABLE ALWAYS TRIGGER users_notify;

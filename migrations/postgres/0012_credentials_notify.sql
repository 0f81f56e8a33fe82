-- Tells every instance that a token or a staff user changed, so that each one's cache of who
-- may call (src/auth/cache.rs) forgets what it holds. Row triggers, so that a statement that
-- changes nothing (the hourly sweep of ended sessions, most hours) sends nothing; PostgreSQL
-- folds the same notification within a transaction into one, sent at its commit. A token's
-- last use is not a change. ENABLE ALWAYS: they fire under session_replication_role =
-- replica too (logical replication's apply, some restores).
CREATE FUNCTION credentials_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('practice_credentials', '');
    RETURN NULL;
END $$;
CREATE TRIGGER tokens_notify
    AFTER UPDATE OF practice_id, id, kind, name, secret_hash, permissions, user_id, expires_at,
        revoked_at OR DELETE
    ON tokens FOR EACH ROW EXECUTE FUNCTION credentials_notify();
CREATE TRIGGER tokens_truncate_notify AFTER TRUNCATE ON tokens
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_notify();
CREATE TRIGGER users_notify AFTER UPDATE OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION credentials_notify();
CREATE TRIGGER users_truncate_notify AFTER TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_notify();
ALTER TABLE tokens ENABLE ALWAYS TRIGGER tokens_notify;
ALTER TABLE tokens ENABLE ALWAYS TRIGGER tokens_truncate_notify;
ALTER TABLE users ENABLE ALWAYS TRIGGER users_notify;
ALTER TABLE users ENABLE ALWAYS TRIGGER users_truncate_notify;

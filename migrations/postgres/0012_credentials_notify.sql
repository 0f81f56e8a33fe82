-- Tells every instance that a token's validity or a staff user changed, so that each one's
-- cache of who may call (src/auth/cache.rs) forgets what it holds before its next request.
-- Statement triggers: one notification a statement (PostgreSQL folds the same notification
-- within a transaction into one, sent at its commit). A token's last use is not a change.
CREATE FUNCTION credentials_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('practice_credentials', '');
    RETURN NULL;
END $$;
CREATE TRIGGER tokens_notify
    AFTER UPDATE OF kind, secret_hash, permissions, user_id, expires_at, revoked_at OR DELETE
    ON tokens FOR EACH STATEMENT EXECUTE FUNCTION credentials_notify();
CREATE TRIGGER users_notify AFTER UPDATE OR DELETE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION credentials_notify();

-- Nothing on SQLite: it has no notifications, and tokens are not cached on it (see
-- migrations/postgres/0012_credentials_notify.sql and src/auth/cache.rs). Kept so that both
-- engines count the same migrations.
SELECT 1;

-- Nothing on PostgreSQL: its trigram index already holds the practice (see
-- migrations/sqlite/0011_search_by_rowid_range.sql). Kept so that both engines count the same
-- migrations.
SELECT 1;

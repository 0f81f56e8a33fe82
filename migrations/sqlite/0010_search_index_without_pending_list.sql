-- Nothing on SQLite: its full-text table has no pending list (see
-- migrations/postgres/0010_search_index_without_pending_list.sql). Kept so that both engines
-- count the same migrations.
SELECT 1;

-- Substring search (`patients(search:)`) through an index rather than a scan: a trigram index
-- on the text a patient is searched by, led by practice_id like every other index (btree_gin
-- lets a GIN index hold the practice's equality too). PostgreSQL uses it for LIKE '%...%'
-- patterns of three characters or more.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX patients_search ON patients USING gin (practice_id, search_text gin_trgm_ops);

-- Substring search (`patients(search:)`) through an index rather than a scan: a full-text
-- table with SQLite's trigram tokenizer over `patients.search_text` (external content: the
-- text stays in `patients`, the table holds only the index), kept in step by triggers. The
-- store asks it with GLOB '*...*' for searches of three characters or more. The text is
-- lower-cased before it is stored, so the tokenizer keeps case (GLOB needs that to use it).
CREATE VIRTUAL TABLE patients_search USING fts5 (
    search_text,
    content = 'patients',
    content_rowid = 'rowid',
    tokenize = 'trigram case_sensitive 1'
);

CREATE TRIGGER patients_search_insert AFTER INSERT ON patients BEGIN
    INSERT INTO patients_search (rowid, search_text) VALUES (new.rowid, new.search_text);
END;

CREATE TRIGGER patients_search_delete AFTER DELETE ON patients BEGIN
    INSERT INTO patients_search (patients_search, rowid, search_text)
    VALUES ('delete', old.rowid, old.search_text);
END;

CREATE TRIGGER patients_search_update AFTER UPDATE OF search_text ON patients
WHEN old.search_text IS NOT new.search_text BEGIN
    INSERT INTO patients_search (patients_search, rowid, search_text)
    VALUES ('delete', old.rowid, old.search_text);
    INSERT INTO patients_search (rowid, search_text) VALUES (new.rowid, new.search_text);
END;

-- Patients added before this migration.
INSERT INTO patients_search (patients_search) VALUES ('rebuild');

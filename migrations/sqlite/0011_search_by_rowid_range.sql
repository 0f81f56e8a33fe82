-- Patient search, each practice in a range of row numbers of its own: practice number n
-- (patients_search_practices.mark_id) owns the numbers n × 2^32 to n × 2^32 + 2^32 - 1. A search
-- asks the full-text table for a phrase within its practice's range, which FTS5 reads by
-- seeking in each term's list of rows: it reads its own practice's part of the index and
-- nothing of the others'. (0008 marked each row with a token of its practice and asked for
-- the mark AND the phrase, which read the whole of the practice's list of rows for the mark
-- at every search.)
DROP TRIGGER patients_search_insert;
DROP TRIGGER patients_search_delete;
DROP TRIGGER patients_search_update;
DROP VIEW patients_search_marks;
DROP TABLE patients_search;
DROP TABLE patients_search_rows;

CREATE TABLE patients_search_rows (
    row_id       INTEGER PRIMARY KEY,
    practice_id  TEXT    NOT NULL,
    patient_id   TEXT    NOT NULL,
    UNIQUE (practice_id, patient_id)
);

CREATE VIRTUAL TABLE patients_search USING fts5 (
    search_text,
    content = '',
    contentless_delete = 1,
    tokenize = 'trigram case_sensitive 1'
);

-- A new patient takes the next number of its practice's range (the last one taken, read
-- backwards through the table's key, plus one).
CREATE TRIGGER patients_search_insert AFTER INSERT ON patients BEGIN
    INSERT OR IGNORE INTO patients_search_practices (practice_id) VALUES (new.practice_id);
    INSERT INTO patients_search_rows (row_id, practice_id, patient_id)
    SELECT COALESCE(
               (SELECT r.row_id + 1 FROM patients_search_rows r
                WHERE r.row_id BETWEEN p.mark_id * 4294967296
                                   AND p.mark_id * 4294967296 + 4294967295
                ORDER BY r.row_id DESC LIMIT 1),
               p.mark_id * 4294967296),
           new.practice_id, new.id
    FROM patients_search_practices p WHERE p.practice_id = new.practice_id;
    INSERT INTO patients_search (rowid, search_text)
    SELECT row_id, new.search_text FROM patients_search_rows
    WHERE practice_id = new.practice_id AND patient_id = new.id;
END;

CREATE TRIGGER patients_search_delete AFTER DELETE ON patients BEGIN
    DELETE FROM patients_search WHERE rowid = (
        SELECT row_id FROM patients_search_rows
        WHERE practice_id = old.practice_id AND patient_id = old.id);
    DELETE FROM patients_search_rows WHERE practice_id = old.practice_id AND patient_id = old.id;
END;

CREATE TRIGGER patients_search_update AFTER UPDATE OF search_text ON patients
WHEN old.search_text IS NOT new.search_text BEGIN
    DELETE FROM patients_search WHERE rowid = (
        SELECT row_id FROM patients_search_rows
        WHERE practice_id = new.practice_id AND patient_id = new.id);
    INSERT INTO patients_search (rowid, search_text)
    SELECT row_id, new.search_text FROM patients_search_rows
    WHERE practice_id = new.practice_id AND patient_id = new.id;
END;

-- The patients there already, numbered within their practice's range.
INSERT OR IGNORE INTO patients_search_practices (practice_id)
SELECT DISTINCT practice_id FROM patients;
INSERT INTO patients_search_rows (row_id, practice_id, patient_id)
SELECT p.mark_id * 4294967296
         + ROW_NUMBER() OVER (PARTITION BY pa.practice_id ORDER BY pa.id) - 1,
       pa.practice_id, pa.id
FROM patients pa JOIN patients_search_practices p ON p.practice_id = pa.practice_id;
INSERT INTO patients_search (rowid, search_text)
SELECT r.row_id, pa.search_text
FROM patients pa
JOIN patients_search_rows r ON r.practice_id = pa.practice_id AND r.patient_id = pa.id;

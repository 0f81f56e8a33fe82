-- Patient search, rebuilt so that each practice searches its own part of the index, and so
-- that nothing in it hangs on the patients' implicit rowids, which VACUUM may renumber.
--
-- The full-text table (FTS5, trigram tokens) no longer reads its text from `patients`: it
-- holds, for each patient, its text and its practice's mark, under a number of the patient's
-- own (`patients_search_rows.row_id`, an INTEGER PRIMARY KEY, which VACUUM keeps). A
-- practice's mark is three private-use characters made of its own number, a trigram no text
-- holds: asking for the mark AND the text reads the practice's entries, not every practice's.
DROP TRIGGER patients_search_insert;
DROP TRIGGER patients_search_delete;
DROP TRIGGER patients_search_update;
DROP TABLE patients_search;

CREATE TABLE patients_search_practices (
    mark_id      INTEGER PRIMARY KEY,
    practice_id  TEXT    NOT NULL UNIQUE
);

CREATE TABLE patients_search_rows (
    row_id       INTEGER PRIMARY KEY,
    practice_id  TEXT    NOT NULL,
    patient_id   TEXT    NOT NULL,
    UNIQUE (practice_id, patient_id)
);

CREATE VIRTUAL TABLE patients_search USING fts5 (
    practice,
    search_text,
    content = '',
    contentless_delete = 1,
    tokenize = 'trigram case_sensitive 1'
);

-- A practice's mark, from its number: three characters of the private-use area U+E000-U+F8FF.
CREATE VIEW patients_search_marks AS
SELECT practice_id,
       char(57344 + mark_id % 6400, 57344 + mark_id / 6400 % 6400,
            57344 + mark_id / 40960000 % 6400) AS mark
FROM patients_search_practices;

CREATE TRIGGER patients_search_insert AFTER INSERT ON patients BEGIN
    INSERT OR IGNORE INTO patients_search_practices (practice_id) VALUES (new.practice_id);
    INSERT INTO patients_search_rows (practice_id, patient_id) VALUES (new.practice_id, new.id);
    INSERT INTO patients_search (rowid, practice, search_text)
    SELECT r.row_id, m.mark, new.search_text
    FROM patients_search_rows r JOIN patients_search_marks m ON m.practice_id = r.practice_id
    WHERE r.practice_id = new.practice_id AND r.patient_id = new.id;
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
    INSERT INTO patients_search (rowid, practice, search_text)
    SELECT r.row_id, m.mark, new.search_text
    FROM patients_search_rows r JOIN patients_search_marks m ON m.practice_id = r.practice_id
    WHERE r.practice_id = new.practice_id AND r.patient_id = new.id;
END;

-- The patients there already.
INSERT INTO patients_search_practices (practice_id) SELECT DISTINCT practice_id FROM patients;
INSERT INTO patients_search_rows (practice_id, patient_id)
SELECT practice_id, id FROM patients ORDER BY practice_id, id;
INSERT INTO patients_search (rowid, practice, search_text)
SELECT r.row_id, m.mark, p.search_text
FROM patients p
JOIN patients_search_rows r ON r.practice_id = p.practice_id AND r.patient_id = p.id
JOIN patients_search_marks m ON m.practice_id = p.practice_id;

-- The index of five-character pieces (0028) with each piece keyed by its practice, in place of
-- an index led by practice_id. In a GIN index of two columns, practice_id = $1 is a key of its
-- own whose list holds every patient of the practice; a scan moves along that list to each
-- patient the pieces propose, reading a page of it for each (at 1,000,000 patients, a piece in
-- 20 patients cost 42 pages of the index, against 4 with no practice key). A key made of a tag
-- of the practice and the piece keeps a search inside its practice's part of the index, with
-- no such list. The tag is the first six hexadecimal characters of the practice id's MD5: two
-- practices may share one (about one pair in 16.7 million), and a search then also looks at
-- the other practice's patients holding its pieces, whom practice_id = $1 leaves out.
--
-- The tag, in one place, as the keys of a patient's text and those of a term must agree.
-- A SQL function of one expression, which the planner writes in place of its calls in the
-- functions below.
CREATE FUNCTION patient_search_tag(practice TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT left(md5(practice), 6) $$;

-- The same rules as 0028's functions: every piece of the text, counted in characters;
-- IMMUTABLE, as an index expression must be; PL/pgSQL, which the planner never writes in place
-- of the call (it would in the query and not in the index) and whose statements are planned
-- once a session; COST 1000, so that the planner reads the index rather than calling this on
-- each of the practice's rows while entries wait in GIN's list of pending ones.
CREATE FUNCTION patient_search_keys(practice TEXT, t TEXT) RETURNS TEXT[]
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 1000
    AS $$
DECLARE
    tag TEXT := patient_search_tag(practice);
    keys TEXT[] := '{}';
BEGIN
    FOR i IN 1 .. length(t) - 4 LOOP
        keys := keys || (tag || substr(t, i, 5));
    END LOOP;
    RETURN keys;
END
$$;

-- The keys of a term's pieces that a patient's text holding the term must hold: a piece every
-- five characters, and the last five. NULL for a term of fewer than five characters, which
-- matches nothing (the store sends such a term to the trigram index).
CREATE FUNCTION patient_search_cover(practice TEXT, t TEXT) RETURNS TEXT[]
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
DECLARE
    tag TEXT := patient_search_tag(practice);
    n INT := length(t);
    keys TEXT[] := '{}';
BEGIN
    IF n < 5 THEN
        RETURN NULL;
    END IF;
    FOR i IN 0 .. (n - 5) / 5 LOOP
        keys := keys || (tag || substr(t, 1 + 5 * i, 5));
    END LOOP;
    IF (n - 5) % 5 <> 0 THEN
        keys := keys || (tag || substr(t, n - 4, 5));
    END IF;
    RETURN keys;
END
$$;

-- Built before the old index goes, so that reads keep 0028's index while this one is built
-- (writes to patients wait: about 80 s at 1,000,000 patients); the drop, last, holds the table
-- only until the commit. Without GIN's list of pending entries, as 0010 and 0028.
CREATE INDEX patients_search_keys ON patients
    USING gin (patient_search_keys(practice_id, search_text))
    WITH (fastupdate = off);

DROP INDEX patients_search_grams;
DROP FUNCTION patient_search_grams(TEXT);
DROP FUNCTION patient_search_cover(TEXT);

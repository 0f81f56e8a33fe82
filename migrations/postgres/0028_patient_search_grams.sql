-- A search of five characters or more through the five-character pieces of the patient's
-- search text, rather than through its trigrams (0005). A GIN scan costs about the length of
-- the posting list of its rarest key: every trigram of a name or of a number is in thousands
-- of patients at 1,000,000, and each such list grows with the table, while a five-character
-- piece of an email or a number is in a handful. The store asks for the few pieces of the term
-- that cover it (patient_search_cover, below) and then checks the term itself, so a piece only
-- narrows and never decides. The trigram index stays for terms of three or four characters.
--
-- Every piece of the text, spaces and punctuation included, counted in characters (as substr
-- and length count them); a piece found twice is one key (GIN keeps one of each). IMMUTABLE:
-- the same text gives the same pieces, as an index expression must. PL/pgSQL, which the
-- planner never writes in place of the call (a SQL function of one expression it would, in
-- the query and not in the index, whose expression would then no longer be the query's), and
-- whose statements are planned once a session where a SQL function's are planned again for
-- each query that calls it. COST 1000 (of cpu_operator_cost; about 16 microseconds a patient,
-- as it is): the planner would otherwise count a call as cheap, and might rather test each of
-- the practice's patients with it than read the index while its entries wait in GIN's list
-- of pending ones (which a scan reads whole).
CREATE FUNCTION patient_search_grams(t TEXT) RETURNS TEXT[]
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE COST 1000
    AS $$
DECLARE
    pieces TEXT[] := '{}';
BEGIN
    FOR i IN 1 .. length(t) - 4 LOOP
        pieces := pieces || substr(t, i, 5);
    END LOOP;
    RETURN pieces;
END
$$;

-- The pieces of a term that a text holding it must hold: one every five characters, and the
-- last five. Each piece asked for costs a walk into the index, and the check of the term
-- itself decides, so these few are enough. NULL for a term of fewer than five characters,
-- which matches nothing: the store sends such a term to the trigram index. Computed here
-- rather than in Rust, so that a term's pieces are cut exactly as the index's are; in
-- PL/pgSQL, as a SQL function here cost each search 0.1 ms more (its query planned again).
CREATE FUNCTION patient_search_cover(t TEXT) RETURNS TEXT[]
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
DECLARE
    n INT := length(t);
    pieces TEXT[] := '{}';
BEGIN
    IF n < 5 THEN
        RETURN NULL;
    END IF;
    FOR i IN 0 .. (n - 5) / 5 LOOP
        pieces := pieces || substr(t, 1 + 5 * i, 5);
    END LOOP;
    IF (n - 5) % 5 <> 0 THEN
        pieces := pieces || substr(t, n - 4, 5);
    END IF;
    RETURN pieces;
END
$$;

-- Led by practice_id, like every other index (btree_gin, 0005). Writes to patients wait while
-- it is built: about a minute and a half at 1,000,000 patients. Without GIN's list of pending
-- entries, which every scan reads whole, as the trigram index since 0010: after a seeding, 197
-- pages of it made a search of one patient 1.8 ms instead of 0.14. A patient's insert puts
-- its pieces in place instead: 5,000 patients in one statement took 3.2 to 4.1 s, against
-- 1.0 to 1.1 without this index (with a list of 64 kB, 2.3 to 2.4 s, and up to 8 pages to read).
CREATE INDEX patients_search_grams ON patients
    USING gin (practice_id, patient_search_grams(search_text))
    WITH (fastupdate = off);

-- A search of five characters or more through the five-character pieces of the patient's
-- search text, rather than through its trigrams (0005). A GIN scan costs about the length of
-- the posting list of its rarest key: every trigram of a name or of a number is in thousands
-- of patients at 1,000,000, and each such list grows with the table, while a five-character
-- piece of an email or a number is in a handful. The store asks for the few pieces of the term
-- that cover it (patient_search_cover, below) and then checks the term itself, so a piece only
-- narrows and never decides. The trigram index stays for terms of three or four characters.
--
-- Every piece of the text, spaces and punctuation included, counted in characters (as substr
-- and length count them); a piece found twice is one key (GIN keeps one of each).
-- IMMUTABLE: the same text gives the same pieces, as an index expression must. Its body reads
-- FROM a series, which keeps PostgreSQL from writing the body in place of the call (a body of
-- one expression would be, in the query and not in the index, whose expression would then no
-- longer be the query's). COST 1000 (of cpu_operator_cost; tens of microseconds, as it is):
-- without it the planner would count a call as cheap, and might rather test each of the
-- practice's patients with it than read the index, where the index's entries are still in
-- GIN's pending list (which a scan reads whole).
CREATE FUNCTION patient_search_grams(t TEXT) RETURNS TEXT[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE COST 1000
    AS $$ SELECT coalesce(array_agg(substr(t, i, 5)), '{}')
          FROM generate_series(1, length(t) - 4) AS i $$;

-- The pieces of a term that a text holding it must hold: one every five characters, and the
-- last five. Each piece asked for costs a walk into the index, and the check of the term
-- itself decides, so these few are enough.
-- NULL for a term of fewer than five characters, which matches nothing: the store sends such
-- a term to the trigram index. Computed here rather than in Rust, so that a term's pieces
-- are cut exactly as the index's are.
CREATE FUNCTION patient_search_cover(t TEXT) RETURNS TEXT[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT CASE WHEN length(t) >= 5 THEN ARRAY(
        SELECT substr(t, i, 5) FROM generate_series(1, length(t) - 4, 5) AS i
        UNION SELECT substr(t, length(t) - 4, 5)) END $$;

-- Led by practice_id, like every other index (btree_gin, 0005). Writes to patients wait while
-- it is built: about a minute and a half at 1,000,000 patients.
CREATE INDEX patients_search_grams ON patients
    USING gin (practice_id, patient_search_grams(search_text));

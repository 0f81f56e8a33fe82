-- Idempotency keys: the first response to a mutation sent with an `Idempotency-Key` header,
-- kept for 24 hours so that a retry with the same key by the same token gets it again instead
-- of writing twice. `status` is NULL while the first request is still being handled.
CREATE TABLE idempotency_keys (
    practice_id      TEXT    NOT NULL REFERENCES practices (id),
    token_id         TEXT    NOT NULL,
    idempotency_key  TEXT    NOT NULL,
    request_hash     TEXT    NOT NULL,  -- SHA-256 of the query, operation name and variables
    created_at       INTEGER NOT NULL,
    status           INTEGER,
    content_type     TEXT,
    response         TEXT,
    PRIMARY KEY (practice_id, token_id, idempotency_key),
    FOREIGN KEY (practice_id, token_id) REFERENCES tokens (practice_id, id)
);

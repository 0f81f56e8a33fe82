-- Events: every change, recorded in the transaction that makes it (see
-- migrations/sqlite/0009_events.sql for the tables). On PostgreSQL two transactions may commit
-- in another order than they drew their ids, so readers follow events by their position,
-- (tx_id, id), and read only the events of transactions older than the oldest one still
-- running: no transaction with a smaller tx_id can commit afterwards, so a reader never passes
-- an event that has yet to appear. `tx_id` is the writing transaction's id.
CREATE TABLE events (
    id           BIGINT  GENERATED ALWAYS AS IDENTITY,
    tx_id        BIGINT  NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    event_type   TEXT    NOT NULL,
    occurred_at  BIGINT  NOT NULL,
    patient_id   TEXT,
    booking_id   TEXT,
    label_id     TEXT,
    token_id     TEXT,
    user_id      TEXT,
    PRIMARY KEY (practice_id, id)
);
CREATE INDEX events_by_practice ON events (practice_id, tx_id, id);
CREATE INDEX events_by_position ON events (tx_id, id);
CREATE INDEX events_by_time ON events (occurred_at);

-- Wakes every instance's reader of events when a transaction that wrote some commits.
CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('practice_events', '');
    RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_notify();

CREATE TABLE event_floors (
    practice_id  TEXT    NOT NULL PRIMARY KEY REFERENCES practices (id),
    tx_id        BIGINT  NOT NULL,
    id           BIGINT  NOT NULL
);

CREATE TABLE webhook_subscriptions (
    practice_id               TEXT    NOT NULL REFERENCES practices (id),
    id                        TEXT    NOT NULL,
    url                       TEXT    NOT NULL,
    label                     TEXT    NOT NULL,
    headers                   TEXT    NOT NULL,
    secret                    TEXT    NOT NULL,
    previous_secret           TEXT,
    previous_secret_until     BIGINT,
    delivery_paused           BIGINT  NOT NULL DEFAULT 0,
    failing_since             BIGINT,
    deleted_at                BIGINT,
    created_at                BIGINT  NOT NULL,
    updated_at                BIGINT  NOT NULL,
    PRIMARY KEY (practice_id, id)
);

CREATE TABLE webhook_event_types (
    practice_id      TEXT NOT NULL,
    subscription_id  TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    PRIMARY KEY (practice_id, subscription_id, event_type),
    FOREIGN KEY (practice_id, subscription_id)
        REFERENCES webhook_subscriptions (practice_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_event_types_by_type ON webhook_event_types (practice_id, event_type);

CREATE TABLE webhook_deliveries (
    practice_id      TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    subscription_id  TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    event_type       TEXT    NOT NULL,
    identifiers      TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    attempts         BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT,
    lease_until      BIGINT,
    last_status      BIGINT,
    last_error       TEXT,
    last_attempt_at  BIGINT,
    created_at       BIGINT  NOT NULL,
    PRIMARY KEY (practice_id, id),
    FOREIGN KEY (practice_id, subscription_id)
        REFERENCES webhook_subscriptions (practice_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_by_subscription
    ON webhook_deliveries (practice_id, subscription_id, created_at);

CREATE TABLE webhook_attempts (
    practice_id      TEXT    NOT NULL,
    delivery_id      TEXT    NOT NULL,
    attempt          BIGINT  NOT NULL,
    at               BIGINT  NOT NULL,
    response_status  BIGINT,
    error            TEXT,
    PRIMARY KEY (practice_id, delivery_id, attempt),
    FOREIGN KEY (practice_id, delivery_id)
        REFERENCES webhook_deliveries (practice_id, id) ON DELETE CASCADE
);

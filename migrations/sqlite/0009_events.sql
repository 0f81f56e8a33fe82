-- Events: every change, recorded in the transaction that makes it, so that an event exists
-- exactly when its change does. Readers follow them by their position, (tx_id, id): the
-- writing transaction, then the order within it. SQLite writes one transaction at a time, so
-- tx_id is always 0 here and the position is the id; on PostgreSQL it is the transaction's id,
-- which readers compare with the oldest transaction still running, so that they never pass an
-- event whose transaction has yet to commit (see migrations/postgres/0009_events.sql).
--
-- `event_type` is a public type (`patient.created`, ...) or an internal one that no client
-- sees (`token.revoked`, `user.changed`): what a live subscription must know of its token
-- before it hands out another event.
CREATE TABLE events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tx_id        INTEGER NOT NULL DEFAULT 0,
    practice_id  TEXT    NOT NULL REFERENCES practices (id),
    event_type   TEXT    NOT NULL,
    occurred_at  INTEGER NOT NULL,
    patient_id   TEXT,
    booking_id   TEXT,
    label_id     TEXT,
    token_id     TEXT,
    user_id      TEXT
);
CREATE INDEX events_by_practice ON events (practice_id, tx_id, id);
CREATE INDEX events_by_position ON events (tx_id, id);
CREATE INDEX events_by_time ON events (occurred_at);

-- What the retention sweep has deleted of each practice's events: a cursor before it is
-- expired.
CREATE TABLE event_floors (
    practice_id  TEXT    NOT NULL PRIMARY KEY REFERENCES practices (id),
    tx_id        INTEGER NOT NULL,
    id           INTEGER NOT NULL
);

-- Webhook subscriptions: where a practice's events are POSTed, signed (Standard Webhooks).
CREATE TABLE webhook_subscriptions (
    practice_id               TEXT    NOT NULL REFERENCES practices (id),
    id                        TEXT    NOT NULL,
    url                       TEXT    NOT NULL,
    label                     TEXT    NOT NULL,
    headers                   TEXT    NOT NULL,  -- JSON: [{"key", "value"}]
    secret                    TEXT    NOT NULL,  -- whsec_..., to sign; never shown but once
    previous_secret           TEXT,              -- signs too, until previous_secret_until
    previous_secret_until     INTEGER,
    delivery_paused           INTEGER NOT NULL DEFAULT 0,
    failing_since             INTEGER,           -- the first failed attempt since the last success
    deleted_at                INTEGER,
    created_at                INTEGER NOT NULL,
    updated_at                INTEGER NOT NULL,
    PRIMARY KEY (practice_id, id)
);

-- The event types each subscription takes.
CREATE TABLE webhook_event_types (
    practice_id      TEXT NOT NULL,
    subscription_id  TEXT NOT NULL,
    event_type       TEXT NOT NULL,
    PRIMARY KEY (practice_id, subscription_id, event_type),
    FOREIGN KEY (practice_id, subscription_id)
        REFERENCES webhook_subscriptions (practice_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_event_types_by_type ON webhook_event_types (practice_id, event_type);

-- The outbox: one delivery of one event to one subscription, written with the event. A
-- delivery is claimed by one instance at a time, for `lease_until`.
CREATE TABLE webhook_deliveries (
    practice_id      TEXT    NOT NULL,
    id               TEXT    NOT NULL,
    subscription_id  TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,  -- the event's public id: its position
    event_type       TEXT    NOT NULL,
    identifiers      TEXT    NOT NULL,  -- JSON, as the body carries them
    status           TEXT    NOT NULL,  -- 'pending', 'delivered', 'failed', 'paused'
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER,
    lease_until      INTEGER,
    last_status      INTEGER,
    last_error       TEXT,
    last_attempt_at  INTEGER,
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (practice_id, id),
    FOREIGN KEY (practice_id, subscription_id)
        REFERENCES webhook_subscriptions (practice_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_by_subscription
    ON webhook_deliveries (practice_id, subscription_id, created_at);

-- Each attempt of a delivery: the delivery log.
CREATE TABLE webhook_attempts (
    practice_id      TEXT    NOT NULL,
    delivery_id      TEXT    NOT NULL,
    attempt          INTEGER NOT NULL,
    at               INTEGER NOT NULL,
    response_status  INTEGER,
    error            TEXT,
    PRIMARY KEY (practice_id, delivery_id, attempt),
    FOREIGN KEY (practice_id, delivery_id)
        REFERENCES webhook_deliveries (practice_id, id) ON DELETE CASCADE
);

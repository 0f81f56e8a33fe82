-- The sweeps that delete what is past its retention (src/events/retention.rs, the
-- idempotency keys' hourly sweep) find it by age: without these indexes each batch read the
-- whole table, under the write lock, even when nothing was old. (SQLite's events_by_time,
-- on occurred_at, is already in the order of (occurred_at, id): its entries end with the row id.)
CREATE INDEX webhook_deliveries_by_age ON webhook_deliveries (created_at);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);

-- The sweeps that delete what is past its retention (src/events/retention.rs, the
-- idempotency keys' hourly sweep) find it by age: without these indexes each batch read the
-- whole table, under the write lock, even when nothing was old. Old events go in the order
-- of (occurred_at, id), which the index of their time now holds whole.
DROP INDEX events_by_time;
CREATE INDEX events_by_time ON events (occurred_at, id);
CREATE INDEX webhook_deliveries_by_age ON webhook_deliveries (created_at);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
